"""Local transport: the same interface on this machine, through subprocess."""

from __future__ import annotations

import os
import socket
import stat as _stat
import subprocess
from collections.abc import Iterable

from hpcui.errors import CommandTimeout, UsageError
from hpcui.transport.base import Command, CommandResult, RemoteStat, Transport
from hpcui.transport.quoting import quote_bytes, to_command


class LocalTransport(Transport):
    """Runs commands with /bin/sh on this machine; files are plain files."""

    description = "local"

    def run(
        self, cmd: Command, *, timeout: float | None = None, stdin: bytes | None = None
    ) -> CommandResult:
        raw = to_command(cmd)
        try:
            proc = subprocess.run(
                raw,
                shell=True,
                input=stdin if stdin is not None else b"",
                capture_output=True,
                timeout=timeout,
                executable="/bin/sh",
            )
        except subprocess.TimeoutExpired:
            raise CommandTimeout(
                f"`{raw[:200].decode(errors='replace')}` did not finish within {timeout} s."
            ) from None
        return CommandResult(
            proc.returncode, proc.stdout, proc.stderr, raw.decode("utf-8", "replace")
        )

    def open_tunnel(self, host: str, port: int) -> socket.socket:
        """The local cluster's jobs run here: a plain connection."""
        try:
            return socket.create_connection((host, port), timeout=10)
        except OSError as exc:
            raise UsageError(
                f"Nothing answers on {host}:{port} ({exc.strerror or exc}): is the service up yet?"
            ) from None

    def _put_files(
        self, directory: str, files: dict[str, bytes], then: Command | None, first: Command | None
    ) -> CommandResult:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)  # private, as over SSH: a service's token lands in it
        for name, content in files.items():
            if name.startswith("/") or ".." in name.split("/"):
                raise ValueError(f"put_files needs relative names inside the folder, got {name!r}")
            self.write_file(os.path.join(directory, name), content)
        # files land whole at once here (no unpacking): `first` and `then` run in one shell,
        # as over SSH
        steps = [to_command(c) for c in (first, then) if c is not None]
        if steps:
            return self.run(b"cd " + quote_bytes(directory) + b" && " + b" && ".join(steps))
        return CommandResult(0, b"", b"", "put_files")

    def write_file(
        self,
        path: str,
        data: bytes | Iterable[bytes],
        *,
        mode: int | None = 0o600,
        offset: int | None = None,
    ) -> int:
        path = os.path.expanduser(path)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        written = 0
        if offset is not None:  # into the file as it is, from `offset` on
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644 if mode is None else mode)
            with os.fdopen(fd, "wb") as fh:
                fh.seek(offset)
                for chunk in [data] if isinstance(data, bytes) else data:
                    fh.write(chunk)
                    written += len(chunk)
            return written
        tmp = f"{path}.tmp{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644 if mode is None else mode)
        with os.fdopen(fd, "wb") as fh:
            for chunk in [data] if isinstance(data, bytes) else data:
                fh.write(chunk)
                written += len(chunk)
        os.replace(tmp, path)
        return written

    def read_file(self, path: str, *, offset: int = 0, length: int | None = None) -> bytes:
        with open(os.path.expanduser(path), "rb") as fh:
            fh.seek(offset)
            return fh.read() if length is None else fh.read(length)

    def stat_size(self, path: str) -> int | None:
        try:
            return os.stat(os.path.expanduser(path)).st_size
        except FileNotFoundError:
            return None

    def stat_file(self, path: str) -> RemoteStat | None:

        try:
            st = os.stat(os.path.expanduser(path))
        except FileNotFoundError:
            return None
        return RemoteStat(st.st_size, st.st_mtime, _stat.S_ISDIR(st.st_mode))

    def home(self) -> str:
        return os.path.expanduser("~")
