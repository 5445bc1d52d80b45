"""A chain as one job: the segments (ordinary jobs, backends/chain.py) behind one handle.

`ChainJob` is a `Job` whose identity is its first segment's id (the id every face shows,
with `segment k/N`); state, logs, stop and usage are the segment that matters now (the
one that finished the work, else the first still queued or running, else the last), and
`result()` is that segment's. Cancel cancels every segment still waiting or running.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from hpcui.backends import chain
from hpcui.backends.job_paths import JobPaths, Stream, result_name
from hpcui.backends.states import JobState
from hpcui.errors import HpcuiError, JobTimeLimitError
from hpcui.jobs.job import Job, JobHost
from hpcui.logs.follow import LogChunk, LogOptions
from hpcui.store.registry import JobRecord, Registry
from hpcui.store.remote import list_results
from hpcui.store.signing import job_key
from hpcui.transport import deadline

if TYPE_CHECKING:  # as in hpcui.jobs.job: pydantic only where usage is asked for
    from hpcui.jobs.usage import UsageReport, UsageSample


def chain_position(record: JobRecord) -> int:
    """A segment record's place in its chain (hpcui.submission.submitter keeps it)."""
    return int(record.meta.get("chain", [0])[0])


def job_for(
    host: JobHost,
    rec: JobRecord,
    by_token: Callable[[str], list[JobRecord]],
    *,
    result_cache: Path | None,
    spool_dir: Path | None,
) -> Job:
    """The handle for a registry record: a `Job`, or the `ChainJob` it is a segment of
    (any segment's id finds the whole chain)."""

    def one(r: JobRecord) -> Job:
        # jobs submitted before results were signed (no "signed" in meta) keep working
        key = job_key(r.token) if r.meta.get("signed") else None
        return Job(
            host,
            r.job_id or "",
            r.folder,
            num_tasks=r.num_tasks,
            name=r.name,
            result_key=key,
            result_cache=result_cache,
            cleaned_at=r.meta.get("cleaned_at"),
            spool_dir=spool_dir,
        )

    if "chain" not in rec.meta:
        return one(rec)
    segments = sorted(by_token(rec.token), key=chain_position)
    return ChainJob([one(r) for r in segments if r.job_id])


def whole_chains(
    registry: Registry, cluster: str, job_ids: list[str], over: Callable[[str], bool]
) -> list[str]:
    """`job_ids` with each chain's segment replaced by every segment of its chain that has
    not ended (`over`): cancelling a segment cancels the chain (the afterany of the next
    would start it otherwise)."""
    out: list[str] = []
    for job_id in job_ids:
        rec = registry.get(cluster, job_id)
        if rec is None or "chain" not in rec.meta:
            out.append(job_id)
            continue
        ids = [r.job_id for r in registry.by_token(cluster, rec.token) if r.job_id]
        out += [i for i in ids if not over(i)] or [job_id]
    return list(dict.fromkeys(out))


class ChainJob(Job):
    """Made by `Cluster.submit(..., chain=N)` or found again by any segment's id."""

    def __init__(self, segments: Sequence[Job]) -> None:
        first = segments[0]
        super().__init__(
            first.cluster,
            first.job_id,
            first.folder,
            num_tasks=first.num_tasks,
            name=first.name,
            result_key=first.result_key,
            result_cache=first.result_cache,
            cleaned_at=first.cleaned_at,
            spool_dir=first.spool_dir,
        )
        self.segments = list(segments)
        self._finisher: Job | None = None
        self._looked_at_ends = -1  # settled segments when DONE was last looked for
        self._over: Job | None = None  # every segment ended, none wrote DONE: this one

    def __repr__(self) -> str:
        return (
            f"ChainJob({self.cluster.name}:{self.job_id}, segment {self.position}/"
            f"{len(self.segments)}, {self.state.value})"
        )

    @property
    def ids(self) -> list[str]:
        return [s.job_id for s in self.segments]

    # -- which segment matters now -----------------------------------------------------------

    def _settled(self) -> list[bool]:
        status = self.cluster.status
        if any(status.get(i) is None for i in self.ids):
            status.track(self.ids)
            status.poll_once()
        return [status.settled(i) for i in self.ids]

    def finished_by(self) -> Job | None:
        """The segment that finished the work (it wrote the chain's DONE file); read again
        only when another segment has ended."""
        if self._finisher is not None:
            return self._finisher
        ended = sum(self._settled())
        if ended and ended != self._looked_at_ends:
            self._looked_at_ends = ended
            try:
                said = self.cluster.transport.read_file(f"{self.folder}/{chain.DONE}")
            except FileNotFoundError:
                return None
            done_id = said.decode("utf-8", "replace").strip()
            # the node writes the id its scheduler gave (PBS: `1234.server`)
            self._finisher = next(
                (s for s in self.segments if s.job_id == done_id or done_id.startswith(s.job_id)),
                self.segments[-1],
            )
        return self._finisher

    @property
    def current(self) -> Job:
        """The segment that finished the work; else the first one not ended; else the last
        one that left a result (a loop that returned at the limit), else the last."""
        finisher = self.finished_by()
        if finisher is not None:
            return finisher
        settled = self._settled()
        for segment, over in zip(self.segments, settled, strict=True):
            if not over:
                return segment
        if self._over is None:  # all ended: asked once
            results = list_results(self.cluster.transport, [self.folder])
            self._over = next(
                (s for s in reversed(self.segments) if result_name(s.job_id, "0") in results),
                self.segments[-1],
            )
        return self._over

    @property
    def position(self) -> int:
        """Which segment matters now, counted from 1."""
        return self.segments.index(self.current) + 1

    # -- state -------------------------------------------------------------------------------

    @property
    def state(self) -> JobState:
        return self.current.state

    @property
    def reason(self) -> str:
        current = self.current
        said = current.reason
        where = f"segment {self.segments.index(current) + 1}/{len(self.segments)}"
        return f"{said} ({where})" if said else where

    def done(self) -> bool:
        return self.finished_by() is not None or all(self._settled())

    def wait(self, timeout: float | None = None) -> JobState:
        """Until the chain is over: a segment finished the work, or every one ended. The
        segments after the one that finished are cancelled here too (the node's own cancel
        may not be allowed at a site)."""
        ends = deadline.ends_after(timeout)
        for _ in range(len(self.segments) + 1):  # each round waits for one segment's end
            if self.done():
                break
            self.current.wait(deadline.rest(ends))
        self._cancel_after_finish()
        return self.state

    def _cancel_after_finish(self) -> None:
        finisher = self.finished_by()
        if finisher is None:
            return
        later = self.segments[self.segments.index(finisher) + 1 :]
        waiting = [s.job_id for s in later if not self.cluster.status.settled(s.job_id)]
        if waiting:
            try:
                self.cluster.control.cancel(waiting)
            except HpcuiError:  # ended meanwhile (the node's own cancel): nothing to do
                pass

    def cancel(self) -> None:
        """Every segment that has not ended, with one cancel."""
        settled = self._settled()
        live = [i for i, over in zip(self.ids, settled, strict=True) if not over]
        self.cluster.control.cancel(live or self.ids[-1:])

    # -- the segment now: logs, stop, files ----------------------------------------------------

    @property
    def paths(self) -> JobPaths:
        return JobPaths(self.folder, self.current.job_id)

    def logs(
        self, stream: Stream = "stdout", rank: int | None = None, **options: Unpack[LogOptions]
    ) -> Iterator[LogChunk]:
        """The current segment's logs (followed until that segment ends)."""
        return self.current.logs(stream, rank, **options)

    def stop(self) -> None:
        """Ask the running segment to end itself: its call returns before the limit, so
        the chain counts as finished and the later segments are cancelled."""
        self.current.stop()

    def usage(self) -> UsageSample:
        return self.current.usage()

    def usage_report(self) -> UsageReport:
        return self.current.usage_report()

    def stdout(self, task: int = 0) -> str:
        return self.current.stdout(task)

    def stderr(self, task: int = 0) -> str:
        return self.current.stderr(task)

    # -- results -------------------------------------------------------------------------------

    def results(self, timeout: float | None = None) -> list[Any]:
        ends = deadline.ends_after(timeout)
        self.wait(timeout)
        with deadline.within(deadline.rest(ends)):
            segment = self.current
            return [self._of(segment, task) for task in range(self.num_tasks)]

    def _result(self, task: int, timeout: float | None) -> Any:
        ends = deadline.ends_after(timeout)
        self.wait(timeout)
        with deadline.within(deadline.rest(ends)):
            return self._of(self.current, task)

    def _of(self, segment: Job, task: int) -> Any:
        try:
            return segment._read_result(task, segment.state)
        except JobTimeLimitError as exc:
            raise JobTimeLimitError(
                f"All {len(self.segments)} segments of chain {self.job_id} on "
                f"{self.cluster.name} ran to their time limit without finishing the work "
                f"(the last, {segment.job_id}: {exc}). Submit it again with more segments "
                "(chain=N) or a longer time: it resumes from its last checkpoint.",
                job_id=segment.job_id,
                stderr_tail=getattr(exc, "stderr_tail", ""),
            ) from exc
