"""Run a command on a pseudo-terminal, as a person at a terminal would, answering what it
asks. Bounded: it gives up after `timeout` seconds."""

from __future__ import annotations

import os
import pty
import select
import signal
import time
from collections.abc import Callable


def run_on_pty(
    argv: list[str],
    env: dict[str, str],
    answer: Callable[[bytes], bytes | None],
    timeout: float = 120,
    on_read: Callable[[int, bytes], None] | None = None,
) -> tuple[int, str]:
    """(exit code, everything the terminal showed). `answer(seen)` is asked after each
    read; what it returns (a line, without the newline) is typed. `on_read(fd, seen)`,
    called first, may act on the terminal itself (e.g. change its window size)."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.execve(argv[0], argv, env)
    seen, deadline = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if not ready:
                continue
            try:
                data = os.read(fd, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            seen += data
            if on_read is not None:
                on_read(fd, seen)
            line = answer(seen)
            if line is not None:
                os.write(fd, line + b"\n")
    finally:
        code = _reap(pid, max(1.0, deadline - time.monotonic()))
        os.close(fd)  # after: its closing would hang up the child's terminal
    return code, seen.decode(errors="replace")


def _reap(pid: int, grace: float) -> int:
    """The child's exit code; one still running `grace` seconds on (the deadline passed,
    or the caller failed mid-way) is killed, so a failing test never leaves it waiting."""
    ends = time.monotonic() + grace
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= ends:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
