"""hpcui's scheduler-neutral records: what every dialect (Slurm, PBS, the local
processes) fills in and every face shows. Slurm's parsers produced them first; they live
here so PBS and local need nothing from a Slurm file."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, computed_field

from hpcui.backends.model import Model
from hpcui.backends.states import JobState

M = TypeVar("M", bound=BaseModel)


def trusted(cls: type[M], values: dict[str, Any]) -> M:
    """A model from values a parser of this package produced, typed already: every field,
    no default to fill, nothing to coerce. pydantic's `model_construct` costs ~10 us a
    row (defaults, aliases, extras); a 10,000-job queue is parsed on every refresh. This
    is what it leaves behind for such values (tests compare both).

    Every field is set, so all rows of a class share one fields-set: the models are
    frozen, and pydantic copies the set before changing it (``model_copy``)."""
    model = _new(cls)
    _set_dict(model, values)
    _set_fields_set(model, _all_fields(cls))
    _set_extra(model, None)
    _set_private(model, None)
    return model


# BaseModel's slots, set through their descriptors (what object.__setattr__ looks up by
# name on every call)
_new = object.__new__
_set_dict, _set_fields_set, _set_extra, _set_private = (
    BaseModel.__dict__[slot].__set__
    for slot in (
        "__dict__",
        "__pydantic_fields_set__",
        "__pydantic_extra__",
        "__pydantic_private__",
    )
)


@functools.cache
def _all_fields(cls: type[BaseModel]) -> set[str]:
    return set(cls.model_fields)


class QueueEntry(Model):
    """One job as the scheduler sees it now; ``state_raw`` keeps Slurm's own words."""

    model_config = ConfigDict(frozen=True)

    job_id: str  # "123", "123_7", "123_[8-9]", "123+1"
    array_job_id: str | None = None
    array_task_id: int | None = None
    name: str = ""
    user: str = ""
    state: JobState
    state_raw: str = ""
    reason: str = ""
    partition: str = ""
    qos: str = ""
    account: str = ""
    nodes: int = 0
    nodelist: str = ""
    gpus: int | None = None
    elapsed_s: int | None = None
    time_limit_s: int | None = None  # None: UNLIMITED or not set
    submit_time: datetime | None = None
    start_time: datetime | None = None  # expected start while pending
    comment: str = ""

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> Self:
        """A row from a parser's typed values (every stored field): no second validation.
        Subclasses that derive a field (the faces' token) add it here."""
        return trusted(cls, values)


class AccountingEntry(QueueEntry):
    """A job with its outcome and usage: from sacct, or from squeue where accounting is off
    (then the usage fields stay None). Efficiencies are None until the job has ended:
    sacct adds a step's usage only when the step ends."""

    exit_code: int | None = None
    signal: int | None = None
    end_time: datetime | None = None
    cpus: int | None = None
    mem_bytes: int | None = None  # allocated, all nodes
    cpu_time_s: float | None = None
    max_rss_bytes: int | None = None  # the largest task's peak

    @computed_field
    @property
    def cpu_efficiency(self) -> float | None:
        """CPU time used / CPU time allocated (elapsed x CPUs), like seff."""
        if not self.state.is_final or self.cpu_time_s is None or not (self.elapsed_s and self.cpus):
            return None
        return self.cpu_time_s / (self.elapsed_s * self.cpus)

    @computed_field
    @property
    def mem_efficiency(self) -> float | None:
        """Largest task's peak RSS / memory allocated per node: exact for one task per
        node, a lower bound when several tasks share a node."""
        if not self.state.is_final or self.max_rss_bytes is None or not self.mem_bytes:
            return None
        return self.max_rss_bytes / (self.mem_bytes / max(self.nodes, 1))


class JobDetails(Model):
    """Any job of the user as the scheduler describes it (``scontrol show job``, PBS's
    ``qstat -f``): where its logs go and what it runs, for jobs hpcui did not submit."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    name: str = ""
    user: str = ""
    state: JobState
    state_raw: str = ""
    reason: str = ""
    #: the scheduler's exit code as it prints it: Slurm's ``status:signal`` (``0:53``),
    #: PBS's Exit_status (``-1``, ``271``); "" while it runs or where unknown
    exit_code: str = ""
    partition: str = ""
    work_dir: str = ""
    command: str = ""  # the batch script's path as submitted ("" for srun/salloc jobs)
    stdout: str = ""  # absolute path on the cluster, patterns expanded; "" if unknown
    stderr: str = ""
    batch_host: str = ""  # the node running the batch script
    nodelist: str = ""
    time_limit_s: int | None = None
    dependency: str = ""
    submit_time: datetime | None = None
    start_time: datetime | None = None
    batch: bool = True  # a batch job (sbatch/qsub), not an interactive allocation
    log_note: str = ""  # what to know before following its logs ("" when nothing)


class StartEstimate(Model):
    """When a request would start in one partition, as the scheduler estimates it
    (`sbatch --test-only`); `start` None where it gives none (`said` says why)."""

    model_config = ConfigDict(frozen=True)

    partition: str
    start: datetime | None = None
    nodes: str = ""
    said: str = Field("", description="the scheduler's own words, or why there is no estimate")


class PartitionInfo(Model):
    """One ``sinfo`` line: a partition, or the part of one whose nodes look alike."""

    model_config = ConfigDict(frozen=True)

    partition: str
    is_default: bool
    avail: str  # up, down, drain, inact
    time_limit_s: int | None
    # None where the scheduler does not count per partition (PBS's qstat -Q)
    nodes_alloc: int | None
    nodes_idle: int | None
    nodes_other: int | None
    nodes_total: int | None
    cpus_alloc: int | None
    cpus_idle: int | None
    cpus_other: int | None
    cpus_total: int | None
    gres: str
    gpus_per_node: int | None
    nodelist: str
    # PBS counts jobs per queue (qstat -Q); sinfo does not: None there
    jobs_queued: int | None = None
    jobs_running: int | None = None
    kind: str | None = None  # PBS: "exec" runs jobs, "route" forwards them to other queues


class NodeInfo(Model):
    """One node in one partition (``sinfo --Node``): what is in use of it now."""

    model_config = ConfigDict(frozen=True)

    node: str
    partition: str
    is_default: bool = False
    state: str  # sinfo's long word without flags: idle, mixed, allocated, drained, down...
    responding: bool = True
    cpus_alloc: int
    cpus_idle: int
    cpus_total: int
    gpus_total: int = 0
    gpus_used: int = 0
    mem_mb: int | None = None
    mem_alloc_mb: int | None = None

    @computed_field
    @property
    def usable(self) -> bool:
        """Takes new jobs: up and responding, not drained, down or reserved."""
        return self.responding and self.state in (
            "idle",
            "mixed",
            "allocated",
            "completing",
            "planned",
        )

    @computed_field
    @property
    def gpus_free(self) -> int:
        return max(self.gpus_total - self.gpus_used, 0) if self.usable else 0


class PartitionFree(Model):
    """A partition's free capacity now, summed over its nodes that take jobs."""

    model_config = ConfigDict(frozen=True)

    partition: str
    is_default: bool = False
    nodes_total: int
    nodes_idle: int
    nodes_mixed: int
    nodes_allocated: int
    nodes_unavailable: int  # down, drained, not responding, reserved
    cpus_free: int
    gpus_free: int
    gpus_total: int
    #: the most GPUs one node has free: the largest single-node GPU job that starts now
    max_gpus_one_node: int


class FairShare(Model):
    """The user's fair share in one account (``sshare``): 1.0 best, 0.0 used up."""

    model_config = ConfigDict(frozen=True)

    account: str
    user: str
    raw_shares: int | None = None
    norm_shares: float | None = None
    raw_usage: int | None = None
    effective_usage: float | None = None
    fair_share: float | None = None


class JobPriority(Model):
    """A pending job's priority and its weighted factors (``sprio``)."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    user: str = ""
    partition: str = ""
    priority: float | None = None
    age: float | None = None
    fair_share: float | None = None
    job_size: float | None = None
    partition_factor: float | None = None
    qos: float | None = None


class AllocationEntry(Model):
    """One project's allocation of one resource (CPU core-hours, GPU hours, TB-hours)."""

    model_config = ConfigDict(frozen=True)

    project: str
    resource: str  # cpu, gpu, storage, qpu
    used: float
    allocated: float
    unit: str

    @computed_field
    @property
    def left(self) -> float:
        return self.allocated - self.used

    @computed_field
    @property
    def used_fraction(self) -> float | None:
        return self.used / self.allocated if self.allocated else None


class RemoteFile(Model):
    """One entry of a remote folder."""

    model_config = ConfigDict(frozen=True)

    name: str
    path: str
    is_dir: bool
    size: int
    modified: datetime | None = None
