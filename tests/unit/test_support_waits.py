"""The tests' own wait for a job's state fails at once, and says why, when the job ends
otherwise (issue 37, 7)."""

from __future__ import annotations

import pytest

from hpcui.backends.states import JobState
from tests.support.jobs import wait_job_state


class EndedJob:
    """A job as a test sees it: only what the wait reads."""

    job_id = "77"
    reason = "NonZeroExitCode"

    def __init__(self, states: list[JobState]) -> None:
        self.states = states
        self.looks = 0

    @property
    def state(self) -> JobState:
        self.looks += 1
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]

    def stderr(self) -> str:
        return "Traceback (most recent call last):\nValueError: bad input\n"


def test_a_job_that_failed_fails_the_wait_at_once_with_its_stderr():
    job = EndedJob([JobState.PENDING, JobState.FAILED])
    with pytest.raises(AssertionError, match=r"(?s)ended FAILED.*NonZeroExitCode.*ValueError: bad"):
        wait_job_state(job, {JobState.RUNNING}, timeout=60)
    assert job.looks == 2  # the look that saw FAILED was the last: no waiting out the 60 s


def test_the_wanted_state_is_returned_and_a_timeout_says_the_state():
    assert wait_job_state(EndedJob([JobState.PENDING, JobState.RUNNING]), {JobState.RUNNING}) is (
        JobState.RUNNING
    )
    with pytest.raises(AssertionError, match=r"still PENDING after 0\.3 s"):
        wait_job_state(EndedJob([JobState.PENDING]), {JobState.RUNNING}, timeout=0.3)
