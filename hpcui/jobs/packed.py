"""The calls of a packed map (`map(..., calls_per_task=K)`): one handle per call, in the
order they were given, over the array tasks that ran them.

A task's result is the list hpcui.node.packed.Packed returned, read once for all its calls.
A call that raised fails alone (JobFailedError with its own traceback); a task that ended
without a result (killed, out of memory, cancelled, time limit) fails each of its calls
with that task's error.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from hpcui.errors import JobCancelledError, JobError, JobFailedError, JobLostError
from hpcui.jobs.job import Job, JobList
from hpcui.transport import deadline

if TYPE_CHECKING:
    from hpcui.backends.states import JobState


class _TaskOutcomes:
    """Each task's list of (kind, value), read at most once per task."""

    def __init__(self) -> None:
        self._read: dict[str, list[tuple[str, Any]] | JobError] = {}
        self._lock = threading.Lock()

    def of(self, job: Job, timeout: float | None) -> list[tuple[str, Any]]:
        with self._lock:
            got = self._read.get(job.job_id)
        if got is None:
            try:
                got = list(job.result(timeout))
            except (JobFailedError, JobCancelledError, JobLostError) as exc:  # the whole task
                got = exc
            with self._lock:
                self._read[job.job_id] = got
        if isinstance(got, JobError):
            raise got
        return got


class PackedCall:
    """Call `index` of a map, run as call `offset` of array task `job`."""

    def __init__(self, job: Job, index: int, offset: int, outcomes: _TaskOutcomes) -> None:
        self.job, self.index, self.offset = job, index, offset
        self._outcomes = outcomes

    def __repr__(self) -> str:
        return f"PackedCall({self.index}: {self.job.cluster_name}:{self.job_id}#{self.offset})"

    @property
    def job_id(self) -> str:
        """The array task that runs this call (with the others of its pack)."""
        return self.job.job_id

    @property
    def state(self) -> JobState:
        return self.job.state

    def done(self) -> bool:
        return self.job.done()

    def wait(self, timeout: float | None = None) -> JobState:
        return self.job.wait(timeout)

    def cancel(self) -> None:
        """Cancels the task, so every call packed with this one too."""
        self.job.cancel()

    def result(self, timeout: float | None = None) -> Any:
        kind, value = self._outcomes.of(self.job, timeout)[self.offset]
        if kind == "success":
            return value
        raise JobFailedError(
            f"Call {self.index} of the map (job {self.job_id} on {self.job.cluster_name}, "
            f"call {self.offset} of that task) raised on the cluster; the other calls of "
            f"the task ran on:\n{value}",
            job_id=self.job_id,
            remote_traceback=value,
        )

    def exception(self, timeout: float | None = None) -> Exception | None:
        try:
            self.result(timeout)
        except (JobFailedError, JobCancelledError, JobLostError) as exc:
            return exc
        return None


class CallList(list[PackedCall]):
    """What a packed map returns: one handle per call, in order; `jobs` the tasks."""

    def __init__(self, jobs: list[Job], per_task: int, n_calls: int) -> None:
        outcomes = _TaskOutcomes()
        super().__init__(
            PackedCall(jobs[i // per_task], i, i % per_task, outcomes) for i in range(n_calls)
        )
        self.jobs = jobs

    def results(self, timeout: float | None = None) -> list[Any]:
        """Every call's value in order; the first failing call's error is raised."""
        ends = deadline.ends_after(timeout)
        for job in self.jobs:
            job.wait(deadline.rest(ends))
        return [call.result(None) for call in self]

    def _ipython_display_(self) -> None:
        from hpcui.live import show  # only where a notebook shows a job

        show(JobList(self.jobs))
