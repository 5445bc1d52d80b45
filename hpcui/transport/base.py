"""The transport interface everything above it uses."""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from hpcui.errors import HpcuiError, RemoteCommandError, UsageError
from hpcui.transport.quoting import Arg

Command = str | bytes | Iterable[Arg]


@dataclass(frozen=True)
class RemoteStat:
    size: int
    mtime: float
    is_dir: bool


@dataclass(frozen=True)
class CommandResult:
    """What one command printed and how it exited. Bytes are decoded leniently."""

    exit_status: int
    stdout_bytes: bytes
    stderr_bytes: bytes
    command: str = ""

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode("utf-8", "replace")

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    def check(self, what: str = "") -> CommandResult:
        """Raise RemoteCommandError with the command's stderr unless it exited 0."""
        if self.exit_status != 0:
            label = what or self.command
            detail = (self.stderr.strip() or self.stdout.strip())[-2000:]
            raise RemoteCommandError(
                f"{label} failed with exit status {self.exit_status}: {detail or '(no output)'}",
                exit_status=self.exit_status,
                stdout=self.stdout,
                stderr=self.stderr,
            )
        return self


class RemoteStream(Protocol):
    """A long-running remote command's output as it comes (a pushed log reader)."""

    def fileno(self) -> int:
        """Readable when output arrived or the stream ended (for select)."""
        ...

    def read(self) -> tuple[bytes, bytes]:
        """What stdout and stderr have now; never blocks."""
        ...

    @property
    def ended(self) -> bool:
        """The command exited or the link dropped, and everything was read."""
        ...

    def close(self) -> None: ...


class ByteChannel(Protocol):
    """A two-way byte stream to a job's node (paramiko.Channel, socket.socket)."""

    def fileno(self) -> int: ...
    def recv(self, nbytes: int) -> bytes: ...
    def sendall(self, data: bytes) -> None: ...
    def close(self) -> None: ...


class TerminalChannel(Protocol):
    """An interactive session on a pseudo-terminal (paramiko's Channel has these)."""

    def fileno(self) -> int: ...
    def recv(self, nbytes: int) -> bytes: ...
    def sendall(self, data: bytes) -> None: ...
    def resize_pty(self, width: int, height: int) -> None: ...
    def exit_status_ready(self) -> bool: ...
    def recv_exit_status(self) -> int: ...
    def close(self) -> None: ...


class Transport(abc.ABC):
    """Runs commands and moves files on one login node (or this machine)."""

    #: Short human name ("ssh hpcuser@127.0.0.1:2222", "local").
    description: str = ""
    #: who answers keyboard-interactive questions (2FA) for this link (None: nobody asks)
    prompt: Callable[..., list[str]] | None = None

    @abc.abstractmethod
    def run(
        self, cmd: Command, *, timeout: float | None = None, stdin: bytes | None = None
    ) -> CommandResult:
        """Run a command. A list is quoted word by word; a string is shell code."""

    def put_files(
        self,
        directory: str,
        files: dict[str, bytes],
        *,
        then: Command | None = None,
        first: Command | None = None,
    ) -> CommandResult:
        """Write small files (name -> content) into `directory` in one round trip.

        `then` runs right after inside `directory`, in the same round trip;
        the result is that command's (or the write's, when there is none). `first` runs in
        `directory` in the same shell before anything uploaded is unpacked (a claim that
        must exist before the files do).
        """
        return self._put_files(directory, files, then, first)

    @abc.abstractmethod
    def _put_files(
        self, directory: str, files: dict[str, bytes], then: Command | None, first: Command | None
    ) -> CommandResult:
        """`put_files` as each transport does it (the keywords checked once, above)."""

    @abc.abstractmethod
    def write_file(
        self,
        path: str,
        data: bytes | Iterable[bytes],
        *,
        mode: int | None = 0o600,
        offset: int | None = None,
    ) -> int:
        """Write one (possibly large) file; returns bytes written. mode=None: server default.
        `offset`: write into the existing file from there on (a resumed upload appends to
        its part file) instead of replacing it."""

    @abc.abstractmethod
    def read_file(self, path: str, *, offset: int = 0, length: int | None = None) -> bytes:
        """Read a file, or a range of it (resumable log reads); FileNotFoundError if missing."""

    @abc.abstractmethod
    def stat_size(self, path: str) -> int | None:
        """Size of a file, None when it does not exist."""

    def stat_file(self, path: str) -> RemoteStat | None:
        """Size, mtime and kind of a path (None: it does not exist). Resumed downloads
        compare them: a file rewritten since must not be continued from the old bytes.
        This default asks `stat` (GNU, else BSD); SSH and local transports answer directly."""
        res = self.run(
            [
                "sh",
                "-c",
                'stat -L -c "%F|%s|%Y" -- "$1" 2>/dev/null || stat -L -f "%HT|%z|%m" -- "$1"',
                "sh",
                path,
            ]
        )
        kind, _, rest = res.stdout.strip().partition("|")
        size, _, mtime = rest.partition("|")
        if not res.ok or not size.isdigit():
            return None
        return RemoteStat(int(size), float(mtime or 0), kind.lower() == "directory")

    def free_bytes(self, path: str) -> int | None:
        """Bytes the user may still write on the filesystem holding `path` (`df -Pk`, read
        by the quota fallback's parser); None when df cannot tell. Asked only after a
        write failed or a job left no result, to say whether the disk is full."""
        from hpcui.backends.quota import (
            QuotaParseError,
            parse_df,
        )

        try:
            res = self.run(["df", "-Pk", path])
            entries = parse_df(res.stdout) if res.ok else []
        except (HpcuiError, QuotaParseError):
            return None
        if len(entries) != 1 or entries[0].hard_bytes is None or entries[0].used_bytes is None:
            return None
        return entries[0].hard_bytes - entries[0].used_bytes

    def open_stream(self, cmd: Command) -> RemoteStream | None:
        """Start `cmd` with its output streamed back (None: this transport cannot; the
        caller polls instead)."""
        return None

    def open_terminal(self, script: str, *, term: str, cols: int, rows: int) -> TerminalChannel:
        """`script` (shell code) in a login shell on a pseudo-terminal: an interactive
        session the caller bridges to its own terminal (`hpcui shell`)."""
        raise UsageError(
            f"An interactive terminal is not available over {self.description or 'this transport'}."
        )

    def open_tunnel(self, host: str, port: int) -> ByteChannel:
        """A byte channel to `host`:`port` as the login node reaches it (a job's node):
        what `hpcui forward` carries each local connection over."""
        raise UsageError(
            f"Forwarding a port is not available over {self.description or 'this transport'}."
        )

    def stalled_s(self) -> float:
        """Seconds the link has not answered its keepalives (0: fine, or no link at all)."""
        return 0.0

    def watch_stall(self, listener: Callable[[float | None], None]) -> None:  # noqa: B027
        """Call `listener(seconds)` when the link goes silent, `listener(None)` when it
        answers again (from a background thread). A transport without a link never calls."""

    def home(self) -> str:
        """The remote user's home directory (cached by implementations)."""
        return self.run(["sh", "-c", 'printf %s "$HOME"']).check("reading $HOME").stdout

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the next call reconnects."""

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
