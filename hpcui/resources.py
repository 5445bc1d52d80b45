"""The resource request: one validated model, resolved against a site profile."""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hpcui.errors import UsageError
from hpcui.profiles import Profile

_UNIT_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr|d|day)s?\s*$", re.I)
_SLURM_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_MEM = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*$", re.I)
_UNIT_SECONDS = {
    "s": 1,
    "sec": 1,
    "m": 60,
    "min": 60,
    "h": 3600,
    "hr": 3600,
    "d": 86400,
    "day": 86400,
}


def parse_time(value: str | int | float | timedelta) -> int:
    """Seconds from `1:00:00`, `90m`, `2h`, `1-00:00:00`, an int (seconds) or a timedelta.

    A bare number in a string follows Slurm: minutes (`"30"` is 30 minutes).
    """
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        m = _UNIT_TIME.match(value)
        if m:
            seconds = float(m.group(1)) * _UNIT_SECONDS[m.group(2).lower()]
        else:
            m = _SLURM_TIME.match(value.strip())
            if not m:
                raise ValueError(
                    f"cannot read time {value!r}: use 90m, 2h, 1:30:00, 1-00:00:00 or seconds as int"
                )
            days, a, b, c = (int(x) if x else None for x in m.groups())
            if b is None:  # "MM" or "D-HH"
                seconds = (days or 0) * 86400 + (a * 3600 if days is not None else a * 60)
            elif c is None:  # "MM:SS" or "D-HH:MM"
                seconds = (days * 86400 + a * 3600 + b * 60) if days is not None else a * 60 + b
            else:
                seconds = (days or 0) * 86400 + a * 3600 + b * 60 + c
    else:
        raise ValueError(f"cannot read time {value!r}")
    if seconds <= 0:
        raise ValueError(f"time must be positive, got {value!r}")
    return math.ceil(seconds)


def parse_mem_mb(value: str | int) -> int:
    """Megabytes from `4G`, `500M`, `2T`, or an int (MB), as Slurm reads --mem."""
    if isinstance(value, int) and not isinstance(value, bool):
        mb = value
    else:
        m = _MEM.match(str(value))
        if not m:
            raise ValueError(f"cannot read memory {value!r}: use e.g. 4G, 500M or an int in MB")
        mult = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[m.group(2).upper()]
        mb = math.ceil(float(m.group(1)) * mult)
    if mb <= 0:
        raise ValueError(f"memory must be positive, got {value!r}")
    return mb


class Resources(BaseModel):
    """What a job asks for. Unset fields are filled from the site profile."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpus: int = Field(0, ge=0, description="total GPUs across all nodes")
    nodes: int | None = Field(None, ge=1)
    tasks_per_node: int | None = Field(None, ge=1)
    cpus_per_task: int | None = Field(None, ge=1)
    mem_mb: int | None = Field(None, description="memory per node in MB (accepts mem='4G')")
    time_s: int | None = Field(None, description="time limit in seconds (accepts time='2h')")
    partition: str | None = None
    qos: str | None = None
    account: str | None = None
    constraint: str | None = None
    exclusive: bool = False
    name: str | None = None
    array_parallelism: int | None = Field(None, ge=1)
    launcher: Literal["submitit", "torchrun"] = "submitit"
    extra: tuple[str, ...] = ()

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> Resources:
        """Build from user keywords (`time=`, `mem=` aliases), turning errors into UsageError."""
        data = dict(kwargs)
        if "time" in data:
            data["time_s"] = data.pop("time")
        if "mem" in data:
            data["mem_mb"] = data.pop("mem")
        unknown = sorted(set(data) - set(cls.model_fields))
        if unknown:
            raise UsageError(
                f"Unknown resource keyword(s): {', '.join(unknown)}. Resources are: "
                f"{', '.join(sorted({*cls.model_fields, 'time', 'mem'} - {'time_s', 'mem_mb'}))}. "
                "To pass keyword arguments to your function, use kwargs={...} "
                "(e.g. submit(fn, 1, kwargs={'gpus': 2}, gpus=4))."
            )
        try:
            return cls(**data)
        except ValidationError as exc:
            msgs = "; ".join(
                f"{'.'.join(str(x) for x in e['loc']) or 'request'}: {e['msg']}"
                for e in exc.errors()
            )
            raise UsageError(f"Invalid resource request: {msgs}. Fix those values.") from None

    @field_validator("time_s", mode="before")
    @classmethod
    def _time(cls, v: Any) -> int | None:
        return None if v is None else parse_time(v)

    @field_validator("mem_mb", mode="before")
    @classmethod
    def _mem(cls, v: Any) -> int | None:
        return None if v is None else parse_mem_mb(v)

    @field_validator("extra", mode="before")
    @classmethod
    def _extra(cls, v: Any) -> tuple[str, ...]:
        return (v,) if isinstance(v, str) else tuple(v)

    def merged(self, defaults: dict[str, Any]) -> Resources:
        """Fill fields the user left unset from cluster defaults (e.g. account)."""
        if not defaults:
            return self
        base = Resources.from_kwargs(**defaults).model_dump(exclude_unset=True)
        return Resources(**{**base, **self.model_dump(exclude_unset=True)})


class Allocation(BaseModel):
    """A request resolved against a profile: every number the batch script needs."""

    model_config = ConfigDict(frozen=True)

    nodes: int
    tasks_per_node: int
    cpus_per_task: int
    gpus_per_node: int
    mem_mb: int | None
    time_s: int | None
    partition: str | None
    qos: str | None
    account: str | None
    constraint: str | None
    exclusive: bool
    name: str
    extra: tuple[str, ...]
    gpu_directive: str
    gpu_type: str | None

    @property
    def num_tasks(self) -> int:
        return self.nodes * self.tasks_per_node


def resolve(req: Resources, profile: Profile, *, default_name: str = "hpcui") -> Allocation:
    """Apply the profile's rules; a request the site cannot run fails here, before any network."""
    gpn = profile.gpus_per_node
    gpus = req.gpus
    if gpus and gpn == 0 and profile.scheduler != "slurm":
        raise UsageError(
            f"Profile {profile.name!r} has no GPUs; drop gpus={gpus} or pick a GPU cluster."
        )
    if gpus and gpn:
        nodes = req.nodes or math.ceil(gpus / gpn)
        if gpus > gpn and gpus % gpn:
            lo, hi = (gpus // gpn) * gpn, math.ceil(gpus / gpn) * gpn
            raise UsageError(
                f"gpus={gpus} spans nodes of {gpn} GPUs on {profile.name}: multi-node jobs use whole "
                f"nodes. Ask for {lo} or {hi} GPUs."
            )
        if gpus % nodes:
            raise UsageError(f"gpus={gpus} cannot be split evenly over nodes={nodes}.")
        gpus_per_node = gpus // nodes
        if gpus_per_node > gpn:
            raise UsageError(
                f"gpus={gpus} over nodes={nodes} needs {gpus_per_node} GPUs per node; "
                f"{profile.name} nodes have {gpn}. Use nodes={math.ceil(gpus / gpn)}."
            )
    else:
        nodes = req.nodes or 1
        gpus_per_node = gpus // nodes if gpus else 0
    partition = (
        req.partition or (profile.gpu_partition if gpus else None) or profile.default_partition
    )
    part = profile.partition(partition)
    if profile.partitions and partition and part is None:
        names = ", ".join(p.name for p in profile.partitions)
        raise UsageError(
            f"Partition {partition!r} is not in profile {profile.name!r} (known: {names})."
        )
    if part is not None:
        if part.max_time_s and req.time_s and req.time_s > part.max_time_s:
            raise UsageError(
                f"time={req.time_s}s exceeds partition {part.name!r}'s limit of {part.max_time_s}s; "
                "ask for less time or another partition."
            )
        if gpus and not part.gpu and profile.gpu_partition:
            raise UsageError(f"Partition {part.name!r} has no GPUs; use {profile.gpu_partition!r}.")
    if profile.requires_account and not req.account:
        raise UsageError(
            f"{profile.name} requires an account/project: pass account='...' or set "
            "defaults.account in the cluster config."
        )
    if req.launcher == "torchrun":
        tasks_per_node = req.tasks_per_node or 1
    else:
        tasks_per_node = req.tasks_per_node or max(gpus_per_node, 1)
    cpus = req.cpus_per_task
    if cpus is None:
        if gpus_per_node and profile.cpus_per_gpu:
            cpus = profile.cpus_per_gpu * gpus_per_node // tasks_per_node
        cpus = max(cpus or 1, 1)
    mem = req.mem_mb
    if mem is None and gpus_per_node and profile.mem_per_gpu_mb:
        mem = profile.mem_per_gpu_mb * gpus_per_node
    return Allocation(
        nodes=nodes,
        tasks_per_node=tasks_per_node,
        cpus_per_task=cpus,
        gpus_per_node=gpus_per_node,
        mem_mb=mem,
        time_s=req.time_s,
        partition=partition,
        qos=req.qos,
        account=req.account,
        constraint=req.constraint,
        exclusive=req.exclusive,
        name=req.name or default_name,
        extra=req.extra,
        gpu_directive=profile.gpu_directive,
        gpu_type=profile.gpu_type,
    )
