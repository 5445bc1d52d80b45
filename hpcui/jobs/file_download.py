"""One remote file copied here, resumably: a checkpoint can be GBs and laptops lose
Wi-Fi. The part file continues only while the remote file is the same version, and is
never written through a link someone planted in a shared download folder."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

from hpcui.errors import UsageError
from hpcui.transport.base import Transport

#: bytes per read: large enough for throughput (from 8 MiB a read goes through a plain
#: channel, twice SFTP's speed), small enough to resume cheaply
CHUNK = 8 * 1024 * 1024
#: bytes per upload write (SFTP, into the part file at its offset)
UP_CHUNK = 4 * 1024 * 1024


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

    `.part` and `.part.src` are opened without following links and must be this user's
    own regular files: in a shared download folder a planted link cannot redirect bytes.
    """
    st = transport.stat_file(remote)
    if st is None:
        raise UsageError(f"There is no file {remote} on the cluster.")
    if st.is_dir:
        raise UsageError(f"{remote} is a folder: copy it with `fetch` (`hpcui download`).")
    size = st.size
    if local.is_dir():
        local = local / Path(remote).name
    part = local.with_name(local.name + ".part")
    src = local.with_name(local.name + ".part.src")
    origin = json.dumps({"remote": remote, "size": st.size, "mtime": st.mtime})
    fd = _open_own(part, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        done = os.fstat(fd).st_size
        if done and (_read_own(src) != origin or done > size):
            if note:
                note(
                    f"{remote} changed since the partial download ({done} bytes kept in "
                    f"{part.name}): starting over, so the copy is not half old, half new."
                )
            os.ftruncate(fd, 0)
            done = 0
        _write_own(src, origin)
        moved = 0
        if progress:
            progress(done, size)
        while done < size:
            data = transport.read_file(remote, offset=done, length=min(CHUNK, size - done))
            if not data:
                raise UsageError(
                    f"{remote} shrank while downloading ({done} of {size} bytes): run the "
                    "download again."
                )
            os.write(fd, data)
            done += len(data)
            moved += len(data)
            if progress:
                progress(done, size)
    finally:
        os.close(fd)
    after = transport.stat_file(remote)
    if after is None or (after.size, after.mtime) != (st.size, st.mtime):
        part.unlink(missing_ok=True)
        src.unlink(missing_ok=True)
        raise UsageError(
            f"{remote} changed while it was downloading (a job still writing it?): the copy "
            "was thrown away. Download it again once it is written."
        )
    part.replace(local)
    src.unlink(missing_ok=True)
    return moved, local


def _open_own(path: Path, flags: int) -> int:
    """Open without following a link; refuse anything but this user's regular file."""
    try:
        fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as exc:
        if path.is_symlink():
            raise UsageError(
                f"{path} is a symbolic link: hpcui never writes a download through one. "
                "Remove it (someone else may have put it there) and download again."
            ) from None
        raise UsageError(f"Cannot write {path}: {exc.strerror}.") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()):
        os.close(fd)
        raise UsageError(
            f"{path} is not a file of yours: hpcui does not write a download into it. "
            "Remove it (someone else may have put it there) and download again."
        )
    return fd


def _read_own(path: Path) -> str | None:
    try:
        fd = _open_own(path, os.O_RDONLY)
    except UsageError:
        return None
    with os.fdopen(fd, encoding="utf-8") as fh:
        return fh.read()


def _write_own(path: Path, text: str) -> None:
    fd = _open_own(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
