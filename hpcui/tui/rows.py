"""Job rows as the tables show them: pure functions, so the table logic is testable alone.

A row is keyed ``cluster:job_id`` (stable across refreshes, so the table can update cells
in place) and holds one display value per column. Values are plain strings or Rich
``Text`` (the coloured state); both compare by value, which is what lets the table touch
only the cells that changed.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Set
from dataclasses import dataclass, field
from datetime import UTC, datetime

from rich.text import Text

from hpcui.backends.states import JobState
from hpcui.common.formatting import STATE_PALETTE
from hpcui.common.formatting import hms as _hms
from hpcui.sitestate.arrays import FAILED, ArraySummary, Folded, fold
from hpcui.sitestate.chains import Segment, fold_chains
from hpcui.sitestate.jobs import HistoryJob, QueueJob
from hpcui.store.registry import JobRecord

#: (key, label) of the live table; "sel" shows the multi-select mark.
JOB_COLUMNS: tuple[tuple[str, str], ...] = (
    ("sel", " "),
    ("cluster", "cluster"),
    ("id", "id"),
    ("name", "name"),
    ("state", "state"),
    ("why", "reason / start"),
    ("where", "partition/qos"),
    ("nodes", "nodes"),
    ("gpus", "GPUs"),
    ("gpu_pct", "GPU%"),
    ("time", "elapsed/limit"),
    ("eta", "will it finish"),
)
#: columns shown only while a row has something in them (will it finish: running jobs
#: whose log prints progress with a total)
JOB_OPTIONAL = frozenset({"eta"})
#: what a narrow terminal keeps, most wanted first (80x24: id, name, state, why it waits,
#: elapsed; the cluster right after the id when there are several: JobTable.fitted)
JOB_PRIORITY = ("sel", "id", "name", "state", "why", "time", "eta", "gpus", "cluster", "where",
                "nodes", "gpu_pct")  # fmt: skip
HISTORY_PRIORITY = ("id", "name", "state", "exit", "time", "efficiency", "cluster")
HISTORY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("cluster", "cluster"),
    ("id", "id"),
    ("name", "name"),
    ("state", "state"),
    ("exit", "exit"),
    ("time", "elapsed/limit"),
    ("efficiency", "efficiency"),
)

#: the one palette's explicit colours (hpcui.common.formatting.STATE_PALETTE; the contrast is
#: checked by tests/system/test_tui_daily_driver.py)
STATE_STYLE: dict[JobState, str] = {JobState(k): app for k, (app, _) in STATE_PALETTE.items()}


@functools.cache
def state_text(state: JobState) -> Text:
    """One Text per state, shared by every row (never modified: the table copies to draw),
    so comparing two rows' state cells is an identity check."""
    return Text(state.value, style=STATE_STYLE.get(state, ""))


def hms(seconds: float | None) -> str:
    """``0:05:00``: hpcui.common.formatting's squeue-style duration, hours unpadded in tables."""
    return _hms(seconds, pad_hours=False)


def _start(when: datetime | None, now: datetime) -> str:
    if when is None:
        return ""
    if when.tzinfo is None:  # squeue prints the cluster's local time, naive
        return when.strftime("start %m-%d %H:%M")
    delta = (when - now).total_seconds()
    return f"start in {hms(delta)}" if delta > 0 else "start now"


@dataclass
class JobRow:
    """One table row plus what actions need (the state, whether hpcui submitted it)."""

    key: str
    cluster: str
    job_id: str
    state: JobState
    hpcui: bool
    cells: dict[str, str | Text] = field(default_factory=dict)
    #: an array's one row: the keys of its elements (collapse_arrays); a chain's one row:
    #: its segments' (collapse_chains)
    members: tuple[str, ...] = ()
    #: a chain's row: `chain k/N` (it opens its segment now, it does not fold)
    chain: str = ""
    _text: str | None = field(default=None, repr=False, compare=False)

    def text(self) -> str:
        """Everything a text filter matches against, lower-cased (made once per row)."""
        if self._text is None:
            self._text = " ".join(str(v) for v in self.cells.values()).lower()
        return self._text


def row_key(cluster: str, job_id: str) -> str:
    return f"{cluster}:{job_id}"


def queue_row(cluster: str, job: QueueJob, now: datetime | None = None) -> JobRow:
    now = now or datetime.now(UTC)
    why = ""
    if job.state is JobState.PENDING:
        why = " · ".join(p for p in (job.reason, _start(job.start_time, now)) if p)
    elif job.state is JobState.RUNNING:
        why = job.nodelist
    where = "/".join(p for p in (job.partition, job.qos) if p) or "-"
    limit = hms(job.time_limit_s) if job.time_limit_s else "∞"
    return JobRow(
        key=row_key(cluster, job.job_id),
        cluster=cluster,
        job_id=job.job_id,
        state=job.state,
        hpcui=job.hpcui,
        cells={
            "sel": "",
            "cluster": cluster,
            "id": job.job_id,
            "name": job.name,
            "state": state_text(job.state),
            "why": why,
            "where": where,
            "nodes": str(job.nodes or "-"),
            "gpus": "-" if job.gpus is None else str(job.gpus),
            "time": f"{hms(job.elapsed_s)}/{limit}",
        },
    )


def record_row(rec: JobRecord) -> JobRow:
    """A registry job the queue no longer (or not yet) lists: what hpcui remembers."""
    job_id = rec.job_id or f"({rec.token[:8]})"
    return JobRow(
        key=row_key(rec.cluster, job_id),
        cluster=rec.cluster,
        job_id=job_id,
        state=rec.state,
        hpcui=True,
        cells={
            "sel": "",
            "cluster": rec.cluster,
            "id": job_id,
            "name": rec.name,
            "state": state_text(rec.state),
            "why": rec.state_raw if rec.state_raw and rec.state_raw != rec.state.value else "",
            "where": "-",
            "nodes": "-",
            "gpus": "-",
            "time": "-",
        },
    )


def history_row(cluster: str, job: HistoryJob) -> JobRow:
    if job.exit_code is None:
        code = "-"
    else:
        code = str(job.exit_code) + (f" sig {job.signal}" if job.signal else "")
    limit = hms(job.time_limit_s) if job.time_limit_s else "∞"
    return JobRow(
        key=row_key(cluster, job.job_id),
        cluster=cluster,
        job_id=job.job_id,
        state=job.state,
        hpcui=job.hpcui,
        cells={
            "cluster": cluster,
            "id": job.job_id,
            "name": job.name,
            "state": state_text(job.state),
            "exit": code,
            "time": f"{hms(job.elapsed_s)}/{limit}",
            "efficiency": job.efficiency,
        },
    )


def merge_rows(
    queue: dict[str, list[QueueJob]],
    records: Iterable[JobRecord],
    *,
    hpcui_only: bool,
    now: datetime | None = None,
    reuse: dict[int, tuple[QueueJob, JobRow]] | None = None,
) -> dict[str, JobRow]:
    """The live table's rows: the queue of every cluster, plus the registry's jobs that the
    queue does not list (finished, or not yet seen). The queue wins where both know a job:
    it has reason, nodes and times. `reuse`: the last refresh's rows by queue row object
    (the Slurm parser hands back the same object for an unchanged line)."""
    rows: dict[str, JobRow] = {}
    known = reuse if reuse is not None else {}
    kept: dict[int, tuple[QueueJob, JobRow]] = {}
    for cluster, jobs in queue.items():
        for job in jobs:
            if hpcui_only and not job.hpcui:
                continue
            hit = known.get(id(job))
            if hit is not None and hit[0] is job and hit[1].cluster == cluster:
                row = hit[1]  # the same row object as last refresh: nothing changed
            else:
                row = queue_row(cluster, job, now)
            if job.start_time is None or job.start_time.tzinfo is None:  # not clock-bound
                kept[id(job)] = (job, row)
            rows[row.key] = row
    if reuse is not None:  # holds this refresh's jobs (alive: their ids stay theirs)
        reuse.clear()
        reuse.update(kept)
    for rec in records:
        row = record_row(rec)
        rows.setdefault(row.key, row)
    return rows


def collapse_chains(
    rows: dict[str, JobRow], segments: dict[tuple[str, str], Segment]
) -> dict[str, JobRow]:
    """One row per chain (hpcui.sitestate.chains): its segment now, named `... · chain
    k/N`, standing for every segment (a cancel on it cancels them all)."""
    if not segments:
        return rows
    out: dict[str, JobRow] = {}
    for row, seg, members in fold_chains(
        rows.values(), lambda r: (r.cluster, r.job_id), lambda r: r.state, segments
    ):
        if seg is None:
            out[row.key] = row
            continue
        cells = dict(row.cells)  # the merged row is reused next refresh: never changed here
        cells["name"] = f"{cells.get('name', '')} · {seg.label()}"
        out[row.key] = dataclasses.replace(
            row, cells=cells, members=tuple(m.key for m in members), chain=seg.label(), _text=None
        )
    return out


def array_key(cluster: str, array_id: str) -> str:
    return row_key(cluster, f"{array_id}_*")


#: the first character of an array's id cell: folded, unfolded
FOLD_MARKS = ("▸", "▾")


def collapse_arrays(
    rows: dict[str, JobRow],
    expanded: Set[str],
    cache: dict[str, tuple[bool, tuple[JobRow, ...], JobRow]] | None = None,
) -> dict[str, JobRow]:
    """One row per job array (`3202_[0-49]  42 done · 8 running · 0 failed`), where the
    first element stood; an array in `expanded` (by `array_key`) keeps its row, marked
    ▾, followed by its elements. Arrays under FOLD_MIN elements stay as they are.

    `cache` (kept by the caller between refreshes): an array whose element rows are the
    very same objects as last time (merge_rows reuses the rows of unchanged jobs) gets
    its last array row back, so an unchanged array costs no tally and no repaint."""
    fresh: dict[str, tuple[bool, tuple[JobRow, ...], JobRow]] = {}
    out: dict[str, JobRow] = {}
    folded = fold(
        rows.items(),
        lambda item: item[1].job_id,
        lambda item: item[1].state,
        group=lambda item, array_id: array_key(item[1].cluster, array_id),
        expanded=expanded,
    )
    for item in folded:
        if not isinstance(item, Folded):
            out[item[0]] = item[1]
            continue
        is_open = item.key in expanded
        members = [row for _key, row in item.members]
        out[item.key] = row = _cached_array_row(cache, item, members, is_open)
        fresh[item.key] = (is_open, tuple(members), row)
    if cache is not None:
        cache.clear()
        cache.update(fresh)
    return out


def _cached_array_row(
    cache: dict[str, tuple[bool, tuple[JobRow, ...], JobRow]] | None,
    folded: Folded[tuple[str, JobRow]],
    members: list[JobRow],
    is_open: bool,
) -> JobRow:
    hit = cache.get(folded.key) if cache is not None else None
    if (
        hit is not None
        and hit[0] == is_open
        and len(hit[1]) == len(members)
        and all(a is b for a, b in zip(hit[1], members, strict=True))
    ):
        return hit[2]
    return _array_row(folded.key, folded.array_id, folded.summary, members, is_open)


def _array_row(
    key: str, array_id: str, summary: ArraySummary, members: list[JobRow], expanded: bool
) -> JobRow:
    first = members[0]
    state = summary.state
    cells = dict(first.cells)
    cells.update(
        sel="",
        id=f"{FOLD_MARKS[expanded]} {summary.label}",
        state=state_text(state),
        why=summary.tally,
        nodes="-",
        gpus="-",
        gpu_pct="",
        time="",
    )
    return JobRow(
        key=key,
        cluster=first.cluster,
        job_id=array_id,
        state=state,
        hpcui=any(r.hpcui for r in members),
        cells=cells,
        members=tuple(r.key for r in members),
    )


STATE_FILTERS: tuple[str, ...] = (
    "all",
    "active",
    "pending",
    "running",
    "done",
    "failed",
    "cancelled",
)


def state_matches(state: JobState, which: str) -> bool:
    if which == "all":
        return True
    if which == "active":
        return not state.is_final
    if which == "pending":
        return state in (JobState.PENDING, JobState.SUBMITTING, JobState.REQUEUED)
    if which == "running":
        return state in (JobState.RUNNING, JobState.COMPLETING)
    if which == "done":
        return state is JobState.COMPLETED
    if which == "failed":
        return state in FAILED
    if which == "cancelled":
        return state is JobState.CANCELLED
    raise ValueError(f"unknown state filter {which!r}")


def matches(row: JobRow, text: str, which: str) -> bool:
    """Filter: every word of ``text`` appears somewhere in the row (``state:x`` too)."""
    if not state_matches(row.state, which):
        return False
    hay = row.text()
    return all(word in hay for word in text.lower().split())


_ID_NUM = re.compile(r"\d+")


def id_sort_key(job_id: str) -> tuple[int, ...]:
    """Numeric order for ``123``, ``123_4``, ``123_[5-9]`` (string order puts 1000 < 999)."""
    return tuple(int(n) for n in _ID_NUM.findall(job_id)) or (0,)
