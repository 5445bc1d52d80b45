"""hpcui's one job-state vocabulary, shared by every scheduler dialect."""

from __future__ import annotations

from enum import Enum


class JobState(str, Enum):
    """Normalized job state; the scheduler's own word is kept beside it where shown."""

    SUBMITTING = "SUBMITTING"  # recorded locally, scheduler has not answered yet
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    SUSPENDED = "SUSPENDED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    PREEMPTED = "PREEMPTED"
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    REQUEUED = "REQUEUED"
    UNKNOWN = "UNKNOWN"

    @property
    def is_final(self) -> bool:
        return self in _FINAL

    @property
    def may_requeue(self) -> bool:
        """An end the scheduler may undo by requeueing the job (node failure, preemption)."""
        return self in _MAY_REQUEUE

    @property
    def is_success(self) -> bool:
        return self is JobState.COMPLETED


_FINAL = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.PREEMPTED,
        JobState.NODE_FAIL,
        JobState.OUT_OF_MEMORY,
    }
)
_MAY_REQUEUE = frozenset({JobState.NODE_FAIL, JobState.PREEMPTED})
