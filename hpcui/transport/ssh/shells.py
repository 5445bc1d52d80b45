"""Commands on a login node through persistent shells: each command framed by a random
marker on stdout and stderr (exit status and both streams come back apart), a small pool of
such shells on one connection (a status poll never waits for a submit), and an exec channel
as a stream (a log reader on the login node)."""

from __future__ import annotations

import contextlib
import secrets
import select
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from hpcui.transport.quoting import quote_bytes

if TYPE_CHECKING:
    import paramiko

WINDOW_SIZE = 64 * 1024 * 1024
MAX_PACKET = 256 * 1024
LOGIN_SHELL = (
    "exec /bin/sh -c 'if command -v bash >/dev/null 2>&1; "
    "then exec bash --login -s; else exec sh -l -s 2>/dev/null || exec sh -s; fi'"
)
PLAIN_SHELL = "exec /bin/sh -s"


class Shell:
    """A long-lived shell on one session channel; each command is framed by a random marker.

    Each command runs as `( eval 'cmd' ) </dev/null` so a syntax error, `exit` or `cd`
    cannot kill or change the shell, and the command cannot eat the protocol stream.
    """

    def __init__(self, transport: paramiko.Transport, start: str, timeout: float) -> None:
        self.conn = transport
        self.chan = transport.open_session(window_size=WINDOW_SIZE, max_packet_size=MAX_PACKET)
        self.chan.exec_command(start)
        self.token = secrets.token_hex(12)
        self.count = 0
        # Sync: discard banners that login profiles print before our first marker.
        self.run(b"true", timeout=timeout)

    def run(self, cmd: bytes, timeout: float | None) -> tuple[int, bytes, bytes]:
        self.count += 1
        mark = f"__hpcui_{self.token}_{self.count}__".encode()
        script = (
            b"( eval "
            + quote_bytes(cmd)
            + b" ) </dev/null; __r=$?; printf '%s %d\\n' "
            + mark
            + b" \"$__r\"; printf '%s\\n' "
            + mark
            + b" >&2\n"
        )
        self.chan.sendall(script)
        out, err = bytearray(), bytearray()
        out_end = err_end = rc_end = -1
        deadline = None if timeout is None else time.monotonic() + timeout
        chan = self.chan
        while rc_end < 0 or err_end < 0:
            got = False
            while chan.recv_stderr_ready():
                start = max(0, len(err) - len(mark))
                err += chan.recv_stderr(1 << 20)
                if err_end < 0:
                    err_end = err.find(mark, start)
                got = True
            if chan.recv_ready():
                start = max(0, len(out) - len(mark))
                data = chan.recv(1 << 20)
                if not data:
                    raise EOFError("shell channel closed")
                out += data
                if out_end < 0:
                    out_end = out.find(mark, start)
                if out_end >= 0 and rc_end < 0:  # the exit status may arrive in a later packet
                    rc_end = out.find(b"\n", out_end + len(mark))
                got = True
            if got:
                continue
            if chan.closed or chan.eof_received or chan.exit_status_ready():
                raise EOFError("shell channel closed")
            wait = 1.0 if deadline is None else deadline - time.monotonic()
            if wait <= 0:
                raise TimeoutError
            select.select([chan], [], [], min(wait, 1.0))
        # stdout tail is "<mark> <rc>\n"; anything after the stderr marker is not ours.
        rc_line = out[out_end + len(mark) : rc_end].strip()
        return int(rc_line), bytes(out[:out_end]), bytes(err[:err_end])

    @property
    def alive(self) -> bool:
        return not self.chan.closed and not self.chan.eof_received

    def close(self) -> None:
        try:
            self.chan.close()
        except Exception:  # pragma: no cover - closing a dead channel
            pass


class ShellPool:
    """Idle shells of one connection, and at most `max_shells` open at once: several let a
    status poll and a submit run side by side on one connection."""

    def __init__(
        self,
        max_shells: int,
        new_shell: Callable[[], Shell],
        current: Callable[[], paramiko.Transport | None],
    ) -> None:
        self.max_shells = max_shells
        self._new_shell, self._current = new_shell, current
        self._idle: list[Shell] = []  # persistent shells ready for a command
        self._open = 0  # shells open (idle + busy)
        self._cond = threading.Condition()

    def acquire(self) -> Shell:
        """An idle shell of the current connection, or a new one while fewer than
        max_shells are open (else wait for one)."""
        with self._cond:
            while True:
                while self._idle:
                    shell = self._idle.pop()
                    conn = self._current()
                    if shell.alive and shell.conn is conn and conn is not None and conn.is_active():
                        return shell
                    self._open -= 1
                    shell.close()
                if self._open < self.max_shells:
                    self._open += 1
                    break
                self._cond.wait()
        try:
            return self._new_shell()
        except BaseException:
            with self._cond:
                self._open -= 1
                self._cond.notify()
            raise

    def release(self, shell: Shell, *, reuse: bool) -> None:
        with self._cond:
            if reuse and shell.alive:
                self._idle.append(shell)
            else:
                self._open -= 1
                shell.close()
            self._cond.notify()

    def close_idle(self) -> None:
        """The connection went: its idle shells go with it (busy ones are closed by their
        callers when their command fails)."""
        with self._cond:
            idle, self._idle = self._idle, []
            self._open -= len(idle)
        for shell in idle:
            shell.close()


class ChannelStream:
    """An exec channel as a `RemoteStream`."""

    def __init__(self, chan: paramiko.Channel) -> None:
        self.chan = chan

    def fileno(self) -> int:
        return self.chan.fileno()

    def read(self) -> tuple[bytes, bytes]:
        out, err = bytearray(), bytearray()
        chan = self.chan
        while chan.recv_stderr_ready():  # stderr first: a reader's notices precede its data
            err += chan.recv_stderr(1 << 20)
        while chan.recv_ready():
            data = chan.recv(1 << 20)
            if not data:
                break
            out += data
        return bytes(out), bytes(err)

    @property
    def ended(self) -> bool:
        chan = self.chan
        if chan.recv_ready() or chan.recv_stderr_ready():
            return False
        return chan.closed or chan.eof_received or not chan.get_transport().is_active()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.chan.close()
