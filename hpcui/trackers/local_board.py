"""TensorBoard on this machine over a job's mirror: no job, no forward, the relay feeding it.

`hpcui tensorboard --mirror JOB` runs a pass, starts the `tensorboard` installed here on
127.0.0.1 over the mirror, and keeps relaying every interval while it serves, so scalars a
running job writes appear within one interval (TensorBoard rereads its folder itself).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from hpcui.errors import UsageError

#: how long TensorBoard may take to answer its first request
START_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(logdir: Path, port: int = 0, reload_s: int = 5) -> tuple[subprocess.Popen[bytes], str]:
    """TensorBoard over `logdir` on 127.0.0.1, and its URL; UsageError where none is here."""
    board = shutil.which("tensorboard")
    if board is None:
        raise UsageError(
            "TensorBoard is not installed here: `pip install tensorboard` (the mirror is in "
            f"{logdir}), or `hpcui tensorboard JOB` to run it in a job on the cluster."
        )
    port = port or free_port()
    proc = subprocess.Popen(
        [board, "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port),
         "--reload_interval", str(reload_s)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    return proc, f"http://127.0.0.1:{port}/"


def end(proc: subprocess.Popen[bytes]) -> None:
    """A program this machine started for a tracker (TensorBoard, W&B's live upload)
    ended and waited for (killed if it will not go)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextlib.contextmanager
def ended_by_term() -> Iterator[None]:
    """Inside, SIGTERM ends this process through its `finally`s (Python's default would
    end it at once and leave TensorBoard running); only in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
