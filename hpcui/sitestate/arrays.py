"""A job array as one line: `401_[0-299]`, its elements counted by state. The app's table
and `hpcui jobs` fold arrays by these rules (one place), each drawing its own row."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence, Set
from dataclasses import dataclass
from typing import Generic, TypeVar

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


class Folded(Generic[T]):
    """One array's place in a folded list: its members in order, its group key, and its
    summary, counted only when asked (a face that reuses last refresh's row never asks)."""

    __slots__ = ("_summary", "array_id", "indices", "key", "members", "state_of")

    def __init__(
        self,
        array_id: str,
        key: str,
        members: list[T],
        indices: list[int],
        state_of: Callable[[T], JobState],
    ) -> None:
        self.array_id, self.key, self.members, self.indices = array_id, key, members, indices
        self.state_of = state_of
        self._summary: ArraySummary | None = None

    @property
    def summary(self) -> ArraySummary:
        if self._summary is None:
            states = [self.state_of(m) for m in self.members]
            self._summary = ArraySummary.of(self.array_id, self.indices, states)
        return self._summary


def fold(
    items: Iterable[T],
    job_id: Callable[[T], str],
    state: Callable[[T], JobState],
    *,
    group: Callable[[T, str], str] | None = None,
    expanded: Set[str] = frozenset(),
) -> list[T | Folded[T]]:
    """`items` in order, each array of at least FOLD_MIN elements replaced by one `Folded`
    where its first element stood. `group(item, array_id)` keys an array (the same id on
    two clusters is two arrays); an array whose key is in `expanded` keeps its elements
    after its `Folded`, each where it stood. The one folding of the app's table and
    `hpcui jobs`."""
    items = list(items)
    key_of = group or (lambda _item, array_id: array_id)
    groups: dict[str, tuple[str, list[T], list[int]]] = {}
    where: list[str | None] = []
    for item in items:
        m = ELEMENT.match(job_id(item))
        if m is None:
            where.append(None)
            continue
        group_key = key_of(item, m[1])
        where.append(group_key)
        _array, elements, indices = groups.setdefault(group_key, (m[1], [], []))
        elements.append(item)
        indices.append(int(m[2]))
    out: list[T | Folded[T]] = []
    done: set[str] = set()
    for item, at in zip(items, where, strict=True):
        if at is None or len(groups[at][1]) < FOLD_MIN:
            out.append(item)
            continue
        if at not in done:
            done.add(at)
            array_id, elements, indices = groups[at]
            out.append(Folded(array_id, at, elements, indices, state))
        if at in expanded:
            out.append(item)
    return out
