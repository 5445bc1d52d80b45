"""One remote file copied here, resumably: a checkpoint can be GBs and laptops lose
Wi-Fi. The part file continues only while the remote file is the same version, and is
never written through a link someone planted in a shared download folder."""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hpcui.common import beneath, file_lock
from hpcui.errors import UsageError
from hpcui.jobs.beneath_remote import full_disk
from hpcui.transport.base import Transport

#: bytes per read: large enough for throughput (from 8 MiB a read goes through a plain
#: channel, twice SFTP's speed), small enough to resume cheaply
CHUNK = 8 * 1024 * 1024


def download(
    transport: Transport,
    remote: str,
    local: Path,
    *,
    progress: Callable[[int, int], None] | None = None,
    note: Callable[[str], None] | None = None,
) -> tuple[int, Path]:
    """Copy `remote` to `local` (a file, or a folder to put it in). A partial download is
    kept as `<name>.part` and continued from where it stopped, but only while the remote
    file is still the one it came from (same size and mtime, kept in `<name>.part.src`):
    a checkpoint rewritten since starts over, said through `note`. The file appears under
    its name only when complete. Returns the bytes transferred now and the local path.

    The remote path is followed as the user typed it (as scp does); the local part files
    are opened beneath their folder without following links (`resume_into`).
    """
    st = transport.stat_file(remote)
    if st is None:
        raise UsageError(f"There is no file {remote} on the cluster.")
    if st.is_dir:
        raise UsageError(f"{remote} is a folder: copy it with `fetch` (`hpcui download`).")
    if local.is_dir():
        local = local / Path(remote).name
    at = beneath.open_top(os.fsencode(local.parent), create=True)

    def verify() -> None:
        after = transport.stat_file(remote)
        if after is None or (after.size, after.mtime) != (st.size, st.mtime):
            raise UsageError(
                f"{remote} changed while it was downloading (a job still writing it?): the "
                "copy was thrown away. Download it again once it is written."
            )

    try:
        moved = resume_into(
            at, os.fsencode(local.name), str(local), Origin(remote, st.size, st.mtime, None),
            lambda offset, n: transport.read_file(remote, offset=offset, length=n),
            verify, progress=progress, note=note,
        )  # fmt: skip
    finally:
        beneath._close(at)
    return moved, local


@dataclass(frozen=True)
class Origin:
    """What a part file is a copy of: the remote file's path, size and mtime (and mode,
    given to the file when whole, or None to keep this machine's default)."""

    remote: str
    size: int
    mtime: float
    mode: int | None

    def key(self) -> str:
        return json.dumps({"remote": self.remote, "size": self.size, "mtime": self.mtime})


def resume_into(
    at: int | bytes,
    name: bytes,
    shown: str,
    origin: Origin,
    read: Callable[[int, int], bytes],
    verify: Callable[[], None],
    *,
    progress: Callable[[int, int], None] | None = None,
    note: Callable[[str], None] | None = None,
) -> int:
    """Fill `name` (in the open folder `at`) from `read(offset, length)` through its part
    file, continuing a part of the same origin. The part is this user's own regular
    file, opened without following a link, and locked: a second copy of the same file
    (the app and a script) waits for the first, then finds the file there."""
    part, src = name + b".part", name + b".part.src"
    for _ in range(3):
        fd = _own(at, part, os.O_WRONLY | os.O_CREAT, shown)
        try:
            try:
                with file_lock.locked(fd, shown + ".part", wait=False):
                    return _fill(
                        at, name, fd, part, src, shown, origin, read, verify, progress, note
                    )
            except file_lock.LockBusy:
                if note:
                    note(f"another copy of {shown} is running here: waiting for it to finish")
            with file_lock.locked(fd, shown + ".part"):
                pass  # the other copy is done
            if _same_file(at, name, origin):
                return 0
        finally:
            os.close(fd)
    raise UsageError(f"{shown} is being copied by other runs over and over: try again later.")


def _fill(
    at: int | bytes, name: bytes, fd: int, part: bytes, src: bytes, shown: str, origin: Origin,
    read: Callable[[int, int], bytes], verify: Callable[[], None],
    progress: Callable[[int, int], None] | None, note: Callable[[str], None] | None,
) -> int:  # fmt: skip
    size = origin.size
    done = os.fstat(fd).st_size
    if done and (_read_own(at, src, shown) != origin.key() or done > size):
        if note:
            note(
                f"{origin.remote} changed since the partial download ({done} bytes kept in "
                f"{shown}.part): starting over, so the copy is not half old, half new."
            )
        done = 0
    os.ftruncate(fd, done)
    os.lseek(fd, done, os.SEEK_SET)
    _write_own(at, src, origin.key(), shown)
    moved = 0
    if progress:
        progress(done, size)
    try:
        while done < size:
            data = read(done, min(CHUNK, size - done))
            if not data:
                raise UsageError(
                    f"{origin.remote} shrank while downloading ({done} of {size} bytes): run "
                    "the download again."
                )
            os.write(fd, data)
            done += len(data)
            moved += len(data)
            if progress:
                progress(done, size)
        verify()
        if origin.mode is not None:
            beneath._set(fd, origin.mode & 0o777 & ~beneath.umask(), None)
        if os.utime in os.supports_fd:
            os.utime(fd, (origin.mtime, origin.mtime))
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            raise
        free = _free_here(shown)
        beneath._unlink(part, at)
        beneath._unlink(src, at)
        raise full_disk(shown, "here", done, free) from None
    except UsageError:
        beneath._unlink(part, at)
        beneath._unlink(src, at)
        raise
    beneath._set_path(
        part,
        at,
        0o600 if origin.mode is None else origin.mode & 0o777 & ~beneath.umask(),
        origin.mtime,
    )
    beneath._rename(part, name, at)
    beneath._unlink(src, at)
    return moved


def _same_file(at: int | bytes, name: bytes, origin: Origin) -> bool:
    """Whether `name` is already the whole copy of `origin` (another run finished it)."""
    try:
        st = beneath.lstat(name, at)
    except OSError:
        return False
    return (
        stat.S_ISREG(st.st_mode)
        and st.st_size == origin.size
        and abs(st.st_mtime - origin.mtime) < 1.0
    )


def _free_here(path: str) -> int | None:
    try:
        return shutil.disk_usage(os.path.dirname(path) or ".").free
    except OSError:
        return None


def _own(at: int | bytes, name: bytes, flags: int, shown: str) -> int:
    """Open without following a link; refuse anything but this user's regular file."""
    try:
        return beneath._own_file(name, at, flags, name)
    except beneath.Refused:
        raise UsageError(
            f"{shown}.part is a symbolic link, or not a file of yours: hpcui never writes a "
            "download through one. Remove it (someone else may have put it there) and download again."
        ) from None
    except OSError as exc:
        raise UsageError(f"Cannot write {shown}.part: {exc.strerror}.") from None


def _read_own(at: int | bytes, name: bytes, shown: str) -> str | None:
    try:
        fd = _own(at, name, os.O_RDONLY, shown)
    except UsageError:
        return None
    with os.fdopen(fd, encoding="utf-8") as fh:
        return fh.read()


def _write_own(at: int | bytes, name: bytes, text: str, shown: str) -> None:
    fd = _own(at, name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, shown)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
