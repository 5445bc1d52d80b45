"""An exclusive lock on an open file, with each platform's own call.

POSIX has flock (fcntl); Windows has msvcrt.locking on a byte range. A Python without
either (none that hpcui knows of, but tests hide fcntl to play Windows on Linux) gets a
lock directory beside the file, which every file system has. Standard library only: the
compute side (gpu_slots) uses it too.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import IO, Any

try:
    import fcntl
except ImportError:  # Windows (and tests that play it)
    fcntl = None  # type: ignore[assignment]  # Windows: msvcrt locks instead
try:
    import msvcrt
except ImportError:  # everything but Windows
    msvcrt = None  # type: ignore[assignment]  # POSIX: fcntl locks instead

#: a lock directory older than this belonged to a process that died holding it
STALE_S = 60.0


class LockBusy(Exception):
    """The lock is held elsewhere and the caller asked not to wait."""


def _fd(file: IO[Any] | int) -> int:
    return file if isinstance(file, int) else file.fileno()


@contextlib.contextmanager
def locked(
    file: IO[Any] | int, path: str | os.PathLike[str], *, wait: bool = True
) -> Iterator[None]:
    """Hold an exclusive lock on `file` (opened from `path`) for the block; LockBusy when
    `wait` is False and another process holds it."""
    fd = _fd(file)
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError as exc:
            raise LockBusy(str(path)) from exc
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    elif msvcrt is not None:  # pragma: no cover - Windows
        pos = os.lseek(fd, 0, os.SEEK_CUR)
        os.lseek(fd, 0, os.SEEK_SET)
        while True:
            try:
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # byte 0: a lock, not the data
                break
            except OSError as exc:
                if not wait:
                    raise LockBusy(str(path)) from exc
                time.sleep(0.02)
        os.lseek(fd, pos, os.SEEK_SET)
        try:
            yield
        finally:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
            os.lseek(fd, pos, os.SEEK_SET)
    else:
        with _lock_dir(f"{os.fspath(path)}.lockdir", wait=wait):
            yield


@contextlib.contextmanager
def _lock_dir(path: str, *, wait: bool) -> Iterator[None]:
    while True:
        try:
            os.mkdir(path, 0o700)
            break
        except FileExistsError as exc:
            with contextlib.suppress(OSError):
                if time.time() - os.stat(path).st_mtime > STALE_S:
                    os.rmdir(path)
                    continue
            if not wait:
                raise LockBusy(path) from exc
            time.sleep(0.02)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(path)
