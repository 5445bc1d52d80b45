"""A job's folder as files: list, read, and download with resume (checkpoints can be GBs,
and laptops lose Wi-Fi). The folder is hpcui's job folder for its own jobs, the working
directory the scheduler reports for any other job."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from hpcui.backends.files import list_command, parse_listing
from hpcui.backends.records import RemoteFile
from hpcui.errors import UsageError
from hpcui.transport.base import Transport

#: bytes per read: large enough for throughput, small enough to resume cheaply
CHUNK = 4 * 1024 * 1024
#: what `read_text` shows of a file at most
VIEW_BYTES = 1024 * 1024


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


def download(
    transport: Transport,
    remote: str,
    local: Path,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[int, Path]:
    """Copy `remote` to `local` (a file, or a folder to put it in). A partial download is
    kept as `<name>.part` and continued from where it stopped; the file appears under its
    name only when complete. Returns the bytes transferred now and the local path."""
    size = transport.stat_size(remote)
    if size is None:
        raise UsageError(
            f"There is no file {remote} on the cluster (a folder? download its files)."
        )
    if local.is_dir():
        local = local / Path(remote).name
    part = local.with_name(local.name + ".part")
    done = part.stat().st_size if part.exists() else 0
    if done > size:  # the remote file was replaced by a smaller one: start over
        part.unlink()
        done = 0
    moved = 0
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
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
    part.replace(local)
    return moved, local
