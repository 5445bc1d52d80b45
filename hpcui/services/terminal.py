"""This terminal for the faces: wired to a remote pseudo-terminal ( raw mode, both directions, window size
changes forwarded, the terminal restored whatever happens), and a text edited in the user's
editor. `hpcui shell`/`resubmit --edit` and the app's keys (through App.suspend) share it."""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hpcui.errors import UsageError

try:  # POSIX terminals; native Windows has neither (the rest of hpcui works there)
    import termios
    import tty
except ImportError:
    termios = tty = None  # type: ignore[assignment]  # Windows: no termios; bridge() says so


def shell_unavailable() -> str | None:
    """Why this Python cannot hand its terminal to a remote shell, or None when it can."""
    if termios is None:
        return (
            "an interactive shell needs a POSIX terminal (termios), which this platform's "
            "Python lacks (native Windows). Use WSL, or `ssh` to the login node and "
            "`srun --jobid JOB --overlap --pty bash -l` there."
        )
    return None


def window() -> tuple[int, int]:
    size = shutil.get_terminal_size((80, 24))
    return size.columns, size.lines


@contextlib.contextmanager
def raw_terminal(fd: int) -> Iterator[None]:
    """Raw mode while inside; the old settings come back on any exit."""
    if not os.isatty(fd):
        yield
        return
    assert termios is not None and tty is not None  # bridge() checked shell_unavailable()
    saved = termios.tcgetattr(fd)
    try:
        tty.setraw(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def bridge(chan: Any, *, stdin: Any = None, stdout: Any = None) -> int:
    """`chan`: the core's TerminalChannel (`cluster.control.open_shell`).
    Copy keys to `chan` and its output here until the remote side ends; returns its exit
    status. Ctrl-C, Ctrl-Z and Ctrl-D go to the remote shell, as in ssh. A window size
    change only wakes the loop (a pipe): the resize is sent from the loop, never from the
    signal handler, which could cut into a send in progress (paramiko's channel lock, or
    a frame to the agent half written)."""
    why = shell_unavailable()
    if why:
        raise UsageError(why)
    in_fd = (stdin or sys.stdin).fileno()
    out_fd = (stdout or sys.stdout).fileno()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)

    def resized(*_: object) -> None:
        with contextlib.suppress(OSError):  # a full pipe: a wake-up is pending already
            os.write(wake_w, b"w")

    old = signal.signal(signal.SIGWINCH, resized) if hasattr(signal, "SIGWINCH") else None
    try:
        with raw_terminal(in_fd):
            while True:
                ready, _, _ = select.select([chan, in_fd, wake_r], [], [], 1.0)
                if wake_r in ready:
                    os.read(wake_r, 4096)
                    cols, rows = window()
                    with contextlib.suppress(Exception):
                        chan.resize_pty(width=cols, height=rows)
                if chan in ready:
                    data = chan.recv(65536)
                    if not data:
                        break
                    os.write(out_fd, data)
                if in_fd in ready:
                    keys = os.read(in_fd, 4096)
                    if not keys:  # our stdin closed: end the session
                        break
                    chan.sendall(keys)
                if not ready and chan.exit_status_ready():
                    break
    finally:
        if old is not None:
            signal.signal(signal.SIGWINCH, old)
        os.close(wake_r)
        os.close(wake_w)
    status = chan.recv_exit_status() if chan.exit_status_ready() else 0
    chan.close()
    return status


def edit_text(text: str, *, suffix: str) -> str:
    """`text` after the user's editor ($VISUAL, $EDITOR, else vi) saved it. The file lives
    in a private temporary folder, removed afterwards whatever the editor left there. An
    editor that fails, or a file it left unreadable, submits nothing and says why."""

    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    try:
        argv = shlex.split(editor)
    except ValueError as exc:
        raise UsageError(
            f"Cannot read the editor command {editor!r} ($VISUAL/$EDITOR): {exc}. Fix its "
            "quoting, e.g. EDITOR='code --wait'."
        ) from None
    if not argv:
        raise UsageError("$VISUAL/$EDITOR is empty: set it to your editor (e.g. nano).")
    folder = Path(tempfile.mkdtemp(prefix="hpcui-edit-"))  # 0700
    path = folder / f"script{suffix}"
    try:
        path.write_text(text)
        try:
            rc = subprocess.call([*argv, str(path)])
        except OSError as exc:
            raise UsageError(
                f"Cannot start the editor {editor!r}: {exc.strerror or exc}. Set $EDITOR "
                "(e.g. nano)."
            ) from None
        if rc != 0:
            raise UsageError(f"The editor exited with status {rc}: nothing was submitted.")
        try:
            return path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise UsageError(
                "The edited script is not UTF-8 text: nothing was submitted. Save it as UTF-8."
            ) from None
        except (FileNotFoundError, IsADirectoryError):
            raise UsageError(
                "The editor did not leave the script as a file where it was (deleted, moved "
                "or replaced by a folder): nothing was submitted."
            ) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
