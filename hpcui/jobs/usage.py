"""What a running job does with what it asked for: GPU and CPU use, kept, judged.

One scheduler-side command per job per sample (backends.usage), only when asked (the
faces sample while someone looks). Samples are appended beside the log spool
(`<registry dir>/usage/<cluster>/<job>.jsonl`), so a finished job still shows its GPU
history and summary. Verdicts turn the numbers into what the user should do: the JSC
course's lesson is "4 GPUs asked, 1 busy: the model is not distributed yet".
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field, computed_field

from hpcui.backends.model import Model
from hpcui.backends.usage import StepReading, UsageReading
from hpcui.common.formatting import figure

if TYPE_CHECKING:
    from hpcui.schedulers.base import Scheduler
    from hpcui.transport.base import Transport

#: a GPU under this utilisation (%) in every sample of the window is idle
IDLE_PCT = 5.0
#: GPU memory at or above this (%) is near out-of-memory
NEAR_OOM_PCT = 95.0
#: GPUs under this (%) while a task's CPU is at or above CPU_BOUND_PCT: the input pipeline
LOW_GPU_PCT, CPU_BOUND_PCT = 20.0, 90.0
#: the window the idle verdict looks at
WINDOW_S = 300.0
#: what a verdict on a trend needs: this many looks over at least this long (one or two
#: looks a second apart said "idle for the last 0 s")
MIN_LOOKS, MIN_SPAN_S = 3, 10.0
#: samples kept per job (older ones are dropped when the file grows past twice this)
KEEP = 2000
#: what UsageStore.last reads from the end of the file (a sample is ~0.4-4 KB)
TAIL_BYTES = 64 * 1024


class GpuUse(Model):
    node: str
    index: int
    name: str | None = None
    util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    power_w: float | None = None

    @computed_field
    @property
    def mem_pct(self) -> float | None:
        if self.mem_used_mib is None or not self.mem_total_mib:
            return None
        return round(100.0 * self.mem_used_mib / self.mem_total_mib, 1)

    @property
    def key(self) -> str:
        return f"{self.node}:{self.index}"


class TaskUse(Model):
    step: str
    ntasks: int
    cpu_pct: float | None = Field(
        None, description="per task, % of one core, since the last sample"
    )
    cpu_s: float | None = None
    elapsed_s: float | None = None
    rss_mb: float | None = None
    max_rss_mb: float | None = None


class UsageSample(Model):
    cluster: str
    job_id: str
    at: float = Field(description="epoch seconds on the client")
    gpus: list[GpuUse] = Field(default_factory=list)
    tasks: list[TaskUse] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class GpuSummary(Model):
    node: str
    index: int
    samples: int
    mean_util_pct: float | None
    peak_util_pct: float | None
    mean_mem_mib: float | None
    peak_mem_mib: float | None
    mem_total_mib: float | None


class UsageReport(Model):
    """What `hpcui usage --json` prints: the newest sample, the history's summary, verdicts."""

    cluster: str
    job_id: str
    sample: UsageSample | None = None
    samples: int = 0
    span_s: float = 0.0
    summary: list[GpuSummary] = Field(default_factory=list)
    verdicts: list[str] = Field(default_factory=list)


# -- from a reading to a sample --------------------------------------------------------------


def _cpu_pct(step: StepReading, before: TaskUse | None) -> float | None:
    """Recent CPU % per task: the change since the last sample, else the step's average."""
    if (
        before is not None
        and step.cpu_s is not None
        and step.elapsed_s is not None
        and before.cpu_s is not None
        and before.elapsed_s is not None
        and step.elapsed_s > before.elapsed_s
    ):
        return round(100.0 * (step.cpu_s - before.cpu_s) / (step.elapsed_s - before.elapsed_s), 1)
    pct = step.cpu_pct
    return None if pct is None else round(pct, 1)


def to_sample(
    cluster: str, job_id: str, reading: UsageReading, previous: UsageSample | None = None
) -> UsageSample:
    before = {t.step: t for t in previous.tasks} if previous else {}
    return UsageSample(
        cluster=cluster,
        job_id=job_id,
        at=time.time(),
        gpus=[
            GpuUse(
                node=n.host,
                index=g.index,
                name=g.name,
                util_pct=g.util_pct,
                mem_used_mib=g.mem_used_mib,
                mem_total_mib=g.mem_total_mib,
                power_w=g.power_w,
            )
            for n in reading.nodes
            for g in n.gpus
        ],
        tasks=[
            TaskUse(
                step=s.step,
                ntasks=s.ntasks,
                cpu_pct=_cpu_pct(s, before.get(s.step)),
                cpu_s=s.cpu_s,
                elapsed_s=s.elapsed_s,
                rss_mb=None if s.rss_mb is None else round(s.rss_mb, 1),
                max_rss_mb=None if s.max_rss_mb is None else round(s.max_rss_mb, 1),
            )
            for s in reading.steps
        ],
        notes=[*reading.notes, *(f"{n.host}: {n.note}" for n in reading.nodes if n.note)],
    )


# -- kept beside the log spool ---------------------------------------------------------------


def file_name(job_id: str) -> str:
    """`1234_5`, `12[3].server` as they are; anything else (`../x`) cannot leave the folder."""
    name = re.sub(r"[^A-Za-z0-9_.\[\]-]", "_", job_id)
    return "_" + name if name.startswith(".") or not name else name


class UsageStore:
    """One job's samples, a JSON line each (0600, like the rest of hpcui's local state)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, sample: UsageSample) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(sample.model_dump_json() + "\n")
        with contextlib.suppress(OSError):
            if self.path.stat().st_size > KEEP * 2 * 400:  # rough: ~400 bytes a sample
                self._trim()

    def _trim(self) -> None:
        lines = self.path.read_text(encoding="utf-8").splitlines()[-KEEP:]
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.chmod(tmp, 0o600)
        tmp.replace(self.path)

    def load(self) -> list[UsageSample]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out = []
        for line in text.splitlines():
            with contextlib.suppress(ValueError):  # a line cut by a crash is skipped
                out.append(UsageSample.model_validate_json(line))
        return out

    def last(self) -> UsageSample | None:
        """The newest sample, from the file's tail only (a look asks for it each time:
        parsing the whole history there would cost more than the look itself)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - TAIL_BYTES))
                tail = f.read().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return None
        for line in reversed(tail.splitlines()):
            # a line cut by a crash, or the tail's partial first line, does not validate
            with contextlib.suppress(ValueError):
                return UsageSample.model_validate_json(line)
        return None


# -- summary and verdicts --------------------------------------------------------------------


def gpu_figures(g: GpuUse) -> str:
    """``mem 6735/81559 MiB (8%)  694 W``: what a bar line says beside the bar."""
    return (
        f"mem {figure(g.mem_used_mib)}/{figure(g.mem_total_mib)} MiB ({figure(g.mem_pct, '%')})"
        f"  {figure(g.power_w, ' W')}"
    )


def task_line(t: TaskUse) -> str:
    return (
        f"step {t.step}: {t.ntasks} task(s) · CPU {figure(t.cpu_pct, '%')} per task · "
        f"RSS {figure(t.rss_mb, ' MiB')} (max {figure(t.max_rss_mb, ' MiB')})"
    )


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 1) if values else None


def summary(samples: Sequence[UsageSample]) -> list[GpuSummary]:
    """Mean and peak utilisation and memory per GPU over the samples."""
    by_gpu: dict[tuple[str, int], list[GpuUse]] = {}
    for s in samples:
        for g in s.gpus:
            by_gpu.setdefault((g.node, g.index), []).append(g)
    out = []
    for (node, index), uses in sorted(by_gpu.items()):
        utils = [u.util_pct for u in uses if u.util_pct is not None]
        mems = [u.mem_used_mib for u in uses if u.mem_used_mib is not None]
        out.append(
            GpuSummary(
                node=node,
                index=index,
                samples=len(uses),
                mean_util_pct=_mean(utils),
                peak_util_pct=max(utils) if utils else None,
                mean_mem_mib=_mean(mems),
                peak_mem_mib=max(mems) if mems else None,
                mem_total_mib=uses[-1].mem_total_mib,
            )
        )
    return out


def _span(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} minutes"


def verdicts(samples: Sequence[UsageSample], window_s: float = WINDOW_S) -> list[str]:
    """What the numbers mean, in words the user acts on."""
    if not samples:
        return []
    last = samples[-1]
    recent = [s for s in samples if last.at - s.at <= window_s]
    out: list[str] = []
    gpus = {g.key: g for g in last.gpus}
    enough = len(recent) >= MIN_LOOKS and last.at - recent[0].at >= MIN_SPAN_S
    if not enough and gpus:
        out.append(
            f"No verdict yet: {len(recent)} look(s) over {_span(last.at - recent[0].at)}; one "
            f"needs {MIN_LOOKS} looks over {MIN_SPAN_S:.0f} s or more (`hpcui top` looks every "
            "few seconds)."
        )
    if enough and gpus:
        idle = [
            k
            for k in gpus
            if all(
                g.util_pct is not None and g.util_pct < IDLE_PCT
                for s in recent
                for g in s.gpus
                if g.key == k
            )
        ]
        span = _span(last.at - recent[0].at)
        if idle and len(idle) == len(gpus):
            out.append(
                f"All {len(gpus)} GPU(s) idle for the last {span} — does the code put the "
                "model and data on the GPU (device='cuda')?"
            )
        elif idle:
            out.append(
                f"{len(idle)} of {len(gpus)} GPUs idle for the last {span} — is the model "
                "wrapped in DDP/FSDP (one rank per GPU)?"
            )
    for g in last.gpus:
        if g.mem_pct is not None and g.mem_pct >= NEAR_OOM_PCT:
            out.append(
                f"GPU memory {g.mem_pct:.0f}% on {g.node} GPU {g.index} — near OOM: a smaller "
                "batch, activation checkpointing or FSDP."
            )
    utils = [g.util_pct for g in last.gpus if g.util_pct is not None]
    cpus = [t.cpu_pct for t in last.tasks if t.cpu_pct is not None]
    if enough and utils and cpus and max(utils) < LOW_GPU_PCT and max(cpus) >= CPU_BOUND_PCT:
        out.append(
            f"CPU-bound: GPUs < {LOW_GPU_PCT:.0f}%, CPU {max(cpus):.0f}% per task — feed the "
            "GPUs faster (DataLoader num_workers, cpus_per_task, pinned memory)."
        )
    return out


def report(cluster: str, job_id: str, samples: Sequence[UsageSample]) -> UsageReport:
    return UsageReport(
        cluster=cluster,
        job_id=job_id,
        sample=samples[-1] if samples else None,
        samples=len(samples),
        span_s=round(samples[-1].at - samples[0].at, 1) if samples else 0.0,
        summary=summary(samples),
        verdicts=verdicts(samples),
    )


def store_for(root: Path, cluster: str, job_id: str) -> UsageStore:
    """A job's kept samples under `root` (the id made a safe file name: it may come from a
    command line)."""
    return UsageStore(root / cluster / f"{file_name(job_id)}.jsonl")


class JobUsage:
    """What a cluster's running jobs use (`cluster.usage`): looks taken now, kept per job
    under `root` (beside the registry) and judged."""

    def __init__(
        self, root: Path, cluster: str, transport: Transport, scheduler: Scheduler
    ) -> None:
        self.root, self.cluster = root, cluster
        self.transport, self.scheduler = transport, scheduler

    def store(self, job_id: str) -> UsageStore:
        """A job's kept samples."""
        return store_for(self.root, self.cluster, job_id)

    def look(self, job_ids: Iterable[str]) -> dict[str, UsageSample]:
        """One sample per job now (one scheduler-side command each), kept with its history.

        Per node and GPU of the job: utilisation, memory, power; per step: CPU % and RSS. A
        job that is not running gets a sample with a note and no figures."""
        out = {}
        for jid in job_ids:
            store = self.store(jid)
            res = self.transport.run(self.scheduler.usage_command(jid), timeout=60)
            reading = self.scheduler.parse_usage(res.stdout, jid)
            sample = to_sample(self.cluster, jid, reading, store.last())
            if sample.gpus or sample.tasks:  # an empty look (job not running) is not history
                store.append(sample)
            out[jid] = sample
        return out

    def report(self, job_id: str) -> UsageReport:
        """The kept samples of a job: the newest, mean/peak per GPU, and verdicts."""
        return report(self.cluster, job_id, self.store(job_id).load())
