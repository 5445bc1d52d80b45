"""A chain's segments as one line (backends/chain.py): the app's table and `hpcui jobs`
fold them by these rules, each drawing its own row, as arrays fold (arrays.py).

The scheduler lists every segment as a job of its own; the registry knows which jobs are
segments of which chain (`meta.chain = [index, count]`, written at submit). The line
shows the segment that matters now: the first one still waiting or running, else the
last, labelled `chain k/N`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from hpcui.backends.states import JobState
from hpcui.store.registry import JobRecord

T = TypeVar("T")


@dataclass(frozen=True)
class Segment:
    token: str
    index: int  # from 0
    count: int

    def label(self) -> str:
        return f"chain {self.index + 1}/{self.count}"


def segments_of(records: Iterable[JobRecord]) -> dict[tuple[str, str], Segment]:
    """(cluster, job id) -> its place in a chain, for every segment the registry holds."""
    out = {}
    for rec in records:
        place = rec.meta.get("chain")
        if rec.job_id and isinstance(place, list) and len(place) == 2:
            out[(rec.cluster, rec.job_id)] = Segment(rec.token, int(place[0]), int(place[1]))
    return out


def fold_chains(
    items: Iterable[T],
    where: Callable[[T], tuple[str, str]],
    state: Callable[[T], JobState],
    segments: dict[tuple[str, str], Segment],
) -> list[tuple[T, Segment | None, list[T]]]:
    """`items` in order, each chain's segments replaced by one (item, its segment, all the
    chain's items) where its first listed segment stood; anything else is (item, None,
    [item])."""
    items = list(items)
    groups: dict[tuple[str, str], list[tuple[T, Segment]]] = {}
    for item in items:
        seg = segments.get(where(item))
        if seg is not None:
            groups.setdefault((where(item)[0], seg.token), []).append((item, seg))
    out: list[tuple[T, Segment | None, list[T]]] = []
    shown: set[tuple[str, str]] = set()
    for item in items:
        seg = segments.get(where(item))
        if seg is None:
            out.append((item, None, [item]))
            continue
        key = (where(item)[0], seg.token)
        if key in shown:
            continue
        shown.add(key)
        members = sorted(groups[key], key=lambda pair: pair[1].index)
        now = next(((m, s) for m, s in members if not state(m).is_final), members[-1])
        out.append((now[0], now[1], [m for m, _ in members]))
    return out
