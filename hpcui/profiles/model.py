"""The shape of a site profile (node shape, GPU directive, partitions, QoS, billing).

Only the *shape* of a rule lives here; a site's numbers live in the package's TOML files.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from hpcui.backends.containers import parse_bind
from hpcui.backends.model import Model
from hpcui.common.units import parse_mem_mb, parse_signal_delay, parse_time
from hpcui.errors import ConfigError

#: PBS sites let you ssh onto the nodes of your running job; BatchMode: never a prompt
DEFAULT_NODE_SHELL = "ssh -o BatchMode=yes -o ConnectTimeout=10"


def _time(v: Any) -> int | None:
    return None if v is None else parse_time(v)


def _mem(v: Any) -> int | None:
    return None if v is None else parse_mem_mb(v)


class Billing(Model):
    """What one hour of a job costs on a partition, in `unit` (LUMI: GPU-hours).

    Slice billing: `factor * max(ceil(cores/cores_per_unit), ceil(mem/mem_per_unit),
    gpus/gpus_per_unit)` per node (unset terms are skipped). Whole-node billing:
    `per_node` units per node-hour, whatever the job uses.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    unit: str = "GPU-hours"
    factor: float = 1.0
    cores_per_unit: int | None = None
    #: memory per billing unit, in MB (TOML accepts "64G")
    mem_per_unit: int | None = None
    gpus_per_unit: int | None = None
    per_node: float | None = None

    @field_validator("mem_per_unit", mode="before")
    @classmethod
    def _mem_value(cls, v: Any) -> int | None:
        return _mem(v)


class Partition(Model):
    """A Slurm partition or PBS queue with the limits hpcui checks before submitting."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""
    description: str = ""
    gpu: bool = False
    #: hpcui may pick it on its own (False for debug/test/interactive or execution queues)
    auto: bool = True
    #: only for interactive sessions: never a target for a batch job's routing
    interactive: bool = False
    #: time limit in seconds (TOML accepts "72h", "3-00:00:00")
    max_time: int | None = None
    max_nodes: int | None = None
    min_gpus: int | None = None
    max_gpus: int | None = None
    #: the site allocates (and charges) whole nodes here
    whole_nodes: bool = False
    #: a PBS routing queue: the server moves the job to the first of these that takes it
    routes_to: list[str] = Field(default_factory=list)
    billing: Billing | None = None

    @field_validator("max_time", mode="before")
    @classmethod
    def _time_value(cls, v: Any) -> int | None:
        return _time(v)


class Qos(Model):
    """A Slurm QoS with its limits (on MareNostrum 5 the QoS decides the partition)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""
    description: str = ""
    max_time: int | None = None
    max_nodes: int | None = None
    max_gpus: int | None = None

    @field_validator("max_time", mode="before")
    @classmethod
    def _time_value(cls, v: Any) -> int | None:
        return _time(v)


class ContainerSite(Model):
    """How the site runs container images (docs/containers.md): the runtime its
    documentation uses and the flags that documentation writes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    runtime: Literal["apptainer", "singularity", "enroot", "pyxis"]
    #: apptainer/singularity GPU flags (`--nv`; LUMI's AMD GPUs: `--rocm`)
    gpu_flags: list[str] = Field(default_factory=list)
    #: bound into every container besides the job base (scratch, project folders)
    binds: list[str] = Field(default_factory=list)
    #: the images' interpreter
    python: str = "python3"
    #: a shell line run inside before Python (LUMI's images: `$WITH_CONDA`)
    init: str | None = None
    #: modules that put the runtime on PATH (MN5: `singularity`), loaded by a job in a
    #: container and before the image is prepared
    modules: list[str] = Field(default_factory=list)

    @field_validator("gpu_flags")
    @classmethod
    def _flags(cls, v: list[str]) -> list[str]:
        bad = [f for f in v if not re.fullmatch(r"--?[a-z][a-z-]*", f)]
        if bad:
            raise ValueError(f"gpu_flags are plain flags such as --nv or --rocm, got {bad}")
        return v

    @field_validator("binds")
    @classmethod
    def _binds(cls, v: list[str]) -> list[str]:
        return [parse_bind(b) for b in v]

    @field_validator("init")
    @classmethod
    def _init(cls, v: str | None) -> str | None:
        if v is not None and (not v.strip() or any(not c.isprintable() for c in v)):
            raise ValueError("init must be one printable shell line, e.g. '$WITH_CONDA'")
        return v


class Profile(Model):
    """What hpcui knows about one machine; every value can be overridden per cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    #: the compute side is gone (kept because course material uses the machine)
    retired: bool = False
    successor: str | None = None
    scheduler: Literal["slurm", "pbs", "local"] = "slurm"
    #: which PBS the site runs, when known: then nothing probes `qstat --version` (and
    #: `hpcui script` renders offline); None: probed once on the first connection
    pbs_dialect: Literal["pbspro", "torque", "slurm-torque-wrapper"] | None = None
    login_hosts: list[str] = Field(default_factory=list)
    #: tasks one job array may have (Slurm MaxArraySize, PBS max_array_size); None: asked
    #: of the scheduler the first time a map sends more than 100 tasks
    max_array_size: int | None = Field(None, ge=0)
    #: data-transfer nodes: fast copies, but they cannot submit jobs
    transfer_hosts: list[str] = Field(default_factory=list)

    # node shape; None = unknown (nothing is assumed, nothing is checked)
    gpus_per_node: int | None = None
    gpu_model: str | None = None
    cores_per_node: int | None = None
    #: hardware threads Slurm counts per core (limit for cpus-per-task x tasks)
    threads_per_core: int = 1
    #: memory per node in MB (TOML accepts "512G")
    mem_per_node: int | None = None

    #: how GPUs are asked for: `gres` -> --gres=gpu[:type]:N, `gpus-per-node`, PBS `ngpus`
    gpu_directive: Literal["gres", "gpus-per-node", "ngpus"] = "gres"
    #: typed gres (`gpu:v100:N`); None: untyped `gpu:N`
    gpu_type: str | None = None
    #: per-GPU share of a node; cores default to cores_per_node / gpus_per_node
    cpus_per_gpu: int | None = None
    #: MB per GPU (TOML accepts "80G"); None: ask for no memory, the site gives it with cores
    mem_per_gpu: int | None = None

    partitions: dict[str, Partition] = Field(default_factory=dict)
    qos: dict[str, Qos] = Field(default_factory=dict)
    #: every QoS of this machine starts so (MN5: `acc_` on ACC, `gp_` on GPP)
    qos_prefix: str | None = None
    requires_qos: bool = False
    requires_account: bool = False

    #: appended to the first node's hostname for MASTER_ADDR (JSC: `i` = InfiniBand)
    interconnect_suffix: str = ""
    #: the index env= builds install from on the login node ("" : the installer's default,
    #: PyPI); a site mirror where the login node has no internet of its own
    env_index_url: str = ""
    #: the proxy the login node reaches the index through ("": none)
    env_proxy: str = ""
    #: the login node reaches no index at all: env= wheels are resolved and downloaded on
    #: this machine, uploaded, and installed there with no index
    env_offline: bool = False
    #: "zip": an environment without compiled extensions becomes one zip on sys.path (one
    #: file instead of thousands, for inode quotas); "": a plain folder
    env_pack: Literal["", "zip"] = ""
    #: the site's torchrun (JSC: `torchrun_jsc`)
    torchrun: str = "torchrun"
    #: the module that provides a training framework where the site's guide says so
    #: (CSC: `module load pytorch` carries lightning, accelerate, transformers, deepspeed)
    framework_modules: dict[str, str] = Field(default_factory=dict)
    #: exported in every batch script (LUMI: NCCL/RCCL over Slingshot)
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        """Each key becomes `export KEY=...` in the batch script: a shell name, nothing else."""
        bad = [k for k in env if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)]
        if bad:
            raise ValueError(f"env names must be shell variable names, got {bad}")
        return env

    #: seconds before the time limit the scheduler signals the job (USR2): the job's
    #: hpcui.distributed.stop_requested() turns true and a Checkpointable checkpoints; the
    #: job runs on to the limit (Slurm may signal up to 60 s earlier than asked)
    signal_delay_s: int = 90

    @field_validator("signal_delay_s", mode="before")
    @classmethod
    def _signal_delay(cls, v: Any) -> int:
        return parse_signal_delay(v)

    #: directives added to every Slurm script (MN5: --hint=nomultithread)
    extra_directives: list[str] = Field(default_factory=list)

    #: the Python jobs run with where the cluster config sets no `python` (None: "python3")
    python: str | None = None
    #: shell lines run before Python where the cluster config sets no `setup`
    setup: list[str] = Field(default_factory=list)

    #: how a command reaches a node of your running job from the login node (PBS usage
    #: looks): `<node_shell> HOST sh`, the commands on its stdin
    node_shell: str = DEFAULT_NODE_SHELL

    @field_validator("node_shell")
    @classmethod
    def _one_line(cls, v: str) -> str:
        if not v.strip() or any(not c.isprintable() for c in v):
            raise ValueError("node_shell must be one printable line, e.g. 'ssh -o BatchMode=yes'")
        return v

    #: the site's quota tool (a key of backends.quota.QUOTA_COMMANDS); None: try them in order
    quota_command: str | None = None
    #: the site's allocation tool (a key of backends.allocations.ALLOCATION_COMMANDS)
    allocation_command: str | None = None
    module_system: Literal["lmod", "envmodules"] | None = None
    #: where `hpcui tensorboard` runs TensorBoard: in a small job (login nodes are shared),
    #: or as the user's own process on the login node where the site allows light services
    tensorboard_on: Literal["job", "login"] = "job"
    #: how the site runs container images; None: hpcui knows of none (ask with
    #: container_runtime=...)
    container: ContainerSite | None = None
    notes: list[str] = Field(default_factory=list)
    #: dotted paths of values the site's documentation does not confirm ([?]): correct them
    #: with profile_overrides
    unconfirmed: list[str] = Field(default_factory=list)

    @field_validator("mem_per_node", "mem_per_gpu", mode="before")
    @classmethod
    def _mem_value(cls, v: Any) -> int | None:
        return _mem(v)

    @model_validator(mode="before")
    @classmethod
    def _names(cls, data: Any) -> Any:
        """Table keys are the names: `[partitions.gpu]` is partition `gpu`."""
        if isinstance(data, dict):
            data = dict(data)
            for table in ("partitions", "qos"):
                if isinstance(data.get(table), dict):
                    data[table] = {
                        k: {**v, "name": k} if isinstance(v, dict) else v
                        for k, v in data[table].items()
                    }
        return data

    @model_validator(mode="after")
    def _routes(self) -> Profile:
        for p in self.partitions.values():
            unknown = [t for t in p.routes_to if t not in self.partitions]
            if unknown:
                raise ValueError(f"partition {p.name!r} routes to unknown {unknown}")
        return self

    def partition(self, name: str | None) -> Partition | None:
        return self.partitions.get(name) if name else None

    @property
    def gpu_cores(self) -> int | None:
        """Cores that go with one GPU: the site's rule, else an equal share of the node."""
        if self.cpus_per_gpu:
            return self.cpus_per_gpu
        if self.cores_per_node and self.gpus_per_node:
            return self.cores_per_node // self.gpus_per_node
        return None

    def with_overrides(self, overrides: dict[str, Any] | None) -> Profile:
        """This profile with a user's values deep-merged in (tables merge, lists replace)."""
        if not overrides:
            return self
        data = _deep_merge(self.model_dump(exclude_defaults=False), overrides)
        return _validate(data, f"profile_overrides for {self.name!r}")


def _validate(data: dict[str, Any], where: str) -> Profile:
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise ConfigError(f"{where}: {loc}: {first['msg']}. Fix that value.") from None


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out
