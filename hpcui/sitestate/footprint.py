"""How much of the user's quota hpcui's own folders take (`remote_base`: job folders,
runtime bundles). HPC homes have small file quotas (100k files is common) and every job
leaves a folder, so `hpcui quota` and the Cluster screen say it, and warn when it is a
large share of the file limit (`hpcui clean` frees it)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ConfigDict

from hpcui.backends.model import Model
from hpcui.backends.quota import QuotaEntry
from hpcui.transport.base import Transport

#: a share of the file limit from which hpcui's own files are worth a warning
WARN_SHARE = 0.2


class OwnUsage(Model):
    model_config = ConfigDict(frozen=True)

    base: str
    files: int  # inodes: files, folders and links all count against a file quota
    bytes: int
    #: of the file limit of the quota entry whose filesystem holds `base` (None: unknown)
    share_of_file_limit: float | None = None
    filesystem: str | None = None

    @property
    def warn(self) -> bool:
        return self.share_of_file_limit is not None and self.share_of_file_limit >= WARN_SHARE


def own_usage_command(base_word: str) -> str:
    """One line: inodes and KiB under the job base (nothing when it does not exist)."""
    return (
        f'b={base_word}; [ -d "$b" ] || exit 0; cd "$b" && '
        'printf \'%s %s %s\\n\' "$(find . | wc -l)" "$(du -sk . | cut -f1)" "$(pwd)"'
    )


def parse_own_usage(text: str, entries: Sequence[QuotaEntry]) -> OwnUsage | None:
    parts = text.strip().split(" ", 2)
    if len(parts) != 3 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    files, kib, base = int(parts[0]), int(parts[1]), parts[2]
    entry = holding(base, entries)
    limit = None if entry is None else (entry.files_soft or entry.files_hard)
    return OwnUsage(
        base=base,
        files=files,
        bytes=kib * 1024,
        share_of_file_limit=None if not limit else files / limit,
        filesystem=None if entry is None else entry.filesystem,
    )


def holding(path: str, entries: Sequence[QuotaEntry]) -> QuotaEntry | None:
    """The entry with a file limit whose filesystem is the longest path prefix of `path`."""
    best = None
    for e in entries:
        fs = e.filesystem.rstrip("/") or "/"
        inside = path == fs or path.startswith(fs if fs.endswith("/") else fs + "/")
        if inside and (e.files_soft or e.files_hard):
            if best is None or len(fs) > len(best.filesystem.rstrip("/")):
                best = e
    return best


def fetch_own_usage(
    transport: Transport, base_word: str, entries: Sequence[QuotaEntry]
) -> OwnUsage | None:
    res = transport.run(own_usage_command(base_word))
    return parse_own_usage(res.stdout, entries) if res.ok else None
