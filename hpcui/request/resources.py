"""The resource request: one validated model, resolved against a site profile.

`resolve()` turns what a user asks (`gpus=16`) into what the scheduler needs (4 nodes x 4
tasks x 20 cores, `--gres=gpu:4`, a partition that takes it) using only the profile's data,
and fails before any network when the site would refuse the job. `batch_spec()` is the
one mapping from an Allocation to the renderer's BatchSpec.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator

from hpcui.backends.batch import BatchSpec, format_mem
from hpcui.backends.containers import ENV_NAME, IMAGE, ContainerLaunch, check_image, parse_bind
from hpcui.backends.model import Model
from hpcui.common.formatting import short_duration
from hpcui.common.units import parse_mem_mb, parse_signal_delay, parse_time
from hpcui.errors import UsageError
from hpcui.profiles import Billing, Partition, Profile

__all__ = [
    "Advice",
    "Allocation",
    "Resources",
    "batch_spec",
    "explain",
    "parse_mem_mb",
    "parse_time",
    "resolve",
]


_WORD = re.compile(r"[A-Za-z0-9._+:@,/%=-]{1,200}")
_CONSTRAINT = re.compile(r"[A-Za-z0-9._+:@,/%=&|()\[\]*!-]{1,500}")
#: a job id a dependency may name: Slurm `1234`, `1234_5`; PBS `1234.server`, `1234.server_5`
_DEPENDENCY_ID = re.compile(r"[0-9]{1,18}(?:\.[A-Za-z0-9-]{1,63}){0,6}(?:_[0-9]{1,9})?")
_MODULE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+/-]{0,199}")
_DIRECTIVE = re.compile(r"[A-Za-z0-9-][!-~]{0,499}")  # printable ASCII, no space
_DIRECTIVE_BAD = re.compile(r"[#'\"\\]")


class Resources(Model):
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
    max_restarts: int = Field(0, ge=0, description="torchrun --max-restarts (launcher='torchrun')")
    #: seconds before the time limit the job is told it is near (None: the profile's)
    signal_delay_s: int | None = Field(
        None, description="early time-limit signal in seconds (accepts signal_delay='5m')"
    )
    extra: tuple[str, ...] = ()
    #: start only after these jobs completed successfully (Job objects or ids)
    after_ok: tuple[str, ...] = ()
    #: environment modules this job loads after the cluster's setup (`module load ...`)
    modules: tuple[str, ...] = ()
    #: run inside this image (docs/containers.md); the runtime defaults to the profile's
    container: str | None = None
    container_runtime: Literal["apptainer", "singularity", "enroot", "pyxis"] | None = None
    binds: tuple[str, ...] = ()
    container_env: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> Resources:
        """Build from user keywords (`time=`, `mem=`, `project=`/`queue=` aliases).

        Errors become UsageError.
        """
        data = dict(kwargs)
        for alias, field in (
            ("time", "time_s"),
            ("signal_delay", "signal_delay_s"),
            ("mem", "mem_mb"),
            ("project", "account"),
            ("queue", "partition"),
        ):
            if alias in data:
                data[field] = data.pop(alias)
        unknown = sorted(set(data) - set(cls.model_fields))
        if unknown:
            names = {*cls.model_fields, "time", "mem", "project", "queue", "signal_delay"} - {
                "time_s",
                "mem_mb",
                "signal_delay_s",
            }
            raise UsageError(
                f"Unknown resource keyword(s): {', '.join(unknown)}. Resources are: "
                f"{', '.join(sorted(names))}. "
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

    @field_validator("signal_delay_s", mode="before")
    @classmethod
    def _signal_delay(cls, v: Any) -> int | None:
        return None if v is None else parse_signal_delay(v)

    @field_validator("mem_mb", mode="before")
    @classmethod
    def _mem(cls, v: Any) -> int | None:
        return None if v is None else parse_mem_mb(v)

    @field_validator("after_ok", mode="before")
    @classmethod
    def _after_ok(cls, v: Any) -> tuple[str, ...]:
        items = (v,) if isinstance(v, str) or hasattr(v, "job_id") else tuple(v)
        ids = []
        for item in items:
            job_id = str(getattr(item, "job_id", item)).strip()
            if not _DEPENDENCY_ID.fullmatch(job_id):
                raise ValueError(
                    f"{job_id!r} is not a job id to wait for (e.g. 1234, 1234_5, 1234.pbs01)"
                )
            ids.append(job_id)
        return tuple(ids)

    @field_validator("modules", mode="before")
    @classmethod
    def _modules(cls, v: Any) -> tuple[str, ...]:
        items = tuple(v.split()) if isinstance(v, str) else tuple(v)
        for item in items:
            if not isinstance(item, str) or not _MODULE_NAME.fullmatch(item):
                raise ValueError(
                    f"{item!r} is not a module name (letters, digits and ._+/- only, e.g. "
                    "cuda/12.4)"
                )
        return items

    @field_validator("container")
    @classmethod
    def _container(cls, v: str | None) -> str | None:
        if v is not None and not IMAGE.fullmatch(v):
            raise ValueError(
                f"{v!r} is not an image: a path, an enroot container name or a registry "
                "reference (letters, digits and ._/:#@+~=- only, no spaces or quotes)"
            )
        return v

    @field_validator("binds", mode="before")
    @classmethod
    def _binds(cls, v: Any) -> tuple[str, ...]:
        items = tuple(v.split()) if isinstance(v, str) else tuple(v)
        return tuple(parse_bind(str(b)) for b in items)

    @field_validator("container_env", mode="before")
    @classmethod
    def _container_env(cls, v: Any) -> dict[str, str]:
        if isinstance(v, str):
            v = v.split()
        pairs = v.items() if isinstance(v, dict) else (str(x).partition("=")[::2] for x in v)
        env = {}
        for name, value in pairs:
            if not ENV_NAME.fullmatch(name) or "\n" in str(value):
                raise ValueError(
                    f"container_env {name!r}: NAME=VALUE with a shell variable name and a "
                    "one-line value"
                )
            env[name] = str(value)
        return env

    @field_validator("extra", mode="before")
    @classmethod
    def _extra(cls, v: Any) -> tuple[str, ...]:
        items = (v,) if isinstance(v, str) else tuple(v)
        for item in items:
            if (
                not isinstance(item, str)
                or not _DIRECTIVE.fullmatch(item)
                or _DIRECTIVE_BAD.search(item)
            ):
                raise ValueError(
                    f"{item!r} cannot be a batch directive: one option per item, no spaces, "
                    "quotes, '#' or control characters (e.g. '--begin=now+60')"
                )
        return items

    @field_validator("name", "partition", "qos", "account")
    @classmethod
    def _word(cls, v: str | None) -> str | None:
        """These land in `#SBATCH --job-name=...` / `#PBS -N ...` lines: sbatch splits a
        directive at whitespace and stops at '#', so anything else would change the job."""
        if v is not None and not _WORD.fullmatch(v):
            raise ValueError(
                f"{v!r} cannot go into a batch directive: use letters, digits and . _ - + : @ "
                ", / % = (no spaces, quotes or '#'), at most 200 characters"
            )
        return v

    @field_validator("constraint")
    @classmethod
    def _constraint(cls, v: str | None) -> str | None:
        if v is not None and not _CONSTRAINT.fullmatch(v):
            raise ValueError(
                f"constraint {v!r}: Slurm's feature expression takes names with & | , * [ ] "
                "( ) ! and no spaces, quotes or '#'"
            )
        return v

    def merged(self, defaults: dict[str, Any]) -> Resources:
        """Fill fields the user left unset from cluster defaults (e.g. account)."""
        if not defaults:
            return self
        base = Resources.from_kwargs(**defaults).model_dump(exclude_unset=True)
        return Resources(**{**base, **self.model_dump(exclude_unset=True)})


#: a memory request below this is almost surely a unit slip (`mem="10m"` for 10 GB)
TINY_MEM_MB = 100


class Advice(Model):
    """A warning about a valid request: what it costs and what to ask for instead."""

    model_config = ConfigDict(frozen=True)

    code: str
    message: str
    #: resource keywords of a better request (e.g. {"cpus_per_task": 7, "mem": "60G"})
    suggestion: dict[str, Any] = Field(default_factory=dict)


class Allocation(Model):
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
    after_ok: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    container: str | None = None
    #: the runtime that starts `container`: the request's, else the profile's
    container_runtime: str | None = None
    binds: tuple[str, ...] = ()
    container_env: dict[str, str] = Field(default_factory=dict)
    gpu_type: str | None
    profile: str = ""
    scheduler: str = "slurm"
    launcher: Literal["submitit", "torchrun"] = "submitit"
    max_restarts: int = 0
    #: USR2 this long before the time limit (request, else profile; 90 s by default)
    signal_delay_s: int = 90
    array_parallelism: int | None = None
    #: the execution queue a PBS routing queue will pick (ASPIRE 2A+: aiq1/aiq2)
    routed_to: str | None = None
    #: exported in the batch script: the profile's env (NCCL/RCCL) and HPCUI_* hints
    env: dict[str, str] = Field(default_factory=dict)
    #: billed units per hour of run time, where the profile knows the partition's rule
    billed_per_hour: float | None = None
    billing_unit: str | None = None
    advice: tuple[Advice, ...] = ()

    @property
    def num_tasks(self) -> int:
        """Processes that each leave a result (ranks): torchrun starts one per GPU per task."""
        per_task = max(self.gpus_per_node, 1) if self.launcher == "torchrun" else 1
        return self.nodes * self.tasks_per_node * per_task

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


# -- partitions -----------------------------------------------------------------------------


def _limits_problem(
    p: Partition, profile: Profile, gpus: int, nodes: int, time_s: int | None
) -> str | None:
    """Why partition `p` refuses the request (None: it takes it)."""
    if gpus and not p.gpu and any(q.gpu for q in profile.partitions.values()):
        return "has no GPUs"
    if p.max_gpus is not None and gpus > p.max_gpus:
        return f"takes at most {p.max_gpus} GPUs"
    if p.min_gpus is not None and gpus < p.min_gpus:
        return f"takes {p.min_gpus} or more GPUs"
    if p.max_nodes is not None and nodes > p.max_nodes:
        return f"takes at most {p.max_nodes} nodes"
    if p.max_time is not None and time_s is not None and time_s > p.max_time:
        return f"allows at most {short_duration(p.max_time)}"
    return None


def _admits(
    p: Partition, profile: Profile, gpus: int, nodes: int, time_s: int | None
) -> tuple[str | None, str | None]:
    """(problem, routed_to): a routing queue takes a job when one of its targets does."""
    problem = _limits_problem(p, profile, gpus, nodes, time_s)
    if problem or not p.routes_to:
        return problem, None
    reasons = []
    for name in p.routes_to:
        target = profile.partitions[name]
        if target.interactive:
            continue
        why = _limits_problem(target, profile, gpus, nodes, time_s)
        if why is None:
            return None, name
        reasons.append(f"{name} {why}")
    return "routes to no queue that takes it (" + "; ".join(reasons) + ")", None


def _describe(gpus: int, nodes: int, time_s: int | None) -> str:
    parts = [f"gpus={gpus}", f"nodes={nodes}"]
    if time_s:
        parts.append(f"time={short_duration(time_s)}")
    return ", ".join(parts)


def _pick_partition(
    req: Resources, profile: Profile, gpus: int, nodes: int
) -> tuple[Partition | None, str | None]:
    """The named partition if it takes the request, else the first automatic one that does."""
    parts = profile.partitions
    if req.partition:
        part = parts.get(req.partition)
        if part is None:
            if not parts:
                return None, None  # the profile knows no partitions: pass it through
            raise UsageError(
                f"Partition {req.partition!r} is not in profile {profile.name!r} "
                f"(known: {', '.join(parts)}). Pick one of those, or add it with "
                f"[clusters.NAME.profile_overrides.partitions.{req.partition}]."
            )
        problem, routed = _admits(part, profile, gpus, nodes, req.time_s)
        if problem:
            others = [
                p.name
                for p in parts.values()
                if p is not part and _admits(p, profile, gpus, nodes, req.time_s)[0] is None
            ]
            fix = (
                f"use partition {others[0]!r}"
                if others
                else "ask for less (fewer GPUs/nodes or less time)"
            )
            raise UsageError(
                f"Partition {part.name!r} on {profile.name} {problem}; the request has "
                f"{_describe(gpus, nodes, req.time_s)}. Fix: {fix}."
            )
        return part, routed
    candidates = [p for p in parts.values() if p.auto]
    if not candidates:
        return None, None
    if not gpus:  # CPU jobs prefer CPU partitions; a GPU-only machine still runs them
        candidates.sort(key=lambda p: p.gpu)
    reasons = []
    for p in candidates:
        problem, routed = _admits(p, profile, gpus, nodes, req.time_s)
        if problem is None:
            return p, routed
        reasons.append(f"{p.name!r} {problem}")
    raise UsageError(
        f"No partition of {profile.name} takes {_describe(gpus, nodes, req.time_s)}: "
        f"{'; '.join(reasons)}. Ask for less, or name a partition explicitly."
    )


def _check_qos(req: Resources, profile: Profile, gpus: int, nodes: int) -> None:
    if not req.qos:
        if profile.requires_qos:
            known = ", ".join(profile.qos) or "your project's QoS"
            raise UsageError(
                f"{profile.name} needs a QoS (it decides the partition): pass qos='...' "
                f"(known: {known}) or set defaults.qos in the cluster config."
            )
        return
    if profile.qos_prefix and not req.qos.startswith(profile.qos_prefix):
        known = ", ".join(profile.qos) or f"{profile.qos_prefix}..."
        raise UsageError(
            f"QoS {req.qos!r} is not for {profile.name}: its QoS names start with "
            f"{profile.qos_prefix!r} (known: {known}). Use one of those, or the profile "
            "of the machine that QoS belongs to."
        )
    q = profile.qos.get(req.qos)
    if q is None:
        return  # project-specific QoS: the scheduler judges it
    for limit, value, what in (
        (q.max_time, req.time_s, "time"),
        (q.max_nodes, nodes, "nodes"),
        (q.max_gpus, gpus, "gpus"),
    ):
        if limit is not None and value is not None and value > limit:
            shown = short_duration if what == "time" else str
            others = [
                o.name
                for o in profile.qos.values()
                if o is not q
                and (o.max_time is None or req.time_s is None or req.time_s <= o.max_time)
                and (o.max_nodes is None or nodes <= o.max_nodes)
                and (o.max_gpus is None or gpus <= o.max_gpus)
            ]
            fix = (
                f", or a QoS your project has that allows it ({', '.join(others)})"
                if others
                else ""
            )
            raise UsageError(
                f"{what}={shown(value)} exceeds the {shown(limit)} limit of QoS {q.name!r} on "
                f"{profile.name}. Ask for less{fix}."
            )


# -- billing --------------------------------------------------------------------------------


def _billed(b: Billing, nodes: int, cores: int, mem_mb: int | None, gpus: int) -> float:
    """Units per hour: `b.factor * max(...)` per node for slices, `per_node` for whole nodes."""
    if b.per_node is not None:
        return b.per_node * nodes
    terms = []
    if b.cores_per_unit:
        terms.append(math.ceil(cores / b.cores_per_unit))
    if b.mem_per_unit and mem_mb:
        terms.append(math.ceil(mem_mb / b.mem_per_unit))
    if b.gpus_per_unit:
        terms.append(math.ceil(gpus / b.gpus_per_unit))
    return b.factor * max(terms, default=0) * nodes


def _billing_advice(
    profile: Profile, part: Partition, alloc: dict[str, Any], billed: float
) -> list[Advice]:
    """Advice when the same GPUs could be had for less (LUMI: cores/memory beyond the share)."""
    b = part.billing
    gpn, nodes = alloc["gpus_per_node"], alloc["nodes"]
    if b is None or not gpn:
        return []
    unit = b.unit
    if b.per_node is not None:
        if profile.gpus_per_node and gpn < profile.gpus_per_node:
            cheaper = [
                p
                for p in profile.partitions.values()
                if p is not part and p.auto and p.billing and p.billing.per_node is None
            ]
            alt = (
                f" Use partition {cheaper[0].name!r}, which bills by resources," if cheaper else ""
            )
            return [
                Advice(
                    code="billed-whole-nodes",
                    message=(
                        f"Partition {part.name!r} bills whole nodes: {billed:g} {unit} per hour "
                        f"for {nodes} node(s), but the job uses {gpn} of "
                        f"{profile.gpus_per_node} GPUs per node.{alt} or ask for "
                        f"gpus={profile.gpus_per_node * nodes} to use what you pay for."
                    ),
                    suggestion={"partition": cheaper[0].name} if cheaper else {},
                )
            ]
        return []
    share_cores = (profile.gpu_cores or 0) * gpn
    share_mem = (profile.mem_per_gpu or 0) * gpn or None
    fair = _billed(b, nodes, share_cores, share_mem, gpn)
    if billed <= fair:
        return []
    suggestion: dict[str, Any] = {}
    used_cores = alloc["tasks_per_node"] * alloc["cpus_per_task"]
    if share_cores and used_cores > share_cores:
        suggestion["cpus_per_task"] = max(share_cores // alloc["tasks_per_node"], 1)
    if share_mem and alloc["mem_mb"] and alloc["mem_mb"] > share_mem:
        suggestion["mem"] = format_mem(share_mem)
    asked = f"{gpn} GPU(s) with {used_cores} cores" + (
        f" and {format_mem(alloc['mem_mb'])}" if alloc["mem_mb"] else ""
    )
    as_gpus = math.ceil(billed / (b.factor * nodes) * (b.gpus_per_unit or 1))
    better = ", ".join(f"{k}={v!r}" for k, v in suggestion.items())
    fixes = [f"ask for {better} (billed {fair:g})"] if better else []
    if profile.gpus_per_node and as_gpus <= profile.gpus_per_node:
        fixes.append(f"ask for gpus={as_gpus * nodes} to use what you pay for")
    return [
        Advice(
            code="billed-beyond-use",
            message=(
                f"Partition {part.name!r} bills this job {billed:g} {unit} per hour, as much as "
                f"{as_gpus} GPU(s) per node, for {asked} per node. "
                + (("Fix: " + ", or ".join(fixes) + ".") if fixes else "")
            ).strip(),
            suggestion=suggestion,
        )
    ]


# -- resolve --------------------------------------------------------------------------------


def _most_gpus(profile: Profile) -> tuple[int, str] | None:
    """The most GPUs one job can get where the profile says (a GPU partition's max_gpus,
    or its max_nodes x GPUs per node), and which partition; None when it does not say."""
    best: tuple[int, str] | None = None
    gpn = profile.gpus_per_node or 0
    for part in profile.partitions.values():
        if not part.gpu:
            continue
        if part.max_gpus is not None:
            most, why = part.max_gpus, f"partition {part.name}'s limit"
        elif part.max_nodes is not None and gpn:
            most = part.max_nodes * gpn
            why = f"{part.max_nodes} nodes of {gpn} GPUs in partition {part.name}"
        else:
            return None  # a partition without a known limit: no maximum to say
        if best is None or most > best[0]:
            best = (most, why)
    return best


def _nodes_and_gpus(req: Resources, profile: Profile) -> tuple[int, int]:
    """Nodes and GPUs per node: N GPUs on G-GPU nodes -> ceil(N/G) whole nodes."""
    gpn, gpus = profile.gpus_per_node, req.gpus
    if gpus and gpn == 0 and profile.scheduler == "local":
        why = next((n[len("no GPU: ") :] for n in profile.notes if n.startswith("no GPU: ")), "")
        raise UsageError(
            f"This machine has no GPU hpcui can use{f' ({why})' if why else ''}. Drop "
            f"gpus={gpus}; to run {gpus} rank(s) on CPU (gloo) instead, ask for "
            f"tasks_per_node={gpus}."
        )
    if gpus and gpn == 0:
        raise UsageError(
            f"Profile {profile.name!r} has no GPUs; drop gpus={gpus} or pick a GPU cluster."
        )
    if not gpus or gpn is None:  # no GPUs, or a site whose node shape hpcui does not know
        nodes = req.nodes or 1
        if gpus % nodes:
            raise UsageError(f"gpus={gpus} cannot be split evenly over nodes={nodes}.")
        return nodes, gpus // nodes
    cap = _most_gpus(profile)
    if cap is not None and gpus > cap[0]:
        most, where = cap
        raise UsageError(
            f"gpus={gpus} is more than {profile.name} gives one job: at most {most} ({where}). "
            f"Ask for {most} or fewer."
        )
    if gpus > gpn and gpus % gpn:
        lo, hi = (gpus // gpn) * gpn, math.ceil(gpus / gpn) * gpn
        raise UsageError(
            f"gpus={gpus} spans nodes of {gpn} GPUs on {profile.name}: multi-node jobs use whole "
            f"nodes. Ask for {lo} or {hi} GPUs."
        )
    nodes = req.nodes or math.ceil(gpus / gpn)
    if gpus % nodes:
        raise UsageError(f"gpus={gpus} cannot be split evenly over nodes={nodes}.")
    per_node = gpus // nodes
    if per_node > gpn:
        raise UsageError(
            f"gpus={gpus} over nodes={nodes} needs {per_node} GPUs per node; "
            f"{profile.name} nodes have {gpn}. Use nodes={math.ceil(gpus / gpn)}."
        )
    return nodes, per_node


def resolve(req: Resources, profile: Profile, *, default_name: str = "hpcui") -> Allocation:
    """Apply the profile's rules; a request the site cannot run fails here, before any network."""
    nodes, gpn = _nodes_and_gpus(req, profile)
    gpus = nodes * gpn
    if profile.scheduler == "local" and nodes > 1:
        have = f"{profile.gpus_per_node} GPU(s)" if profile.gpus_per_node else "no GPU"
        raise UsageError(
            f"The local cluster is this one machine ({have}); this request needs {nodes} "
            f"nodes. Ask for at most {profile.gpus_per_node or 0} GPUs and nodes=1 — several "
            "ranks may share a GPU with tasks_per_node=N."
        )
    part, routed = _pick_partition(req, profile, gpus, nodes)
    _check_qos(req, profile, gpus, nodes)
    if profile.requires_account and not req.account:
        flag = "-P <project>" if profile.scheduler == "pbs" else "--account"
        raise UsageError(
            f"{profile.name} requires an account/project ({flag}): pass account='...' or set "
            "defaults.account in the cluster config."
        )

    if req.launcher == "torchrun":  # one torchrun per node starts the GPU workers itself
        tasks = req.tasks_per_node or 1
    else:
        tasks = req.tasks_per_node or max(gpn, 1)
    cpus = req.cpus_per_task
    if cpus is None:
        share = (profile.gpu_cores or 0) * gpn
        cpus = max(share // tasks, 1) if share else 1
    mem = req.mem_mb
    if mem is None and gpn and profile.mem_per_gpu:
        mem = profile.mem_per_gpu * gpn

    advice: list[Advice] = []
    if req.mem_mb is not None and req.mem_mb < TINY_MEM_MB:
        advice.append(
            Advice(
                code="tiny-mem",
                message=(
                    f"mem={format_mem(req.mem_mb)} per node is below 100 MB: Python alone "
                    "needs more, and the job may be killed at start. `m`/`M` mean megabytes "
                    "(as Slurm reads them): for gigabytes write mem='10G'."
                ),
                suggestion={"mem": f"{max(1, req.mem_mb)}G"},
            )
        )
    oversubscribed = profile.cores_per_node and tasks * cpus > profile.cores_per_node
    if oversubscribed and profile.scheduler == "local":  # a workstation: allowed, said
        advice.append(
            Advice(
                code="oversubscribed",
                message=(
                    f"{tasks} tasks x {cpus} cpus = {tasks * cpus} CPUs on this machine's "
                    f"{profile.cores_per_node} cores: the ranks share cores (fine for trying "
                    "DDP/FSDP out, slower than it would be)."
                ),
            )
        )
    elif (
        profile.cores_per_node and tasks * cpus > profile.cores_per_node * profile.threads_per_core
    ):
        limit = profile.cores_per_node * profile.threads_per_core
        raise UsageError(
            f"{tasks} tasks x {cpus} cpus = {tasks * cpus} CPUs per node, but {profile.name} "
            f"nodes have {limit}. Lower cpus_per_task or tasks_per_node."
        )
    if profile.mem_per_node and mem and mem > profile.mem_per_node:
        raise UsageError(
            f"mem={format_mem(mem)} per node exceeds {profile.name}'s {format_mem(profile.mem_per_node)} "
            "per node. Ask for less memory (mem is per node) or more nodes."
        )

    env = dict(profile.env)
    if profile.interconnect_suffix:
        env["HPCUI_INTERCONNECT_SUFFIX"] = profile.interconnect_suffix
    fields: dict[str, Any] = dict(
        nodes=nodes,
        tasks_per_node=tasks,
        cpus_per_task=cpus,
        gpus_per_node=gpn,
        mem_mb=mem,
    )
    billed = unit = None
    if part is not None and part.billing is not None:
        billed = _billed(part.billing, nodes, tasks * cpus, mem, gpn)
        unit = part.billing.unit
        advice += _billing_advice(profile, part, fields, billed)
    elif part is not None and part.whole_nodes and profile.gpus_per_node and gpn:
        if gpn < profile.gpus_per_node:
            advice.append(
                Advice(
                    code="whole-nodes",
                    message=(
                        f"Partition {part.name!r} allocates whole nodes: the job holds all "
                        f"{profile.gpus_per_node} GPUs of each node but uses {gpn}. Ask for "
                        f"gpus={profile.gpus_per_node * nodes} to use them."
                    ),
                    suggestion={"gpus": profile.gpus_per_node * nodes},
                )
            )
    return Allocation(
        **fields,
        time_s=req.time_s,
        partition=part.name if part is not None else req.partition,
        qos=req.qos,
        account=req.account,
        constraint=req.constraint,
        exclusive=req.exclusive,
        name=req.name or default_name,
        extra=(*profile.extra_directives, *req.extra),
        after_ok=req.after_ok,
        modules=(*_container_modules(req, profile), *req.modules),
        container=req.container,
        container_runtime=_container_runtime(req, profile),
        binds=req.binds,
        container_env=dict(req.container_env),
        gpu_directive=profile.gpu_directive,
        gpu_type=profile.gpu_type,
        profile=profile.name,
        scheduler=profile.scheduler,
        launcher=req.launcher,
        max_restarts=req.max_restarts,
        signal_delay_s=_signal_delay(req, profile),
        array_parallelism=req.array_parallelism,
        routed_to=routed,
        env=env,
        billed_per_hour=billed,
        billing_unit=unit,
        advice=tuple(advice),
    )


def _container_modules(req: Resources, profile: Profile) -> tuple[str, ...]:
    """The site's runtime module(s), loaded by a job that runs in a container."""
    if req.container is None or profile.container is None:
        return ()
    return tuple(m for m in profile.container.modules if m not in req.modules)


def _container_runtime(req: Resources, profile: Profile) -> str | None:
    """The runtime that starts the request's image; a request the site cannot start fails
    here, before any network."""
    if req.container is None:
        if req.container_runtime or req.binds or req.container_env:
            raise UsageError(
                "container_runtime, binds and container_env apply to a container: name the "
                "image with container=... (CLI: --container IMAGE)"
            )
        return None
    if profile.scheduler == "local":
        raise UsageError(
            "The local cluster runs Python on this machine, not in a container image: drop "
            "container=..., or submit to a cluster whose profile names a container runtime."
        )
    runtime = req.container_runtime or (profile.container.runtime if profile.container else None)
    if runtime is None:
        raise UsageError(
            f"Profile {profile.name!r} names no container runtime: pass container_runtime="
            "apptainer, singularity, enroot or pyxis (CLI: --container-runtime), or set "
            "[container] runtime = ... in the profile (docs/containers.md)."
        )
    if runtime == "pyxis" and profile.scheduler != "slurm":
        raise UsageError(
            f"pyxis is a Slurm plugin (srun --container-image); {profile.name} runs "
            f"{profile.scheduler}: use container_runtime='enroot' or 'apptainer' there."
        )
    problem = check_image(req.container, runtime)
    if problem:
        raise UsageError(problem + ".")
    return runtime


def _signal_delay(req: Resources, profile: Profile) -> int:
    """The request's, else the profile's, but never more than a quarter of a short time
    limit (a 2-minute job told "the limit is near" 90 s early would stop at 30 s; Slurm
    may send it a minute earlier still)."""
    if req.signal_delay_s is not None:
        return req.signal_delay_s
    if req.time_s:
        return max(1, min(profile.signal_delay_s, req.time_s // 4))
    return profile.signal_delay_s


def batch_spec(
    alloc: Allocation,
    *,
    folder: str,
    token: str,
    array_size: int | None = None,
    python: str = "python3",
    setup: Sequence[str] = (),
    pythonpath: Sequence[str] = (),
    verified: Sequence[tuple[str, str]] = (),
    container: ContainerLaunch | None = None,
) -> BatchSpec:
    """The renderer's view of an allocation: the one mapping used by submit and previews.

    Every field BatchSpec shares with Allocation is copied by name, so a new resource is
    declared in Resources/Allocation/BatchSpec and needs no line here.
    """
    shared = {f.name for f in dataclasses.fields(BatchSpec)} & set(Allocation.model_fields)
    copied = {name: getattr(alloc, name) for name in shared}
    copied["env"] = dict(alloc.env)
    return BatchSpec(
        **copied,
        folder=folder,
        token=token,
        array_size=array_size,
        python=python,
        # the job's own modules load after the cluster's setup (which may make them visible)
        setup=(*setup, *((f"module load {' '.join(alloc.modules)}",) if alloc.modules else ())),
        pythonpath=tuple(pythonpath),
        verified=tuple(verified),
        image=container,
    )


def explain(alloc: Allocation) -> str:
    """A short human summary of an allocation, for the CLI and TUI (advice on its own lines)."""
    shape = f"{alloc.nodes} node(s) x {alloc.tasks_per_node} task(s) x {alloc.cpus_per_task} cpu(s)"
    parts = [shape]
    if alloc.gpus_per_node:
        parts.append(f"{alloc.gpus} GPU(s) ({alloc.gpus_per_node} per node)")
    if alloc.mem_mb:
        parts.append(f"{format_mem(alloc.mem_mb)} per node")
    if alloc.time_s:
        parts.append(short_duration(alloc.time_s))
    where = []
    if alloc.partition:
        where.append(f"partition {alloc.partition}")
        if alloc.routed_to:
            where[-1] += f" -> {alloc.routed_to}"
    if alloc.qos:
        where.append(f"qos {alloc.qos}")
    if alloc.account:
        where.append(f"account {alloc.account}")
    line = ", ".join(parts)
    if where:
        line += " on " + ", ".join(where)
    if alloc.launcher == "torchrun":
        line += " (torchrun: one launcher per node)"
    if alloc.container:
        line += f" in {alloc.container_runtime} image {alloc.container}"
    lines = [line]
    if alloc.billed_per_hour is not None:
        lines.append(f"billed {alloc.billed_per_hour:g} {alloc.billing_unit} per hour")
        if alloc.time_s:
            total = alloc.billed_per_hour * alloc.time_s / 3600
            lines[-1] += f" (at most {total:g} for the time limit)"
    lines += [f"advice: {a.message}" for a in alloc.advice]
    return "\n".join(lines)
