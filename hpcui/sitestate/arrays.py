"""A job array as one line: `401_[0-299]`, its elements counted by state. The app's table
and `hpcui jobs` fold arrays by these rules (one place), each drawing its own row."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from hpcui.backends.states import JobState

#: an array element's id: 3202_7
ELEMENT = re.compile(r"^(\d+)_(\d+)$")
#: arrays with fewer elements keep one row each (they fit; a fold hides more)
FOLD_MIN = 5
#: what went wrong; a cancel is the user's own decision and is counted apart
FAILED = frozenset(
    {
        JobState.FAILED,
        JobState.TIMEOUT,
        JobState.NODE_FAIL,
        JobState.OUT_OF_MEMORY,
        JobState.PREEMPTED,
    }
)
PENDING = frozenset({JobState.PENDING, JobState.SUBMITTING, JobState.REQUEUED})
RUNNING = frozenset({JobState.RUNNING, JobState.COMPLETING})
#: what an array's line counts, in this order (failures are always said)
TALLY = (("done", frozenset({JobState.COMPLETED})), ("running", RUNNING), ("pending", PENDING))

T = TypeVar("T")


@dataclass(frozen=True)
class ArraySummary:
    """What one line says of an array: its id range, one state for all, the counts."""

    array_id: str
    first: int
    last: int
    state: JobState
    tally: str
    size: int

    @property
    def label(self) -> str:
        return f"{self.array_id}_[{self.first}-{self.last}]"

    @classmethod
    def of(cls, array_id: str, indices: Sequence[int], states: Sequence[JobState]) -> ArraySummary:
        counts = [(label, sum(s in which for s in states)) for label, which in TALLY]
        failed = sum(s in FAILED for s in states)
        cancelled = states.count(JobState.CANCELLED)
        said = [f"{n} {label}" for label, n in counts if n]
        said.append(f"{failed} failed")
        if cancelled:
            said.append(f"{cancelled} cancelled")
        if any(s in RUNNING for s in states):
            state = JobState.RUNNING
        elif any(s in PENDING for s in states):
            state = JobState.PENDING
        elif failed:
            state = JobState.FAILED
        elif cancelled == len(states):
            state = JobState.CANCELLED
        else:
            state = JobState.COMPLETED
        return cls(array_id, min(indices), max(indices), state, " · ".join(said), len(states))


def fold(
    items: Iterable[T], job_id: Callable[[T], str], state: Callable[[T], JobState]
) -> list[T | tuple[ArraySummary, list[T]]]:
    """`items` in order, each array of at least FOLD_MIN elements replaced by one
    (summary, its elements) where its first element stood."""
    items = list(items)
    groups: dict[str, list[tuple[int, T]]] = {}
    where: list[str | None] = []
    for item in items:
        m = ELEMENT.match(job_id(item))
        where.append(m[1] if m else None)
        if m:
            groups.setdefault(m[1], []).append((int(m[2]), item))
    out: list[T | tuple[ArraySummary, list[T]]] = []
    done: set[str] = set()
    for item, array_id in zip(items, where, strict=True):
        members = groups[array_id] if array_id is not None else []
        if array_id is None or len(members) < FOLD_MIN:
            out.append(item)
        elif array_id not in done:
            done.add(array_id)
            summary = ArraySummary.of(
                array_id, [i for i, _ in members], [state(x) for _, x in members]
            )
            out.append((summary, [x for _, x in members]))
    return out
