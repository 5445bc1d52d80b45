"""Folders both ways between this machine and a cluster, as rsync users expect: only what
differs (size and mtime, or a checksum on request) moves; nothing half-written is ever in
place under its name (each file lands as a part file, renamed when whole); an interrupted
copy resumes where it stopped (whole files are skipped, a big file's part continues);
mtimes and permission bits are kept, so the next run compares them.

Many small files (TensorBoard runs, configs) travel as one tar per batch: a file costs
no round trip of its own. Big files go in resumable chunks."""

from __future__ import annotations

import functools
import hashlib
import io
import os
import stat
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from hpcui.backends.files import parse_tree, tree_command
from hpcui.backends.shell import quote
from hpcui.errors import UsageError
from hpcui.jobs.file_download import _open_own, download
from hpcui.transport.base import Transport

#: files up to this size travel in a batch (one tar), bigger ones alone, resumably
SMALL = 1024 * 1024
#: a batch holds at most this many bytes and files
BATCH_BYTES = 32 * 1024 * 1024
BATCH_FILES = 2000
#: a file whose mtime differs by less than this is the same version (SFTP and some
#: filesystems keep whole seconds; rsync's --modify-window)
MTIME_WINDOW_S = 1.0
PART_PREFIX = ".hpcui-part-"

Progress = Callable[[int, int], None]
Note = Callable[[str], None]


@dataclass
class Entry:
    """A file of one side: relative path, size, mtime, permission bits."""

    rel: str
    size: int
    mtime: float
    mode: int = 0o644


@dataclass
class Transfer:
    """What one copy did: files copied now, skipped as already there, bytes moved now, and
    the bytes of everything it had to copy."""

    source: str
    target: str
    copied: int = 0
    skipped: int = 0
    moved: int = 0
    total: int = 0
    links: list[str] = field(default_factory=list)
    verified: int = 0

    def summary(self) -> str:
        said = f"{self.copied} file(s) copied, {self.skipped} already there"
        if self.verified:
            said += f", {self.verified} checked by SHA-256"
        if self.links:
            said += f"; {len(self.links)} symbolic link(s) not copied ({self.links[0]}, ...)"
        return said


def same(a: Entry, b: Entry) -> bool:
    return a.size == b.size and abs(a.mtime - b.mtime) < MTIME_WINDOW_S


class _Meter:
    """One progress line over many files: each file's (done, total) as part of the whole."""

    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total, self.base, self.progress = total, 0, progress

    def file(self, size: int) -> Progress | None:
        base = self.base
        self.base += size
        show = self.progress
        if show is None:
            return None
        return lambda done, _t: show(base + done, self.total)

    def show(self) -> None:
        if self.progress:
            self.progress(self.base, self.total)


# --- the remote side ----------------------------------------------------------------------


def remote_tree(
    transport: Transport, path: str
) -> tuple[str, dict[str, Entry], set[str], list[str]]:
    """What is at `path`: ("dir", files, folders, links), ("file", ...) or ("none", ...)."""
    res = transport.run(tree_command(path))
    if res.exit_status == 3:
        return "file", {}, set(), []
    if res.exit_status == 2:
        return "none", {}, set(), []
    res.check(f"listing {path}")
    files: dict[str, Entry] = {}
    dirs: set[str] = set()
    links: list[str] = []
    for kind, rel, size, mtime, mode in parse_tree(res.stdout):
        if kind == "d":
            dirs.add(rel)
        elif kind == "f":
            files[rel] = Entry(rel, size, mtime, mode)
        else:
            links.append(rel)
    return "dir", files, dirs, links


def remote_sums(transport: Transport, root: str, rels: list[str]) -> dict[str, str]:
    """SHA-256 of files under `root`, computed there (names on stdin: no length limit)."""
    if not rels:
        return {}
    res = transport.run(
        f"cd {quote(root)} && xargs -0 -r sha256sum -z --",
        stdin=b"\0".join(os.fsencode(r) for r in rels) + b"\0",
    ).check(f"checksumming files under {root}")
    sums = {}
    for line in res.stdout.split("\0"):
        digest, sep, name = line.partition("  ")
        if sep:
            sums[name] = digest
    return sums


def local_sum(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --- downloads ----------------------------------------------------------------------------


def download_tree(
    transport: Transport,
    remote: str,
    local: Path,
    *,
    into: bool = True,
    progress: Progress | None = None,
    note: Note | None = None,
    checksum: bool = False,
) -> Transfer:
    """Copy the remote folder `remote` here: into `local/<its name>` (`into`, as `scp -r`
    does into a folder), else into `local` itself (`sync`, as `rsync -a SRC/ DEST/`)."""
    kind, files, dirs, links = remote_tree(transport, remote)
    if kind == "none":
        raise UsageError(f"There is no file or folder {remote} on the cluster.")
    if kind == "file":
        moved, where = download(transport, remote, local, progress=progress, note=note)
        return Transfer(remote, str(where), copied=1, moved=moved, total=moved)
    top = local / PurePosixPath(remote.rstrip("/")).name if into else local
    result = Transfer(remote, str(top), links=links)
    _local_folder(top)
    for rel in sorted(dirs, key=lambda r: r.split("/")):
        _local_folder(top / rel)
    have = _local_files(top)
    todo = [e for rel, e in files.items() if rel not in have or not same(e, have[rel])]
    sums: dict[str, str] = {}
    if checksum:  # same size and mtime is not enough: compare contents too
        sums = remote_sums(transport, remote, sorted(files))
        todo += [
            e
            for rel, e in files.items()
            if rel in have and same(e, have[rel]) and local_sum(top / rel) != sums.get(rel)
        ]
    result.skipped = len(files) - len(todo)

    def big(e: Entry, shown: Progress | None) -> int:
        moved, where = download(
            transport, f"{remote.rstrip('/')}/{e.rel}", top / e.rel, progress=shown, note=note
        )
        _keep_times(where, e)
        return moved

    _copy_all(
        todo, result, progress, lambda batch: _download_batch(transport, remote, top, batch), big
    )
    if checksum:
        bad = [e.rel for e in todo if local_sum(top / e.rel) != sums.get(e.rel)]
        if bad:
            for rel in bad:
                (top / rel).unlink(missing_ok=True)
            raise UsageError(
                f"{len(bad)} file(s) differ from the cluster's after the copy ({bad[0]}, ...): "
                "they were removed here. Download again (a file still being written?)."
            )
        result.verified = len(files)
    return result


def _copy_all(
    todo: list[Entry],
    result: Transfer,
    progress: Progress | None,
    small: Callable[[list[Entry]], int],
    big: Callable[[Entry, Progress | None], int],
) -> None:
    """Small files in batches first (seconds for thousands), then big ones one by one,
    with one progress line over all: both directions copy this way."""
    result.total = sum(e.size for e in todo)
    meter = _Meter(result.total, progress)
    meter.show()
    for batch in _batches([e for e in todo if e.size <= SMALL]):
        result.moved += small(batch)
        result.copied += len(batch)
        meter.base += sum(e.size for e in batch)
        meter.show()
    for e in todo:
        if e.size > SMALL:
            result.moved += big(e, meter.file(e.size))
            result.copied += 1


def _batches(entries: list[Entry]) -> Iterator[list[Entry]]:
    batch: list[Entry] = []
    size = 0
    for e in entries:
        if batch and (size + e.size > BATCH_BYTES or len(batch) >= BATCH_FILES):
            yield batch
            batch, size = [], 0
        batch.append(e)
        size += e.size
    if batch:
        yield batch


def _download_batch(transport: Transport, remote: str, top: Path, batch: list[Entry]) -> int:
    """Small files as one tar from the cluster; each lands as `.part` and is renamed."""
    res = transport.run(
        f"cd {quote(remote)} && tar --null --no-recursion -T - -cf -",
        stdin=b"\0".join(os.fsencode(e.rel) for e in batch) + b"\0",
    )
    if not res.stdout_bytes:
        raise UsageError(
            f"Reading {len(batch)} file(s) under {remote} failed: "
            f"{res.stderr.strip()[:200] or 'no output'}. Run the copy again: what arrived is kept."
        )
    wanted = {e.rel: e for e in batch}
    moved = 0
    got: set[str] = set()
    with tarfile.open(fileobj=io.BytesIO(res.stdout_bytes), mode="r:") as tar:
        for member in tar:
            e = wanted.get(member.name)
            if e is None or not member.isfile():
                continue
            src = tar.extractfile(member)
            if src is None:
                continue
            dest = top / e.rel
            part = dest.with_name(dest.name + ".part")
            fd = _open_own(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            with os.fdopen(fd, "wb") as fh:
                data = src.read()
                fh.write(data)
            part.replace(dest)
            _keep_times(dest, Entry(e.rel, member.size, float(member.mtime), member.mode))
            moved += len(data)
            got.add(e.rel)
    missing = [rel for rel in wanted if rel not in got]
    if missing:
        raise UsageError(
            f"{len(missing)} file(s) could not be read on the cluster ({missing[0]}, ...: "
            f"{res.stderr.strip()[:200] or 'removed meanwhile?'}). Run the copy again: what "
            "arrived is kept."
        )
    return moved


def _local_folder(path: Path) -> None:
    """Make a folder of the copy; never follow a link someone planted there."""
    if path.is_symlink():
        raise UsageError(
            f"{path} is a symbolic link: hpcui never copies through one. Remove it and "
            "run the copy again."
        )
    path.mkdir(parents=True, exist_ok=True)


def _local_files(top: Path) -> dict[str, Entry]:
    """The regular files under `top` (links not followed), by relative path."""
    out: dict[str, Entry] = {}
    if not top.is_dir():
        return out
    for root, _dirs, names in os.walk(top):
        for name in names:
            path = Path(root) / name
            st = path.lstat()
            if stat.S_ISREG(st.st_mode):
                rel = path.relative_to(top).as_posix()
                out[rel] = Entry(rel, st.st_size, st.st_mtime, stat.S_IMODE(st.st_mode))
    return out


def _keep_times(path: Path, e: Entry) -> None:
    os.utime(path, (e.mtime, e.mtime))
    os.chmod(path, e.mode & 0o777 & ~_umask())


@functools.cache
def _umask() -> int:
    """This process's umask, read once: setting it to read it (os.umask has no getter)
    leaves 0 in force for a moment, for every thread (the app copies in workers while
    others write files). Linux says it in /proc/self/status without that."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)  # the safe side while it is away from its value
    os.umask(mask)
    return mask
