"""One job as every face shows it: what hpcui recorded, what the scheduler says now (the
queue row while the job lives, its accounting once it ended, its description for a job
hpcui did not submit), and the GPU use kept while it ran.

Built here once, from the parts a `Cluster` owns; the CLI's `show` prints `JobView.fields()`
as key/value lines (its `--json` is the model itself) and the app's Job screen draws the same
fields as its details tab, so the two never say different things about one job."""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import Field

from hpcui.backends.model import Model
from hpcui.backends.records import JobDetails
from hpcui.backends.states import JobState
from hpcui.common.formatting import hms, when
from hpcui.jobs.usage import GpuSummary
from hpcui.sitestate.jobs import HistoryJob, QueueJob
from hpcui.store.registry import JobRecord


class JobView(Model):
    """`hpcui show --json`: one model for hpcui's jobs and every other job of the user."""

    cluster: str
    job_id: str
    name: str
    state: JobState
    state_raw: str = ""
    reason: str = Field("", description="why a pending job waits (the scheduler's words)")
    folder: str = ""
    num_tasks: int = 1
    token: str | None = None
    array_index: int = -1
    submitted_at: datetime | None = None
    cancel_sent_at: datetime | None = Field(
        None, description="when a cancel of this hpcui job was accepted (it may still be ending)"
    )
    container: str | None = Field(None, description="the runtime and image the job ran in")
    track: str | None = Field(
        None, description="track= jobs: where its trackers are mirrored here, their links"
    )
    queue: QueueJob | None = Field(None, description="the queue's row while the job is listed")
    accounting: HistoryJob | None = Field(
        None, description="the scheduler's record: exit code, elapsed, usage, efficiency"
    )
    gpu_usage: list[GpuSummary] = Field(
        default_factory=list,
        description="mean/peak GPU use per GPU over the looks kept while it ran (hpcui usage)",
    )
    hpcui_job: bool = Field(True, description="submitted by hpcui (else folder is empty)")
    finish: str = Field(
        "",
        description="a running job: whether it ends before its limit, from the progress its "
        "log printed, with the basis of the rate (hpcui.jobs.finish)",
    )
    details: JobDetails | None = Field(
        None,
        description="the scheduler's description (scontrol show job, qstat -f): log paths, "
        "working directory, script, dependency, limit; for jobs hpcui did not submit, and "
        "for hpcui's own while they wait or run",
    )

    def fields(self) -> list[tuple[str, str]]:
        """(label, text) in the order both faces show them; what is unknown is left out."""
        d, q, a = self.details, self.queue, self.accounting
        raw = self.state_raw if self.state_raw not in ("", self.state.value) else ""
        nodes = (
            f"{a.nodes} ({a.nodelist})"
            if a and a.nodelist
            else f"{q.nodes} ({q.nodelist})"
            if q and q.nodelist
            else (d.nodelist if d else "")
        )
        started = (a.start_time if a else None) or (q.start_time if q else None)
        started = started or (d.start_time if d else None)
        waiting = self.state in (JobState.PENDING, JobState.SUBMITTING, JobState.REQUEUED)
        # a live job's description is the newest word on its limit (an update --time)
        limit = d.time_limit_s if d and not self.state.is_final else None
        limit = limit or (a.time_limit_s if a else None) or (q.time_limit_s if q else None)
        limit = limit or (d.time_limit_s if d else None)
        elapsed = a.elapsed_s if a else (q.elapsed_s if q else None)
        if self.state in (JobState.PENDING, JobState.SUBMITTING, JobState.REQUEUED):
            elapsed = None  # not started: its limit is what there is to say
        exit_code = ""
        if a is not None and a.state.is_final and a.exit_code is not None:
            exit_code = f"{a.exit_code}" + (f"  signal {a.signal}" if a.signal else "")
        elif d is not None and d.exit_code and self.state.is_final:
            exit_code = d.exit_code
        if exit_code.split(":")[0].strip() in ("0", "") and self.state in _ENDED_BY_SCHEDULER:
            # Slurm records 0 for a job it ended itself: not a success
            exit_code = f"none: ended by the scheduler ({_ENDED_BY_SCHEDULER[self.state]})"
        own = self.hpcui_job  # hpcui's own script and logs: `folder` says where they are
        rows: list[tuple[str, str | None]] = [
            ("job", f"{self.job_id} on {self.cluster}" + ("" if self.hpcui_job else " (not submitted by hpcui)")),
            ("name", self.name),
            ("user", d.user if d else None),
            ("state", self.state.value + (f" ({raw})" if raw else "") + self._ending()),
            ("reason", self.reason),
            ("tasks", str(self.num_tasks) if self.hpcui_job else None),
            ("folder", self.folder if self.hpcui_job else None),
            ("container", self.container),
            ("trackers", self.track),
            ("submitted", when(self.submitted_at) if self.submitted_at else None),
            ("partition", (a.partition if a else "") or (q.partition if q else "") or (d.partition if d else "")),
            ("qos", q.qos if q else None),
            ("account", (q.account if q else "") or (a.account if a else "")),
            ("GPUs", str(q.gpus) if q and q.gpus is not None else None),
            ("nodes", nodes),
            # a waiting job's start is the scheduler's estimate (squeue --start, scontrol,
            # PBS estimated.start_time), never a start that happened
            ("expected start" if waiting else "started", when(started) if started else None),
            ("ended", when(a.end_time) if a and a.end_time else None),
            ("elapsed", (hms(elapsed) + (f" of {hms(limit)}" if limit else "")) if elapsed is not None else None),
            ("time limit", hms(limit) if limit and elapsed is None else None),
            ("will it finish", self.finish),
            ("exit code", exit_code),
            ("efficiency", a.efficiency.removeprefix("efficiency: ") if a else None),
            ("dependency", d.dependency if d else None),
            ("script", d.command if d and not own else None),
            ("work dir", d.work_dir if d and not own else None),
            ("stdout", d.stdout if d and not own else None),
            ("stderr", d.stderr if d and d.stderr != d.stdout and not own else None),
            ("note", d.log_note if d and not own else None),
            ("token", self.token),
            *((f"GPU {g.node}:{g.index}", gpu_line(g)) for g in self.gpu_usage),
        ]  # fmt: skip
        return [(k, v) for k, v in rows if v]

    def _ending(self) -> str:
        """A cancelled job still listed as running: the scheduler accepted the cancel and
        ends it (PBS keeps it R until its processes are gone, up to the mom's kill_delay)."""
        if self.cancel_sent_at is None or self.state.is_final:
            return ""
        if datetime.now() - self.cancel_sent_at > timedelta(minutes=10):
            return ""  # long over: requeued since, or stuck (the state says which)
        return f", being cancelled (cancel accepted at {self.cancel_sent_at:%H:%M:%S})"


#: states the scheduler ends a job in whatever its code did: its exit code says nothing
_ENDED_BY_SCHEDULER = {
    JobState.TIMEOUT: "its time limit",
    JobState.CANCELLED: "a cancel",
    JobState.NODE_FAIL: "a node failure",
    JobState.PREEMPTED: "a preemption",
}


def gpu_line(g: GpuSummary) -> str | None:
    if None in (g.mean_util_pct, g.peak_util_pct, g.mean_mem_mib, g.peak_mem_mib, g.mem_total_mib):
        return None
    return (
        f"mean {g.mean_util_pct:.0f}% peak {g.peak_util_pct:.0f}%, memory mean "
        f"{g.mean_mem_mib:.0f} peak {g.peak_mem_mib:.0f} of {g.mem_total_mib:.0f} MiB "
        f"({g.samples} looks)"
    )


def assemble(
    cluster: str,
    job_id: str,
    *,
    record: JobRecord | None = None,
    queue: QueueJob | None = None,
    accounting: HistoryJob | None = None,
    details: JobDetails | None = None,
    gpu_usage: list[GpuSummary] | None = None,
    status_reason: str = "",
    track: str | None = None,
) -> JobView:
    """What is known of a job, newest word first: accounting once it ended, else the
    queue's row, else the scheduler's description, else hpcui's record (which the caller
    brings up to date from the status service: `status_reason` is that service's too)."""
    newest = accounting or queue or details or record
    state, raw = (newest.state, newest.state_raw) if newest else (JobState.UNKNOWN, "")
    reason = (queue.reason if queue else "") or (details.reason if details else "") or status_reason
    name = (record.name if record else "") or (queue.name if queue else "")
    name = name or (details.name if details else "") or (accounting.name if accounting else "")
    submitted = datetime.fromtimestamp(record.submitted_at) if record else None
    submitted = submitted or (details.submit_time if details else None)
    return JobView(
        cluster=cluster,
        job_id=job_id,
        name=name,
        state=state,
        state_raw=raw,
        reason=reason if not state.is_final else "",
        folder=record.folder if record else "",
        num_tasks=record.num_tasks if record else 1,
        token=record.token if record else None,
        array_index=record.array_index if record else -1,
        submitted_at=submitted,
        cancel_sent_at=(
            datetime.fromtimestamp(record.meta["cancel_sent_at"])
            if record and isinstance(record.meta.get("cancel_sent_at"), (int, float))
            else None
        ),
        container=record.meta.get("container") if record else None,
        track=track,
        queue=queue,
        accounting=accounting,
        gpu_usage=gpu_usage or [],
        hpcui_job=record is not None,
        details=details,
    )
