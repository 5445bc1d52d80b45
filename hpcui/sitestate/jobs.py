"""The user's jobs as the faces show them: queue rows and history rows, hpcui's marked.

The records are the scheduler-neutral ones from backends (QueueEntry, AccountingEntry)
plus what only hpcui knows: whether a job is one of ours (its comment carries
``hpcui:<token>``, see backends.slurm_script) and a seff-style efficiency line.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Self

from pydantic import computed_field

from hpcui.backends.records import AccountingEntry, QueueEntry, trusted
from hpcui.backends.slurm.script import TOKEN_PREFIX
from hpcui.common.formatting import hms, size
from hpcui.errors import UsageError

if TYPE_CHECKING:
    from hpcui.store.registry import JobRecord

__all__ = [
    "HistoryJob",
    "QueueJob",
    "efficiency_line",
    "format_bytes",
    "jobs_from_records",
    "since_arg",
    "token_of",
]


def token_of(comment: str) -> str | None:
    """hpcui's submit token in a job comment (``hpcui:1a2b...``), None for other jobs."""
    if TOKEN_PREFIX not in comment:  # most comments of a big queue: one C-level scan
        return None
    comment = comment.strip()
    if comment.startswith(TOKEN_PREFIX) and len(comment) > len(TOKEN_PREFIX):
        return comment[len(TOKEN_PREFIX) :].split(None, 1)[0]
    return None


class QueueJob(QueueEntry):
    """A queue row; ``token`` is set when hpcui submitted the job (``hpcui`` is then True)."""

    token: str | None = None

    @computed_field
    @property
    def hpcui(self) -> bool:
        return self.token is not None

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> Self:
        # Slurm: the comment (hpcui:<token>); PBS: HPCUI_TOKEN of Variable_List, given
        values["token"] = values.get("token") or token_of(values.get("comment", ""))
        return trusted(cls, values)

    @classmethod
    def from_entry(cls, entry: QueueEntry) -> QueueJob:
        # already typed by the parser: no second validation of 10,000 rows per refresh
        return cls.from_values(_fields(entry))


class HistoryJob(AccountingEntry):
    """A history row (sacct): outcome, usage, efficiencies, and hpcui's token if ours."""

    token: str | None = None

    @computed_field
    @property
    def hpcui(self) -> bool:
        return self.token is not None

    @computed_field
    @property
    def efficiency(self) -> str:
        return efficiency_line(self)

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> Self:
        # Slurm: the comment (hpcui:<token>); PBS: HPCUI_TOKEN of Variable_List, given
        values["token"] = values.get("token") or token_of(values.get("comment", ""))
        return trusted(cls, values)

    @classmethod
    def from_entry(cls, entry: AccountingEntry) -> HistoryJob:
        return cls.from_values(_fields(entry))


def _fields(entry: QueueEntry) -> dict[str, Any]:
    """The stored fields only: computed ones (efficiencies) are recomputed by the subclass."""
    return {k: v for k, v in entry.__dict__.items() if k != "token"}


def format_bytes(n: float) -> str:
    """``1.5 GiB``: what seff and the quota tools print."""
    return size(n, iec=True)


def efficiency_line(job: AccountingEntry) -> str:
    """One line like seff's: ``CPU 85.0% of 4 cores x 00:10:00 | Memory 1.2 GiB of 4.0 GiB (30.0%)``.

    Says "n/a until the job ends" while it runs: sacct adds a step's usage only when the
    step ends, so a partial figure would mislead.
    """
    if not job.state.is_final:
        return "efficiency: n/a until the job ends"
    parts = []
    if job.cpu_efficiency is not None and job.cpus and job.elapsed_s is not None:
        parts.append(
            f"CPU {100 * job.cpu_efficiency:.1f}% of {job.cpus} core"
            f"{'s' if job.cpus != 1 else ''} x {hms(job.elapsed_s)}"
        )
    else:
        parts.append("CPU n/a")
    if job.max_rss_bytes is not None and job.mem_bytes and job.mem_efficiency is not None:
        per_node = job.mem_bytes / max(job.nodes, 1)
        parts.append(
            f"Memory {format_bytes(job.max_rss_bytes)} of {format_bytes(per_node)}"
            f"{' per node' if job.nodes > 1 else ''} ({100 * job.mem_efficiency:.1f}%)"
        )
    else:
        parts.append("Memory n/a")
    return " | ".join(parts)


def since_arg(since: datetime | timedelta | str | None) -> str | None:
    """The ``--starttime`` value: a datetime (the cluster's local time, naive) as
    ``YYYY-MM-DDTHH:MM:SS``, a timedelta as ``now-<seconds>`` (so the laptop's clock and
    time zone do not matter), a string as given."""
    if since is None or isinstance(since, str):
        return since
    if isinstance(since, timedelta):
        seconds = int(since.total_seconds())
        if seconds < 0:
            raise UsageError(f"history(since=...) needs a positive timedelta, got {since}.")
        return f"now-{seconds}"
    if isinstance(since, datetime):
        return since.strftime("%Y-%m-%dT%H:%M:%S")
    raise UsageError(
        f"history(since=...) takes a datetime, a timedelta or a string, got {type(since).__name__}."
    )


def jobs_from_records(
    records: Iterable[JobRecord], *, history: bool, since_s: float | None = None
) -> list[QueueJob | HistoryJob]:
    """hpcui's own jobs from the registry, as queue or history rows: the list where the
    scheduler keeps none (plain processes). ``since_s``: submitted at most that long ago."""
    now = datetime.now().timestamp()
    row: type[HistoryJob] | type[QueueJob] = HistoryJob if history else QueueJob
    return [
        row(
            job_id=r.job_id,
            name=r.name,
            state=r.state,
            state_raw=r.state_raw or r.state.value,
            submit_time=datetime.fromtimestamp(r.submitted_at),
            comment=f"{TOKEN_PREFIX}{r.token}",
            token=r.token,
        )
        for r in records
        if r.job_id and (since_s is None or now - r.submitted_at <= since_s)
    ]
