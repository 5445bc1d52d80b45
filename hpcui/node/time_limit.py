"""The early time-limit signal on the node: a callable runs until the scheduler's limit.

Every batch script asks for USR2 some seconds before the time limit (Slurm
``--signal=USR2@N``, PBS through the runner, backends/pbs/script.py). Stock submitit
treats it as the end for any callable that cannot checkpoint ("timed-out and not
checkpointable") and leaves at once — and Slurm sends it up to a minute before the asked
offset, so a short limit lost most of its time. Here the signal only says the limit is
near: ``hpcui.distributed.stop_requested()`` turns true on rank 0 (and so, by its
broadcast, on every rank), the callbacks given to ``hpcui.distributed.at_time_limit``
run once, and the job goes on. At the limit the scheduler ends it (Slurm: TIMEOUT) and
the client says so. A Checkpointable (it has ``checkpoint``) keeps submitit's checkpoint
and requeue; in a chain its checkpoint is the next segment's call instead.
Standard library, submitit and the job folder's names only.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import types
from typing import Any

from hpcui.backends import chain

_installed: list[bool] = []


def note_limit_near(signum: int, frame: types.FrameType | None = None) -> None:
    """What a callable that cannot checkpoint does on the early signal: say it, set the
    flag stop_requested() reads, run the job's own callbacks; never exit."""
    from hpcui import distributed

    first = not distributed._State.time_limit_near
    distributed._State.time_limit_near = True
    if not first:
        return
    name = signal.Signals(signum).name
    print(
        f"hpcui: {name} at {time.strftime('%H:%M:%S')}: the job's time limit is near "
        f"({left_window()}). hpcui.distributed.stop_requested() is true from now on; the job "
        "runs on until the scheduler's limit.",
        file=sys.stderr,
        flush=True,
    )
    distributed.run_time_limit_callbacks()


def left_window(env: dict[str, str] | None = None) -> str:
    """How long is left, as truly as the scheduler lets us know: PBS's timer fires at the
    delay; Slurm sends its signal up to a minute earlier than asked (its event resolution)."""
    env = dict(os.environ) if env is None else env
    delay = env.get(DELAY_ENV, "")
    if env.get(LIMIT_ENV) and delay.isdigit():  # hpcui's own timer (PBS): exact
        return f"{delay} s left"
    if delay.isdigit():
        return f"{delay} to {int(delay) + 60} s left: Slurm sends this signal up to a minute early"
    return "signal_delay to signal_delay + 60 s left: Slurm sends this signal up to a minute early"


def note_ending(signum: int, frame: types.FrameType | None = None) -> None:
    """submitit's own handler for SIGTERM and SIGCONT logs "Bypassing signal ..." at
    warning level, which read as an error in the job's stderr. SIGCONT (a resume) is
    nothing to say; SIGTERM is the scheduler ending the job, said once in hpcui's words."""
    if signum != signal.SIGTERM or _ending:
        return
    _ending.append(True)
    print(
        f"hpcui: SIGTERM at {time.strftime('%H:%M:%S')}: the scheduler is ending the job (its "
        "time limit, a cancel or a preemption); it is killed after the site's grace time.",
        file=sys.stderr,
        flush=True,
    )


_ending: list[bool] = []


def install() -> None:
    """Route submitit's USR2 handler: a Checkpointable keeps checkpoint-and-requeue, any
    other callable only notes the limit (idempotent; before process_job sets it up)."""
    if _installed:
        return
    from submitit.core.job_environment import (
        SignalHandler,
    )

    stock = SignalHandler.checkpoint_and_try_requeue

    def checkpoint_or_note(self: Any, signum: int, frame: types.FrameType | None = None) -> None:
        if hasattr(self._delayed.function, "checkpoint") and os.environ.get(chain.ENV):
            checkpoint_for_next_segment(self, signum)
        elif hasattr(self._delayed.function, "checkpoint"):
            stock(self, signum, frame)
        else:
            note_limit_near(signum, frame)

    SignalHandler.checkpoint_and_try_requeue = checkpoint_or_note  # type: ignore[method-assign]  # submitit's hook, patched in the job
    SignalHandler.bypass = lambda self, signum, frame=None: note_ending(signum, frame)  # type: ignore[method-assign]  # its log line, in hpcui's words
    _installed.append(True)


def checkpoint_for_next_segment(handler: Any, signum: int) -> None:
    """A Checkpointable in a chain: its checkpoint becomes the next segment's call (the
    chain's RESUME file) instead of a requeue, and this segment ends now, so the next one
    starts without waiting for the limit. Rank 0 only, as submitit's own."""
    from pathlib import Path

    from submitit.core.job_environment import _checkpoint

    if handler.env.global_rank != 0:
        return
    folder = os.environ.get("SUBMITIT_FOLDER", ".")
    name = signal.Signals(signum).name
    print(
        f"hpcui: {name} at {time.strftime('%H:%M:%S')}: the time limit is near; "
        "checkpointing for the chain's next segment",
        file=sys.stderr,
        flush=True,
    )
    delayed = handler._delayed
    _checkpoint(delayed, Path(folder) / chain.RESUME, delayed._timeout_countdown)
    handler._exit()


#: exported by hpcui's PBS batch script (PBS Pro has no --signal): the job's walltime,
#: how long before it the job is told, and when the job started (epoch seconds)
LIMIT_ENV, DELAY_ENV, START_ENV = "HPCUI_TIME_LIMIT_S", "HPCUI_SIGNAL_DELAY_S", "HPCUI_JOB_START"


def arm_from_env(env: dict[str, str] | None = None) -> float | None:
    """Where the scheduler sends no early signal (PBS), send it to this process at
    start + limit - delay: the same handler then runs as under Slurm. Returns the seconds
    until then (None: no walltime known, nothing armed)."""

    env = dict(os.environ) if env is None else env
    try:
        limit = int(env[LIMIT_ENV])
        delay = int(env.get(DELAY_ENV, "90"))
        start = float(env.get(START_ENV) or time.time())
    except (KeyError, ValueError):
        return None
    wait = max(0.0, start + limit - delay - time.time())
    timer = threading.Timer(wait, os.kill, (os.getpid(), signal.SIGUSR2))
    timer.daemon = True  # never keeps a finished job alive
    timer.start()
    return wait
