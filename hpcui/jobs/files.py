"""A job's folder as files: list, read, and download with resume (checkpoints can be GBs,
and laptops lose Wi-Fi). The folder is hpcui's job folder for its own jobs, the working
directory the scheduler reports for any other job."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hpcui.backends.files import list_command, parse_listing
from hpcui.backends.records import RemoteFile
from hpcui.errors import UsageError
from hpcui.jobs.file_download import download
from hpcui.jobs.transfer import Transfer, download_tree
from hpcui.jobs.upload import upload
from hpcui.transport.base import Transport

#: what `read_text` shows of a file at most
VIEW_BYTES = 1024 * 1024


class JobFiles:
    """A cluster's files as the user browses them (`cluster.files`); `folder_of(job_id)`
    says where a job's files are (hpcui's job folder, else the job's working directory)."""

    def __init__(self, transport: Transport, *, folder_of: Callable[[str], str]) -> None:
        self.transport = transport
        self._folder_of = folder_of

    def folder(self, job_id: str) -> str:
        """Where a job's files are: hpcui's job folder, else the job's working directory."""
        return self._folder_of(str(job_id))

    def list(self, path: str) -> list[RemoteFile]:
        """A remote folder's entries, folders first (one round trip)."""
        return list_folder(self.transport, path)

    def read_text(self, path: str, limit: int = VIEW_BYTES) -> tuple[str, int]:
        """The start of a remote file as text, and its size."""
        return read_text(self.transport, path, limit)

    def download(
        self,
        remote: str,
        local: str | Path,
        *,
        progress: Callable[[int, int], None] | None = None,
        note: Callable[[str], None] | None = None,
    ) -> tuple[int, Path]:
        """Copy a remote file here, resuming a partial copy (`<name>.part`) of the same
        version of the file: bytes moved now, and where the file is."""
        return download(self.transport, remote, Path(local), progress=progress, note=note)

    def fetch(
        self,
        remote: str,
        local: str | Path,
        *,
        into: bool = True,
        checksum: bool = False,
        progress: Callable[[int, int], None] | None = None,
        note: Callable[[str], None] | None = None,
    ) -> Transfer:
        """Copy a remote file or folder here (a folder into `local/<its name>`, or into
        `local` itself when not `into`): only what differs, resumably, each file renamed
        into place when whole (`hpcui.jobs.transfer`)."""
        return download_tree(
            self.transport, remote, Path(local), into=into, progress=progress, note=note,
            checksum=checksum,
        )  # fmt: skip

    def upload(
        self,
        local: str | Path,
        remote: str,
        *,
        into: bool = True,
        checksum: bool = False,
        progress: Callable[[int, int], None] | None = None,
        note: Callable[[str], None] | None = None,
    ) -> Transfer:
        """Copy a file or folder of this machine to the cluster, with `fetch`'s guarantees."""
        return upload(
            self.transport, Path(local), remote, into=into, progress=progress, note=note,
            checksum=checksum,
        )  # fmt: skip


def list_folder(transport: Transport, path: str) -> list[RemoteFile]:
    res = transport.run(list_command(path))
    if res.exit_status == 2:
        raise UsageError(f"There is no folder {path} on the cluster (cleaned, or moved?).")
    if res.exit_status == 3:
        raise UsageError(f"{path} is a file, not a folder: view or download it instead.")
    res.check(f"listing {path}")
    return parse_listing(res.stdout, path)


def read_text(transport: Transport, path: str, limit: int = VIEW_BYTES) -> tuple[str, int]:
    """The first `limit` bytes of a file as text, and its full size."""
    size = transport.stat_size(path)
    if size is None:
        raise UsageError(f"There is no file {path} on the cluster.")
    data = transport.read_file(path, offset=0, length=min(size, limit))
    return data.decode("utf-8", "replace"), size
