"""A request resolved against a profile (`Allocation`: every number the batch script
needs) and the advice that comes with a valid but costly one."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from hpcui.backends.batch import format_mem
from hpcui.backends.launch import Launcher, agent_per_node
from hpcui.backends.model import Model

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
    launcher: Launcher = "submitit"
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
        """Processes that each leave a result (ranks): a per-node agent (torchrun,
        accelerate) starts one per GPU, or one where the node has none."""
        per_node = agent_per_node(self.launcher, self.nodes)
        per_task = max(self.gpus_per_node, 1) if per_node else 1
        return self.nodes * self.tasks_per_node * per_task

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def mem_text(self) -> str | None:
        """The memory as the batch script spells it (4G, 1500M); None: no --mem."""
        return format_mem(self.mem_mb) if self.mem_mb else None
