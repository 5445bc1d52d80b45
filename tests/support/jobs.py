"""Waiting for an hpcui job's state in a test: bounded, and a job that ends otherwise fails
the wait at once with what it said (its stderr tail and the scheduler's words), instead of
waiting out the timeout to report "still FAILED"."""

from __future__ import annotations

import time
from typing import Any

from hpcui.backends.states import JobState

STDERR_TAIL = 1500


def wait_job_state(job: Any, want: set[JobState], timeout: float = 120.0) -> JobState:
    deadline = time.monotonic() + timeout
    while True:
        state = job.state
        if state in want:
            return state
        if state.is_final:
            raise AssertionError(
                f"job {job.job_id} ended {state.value} (reason {job.reason or '-'}), wanted "
                f"{sorted(s.value for s in want)}; its stderr ends:\n{_tail(job)}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(
                f"job {job.job_id} still {state.value} after {timeout:g} s, wanted "
                f"{sorted(s.value for s in want)}; its stderr ends:\n{_tail(job)}"
            )
        time.sleep(0.2)


def _tail(job: Any) -> str:
    try:
        return job.stderr()[-STDERR_TAIL:] or "(empty)"
    except Exception as exc:  # a message, not a check
        return f"(unreadable: {exc})"
