"""The launcher class and its config group entry (`hydra/launcher=hpcui`).

Thin: Hydra scans every module here at its start, so hpcui itself is imported only when a
multirun launches. Every field but `cluster`, `name`, `resources`, `resume_failed` and
`wait_s` is a keyword of `hpcui.submit` (null: the profile's default); `resources` takes
any other one (`+hydra.launcher.resources.constraint=a100`)."""

# no `from __future__ import annotations`: Hydra's scan runs this module before it is in
# sys.modules, where dataclasses look string annotations up
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


@dataclass
class HpcuiLauncherConf:
    _target_: str = "hydra_plugins.hpcui_launcher.hpcui_launcher.HpcuiLauncher"
    #: a cluster of hpcui's config (null: its default one)
    cluster: str | None = None
    #: the hpcui sweep's name (null: one per multirun, from its folder); the same name
    #: again submits only what has no result
    name: str | None = None
    #: run again what failed in an earlier multirun of the same name
    resume_failed: bool = True
    #: stop waiting after this many seconds (null: until every job ended)
    wait_s: float | None = None
    gpus: int | None = None
    nodes: int | None = None
    tasks_per_node: int | None = None
    cpus_per_task: int | None = None
    mem: str | None = None
    time: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    array_parallelism: int | None = None
    #: the cluster's Python for these jobs (a venv's, a module's; null: the cluster's own)
    python: str | None = None
    resources: dict[str, Any] = field(default_factory=dict)


ConfigStore.instance().store(
    group="hydra/launcher", name="hpcui", node=HpcuiLauncherConf, provider="hpcui"
)


class HpcuiLauncher(Launcher):
    def __init__(self, **params: Any) -> None:
        self.params = params
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        from hpcui.sweeps.hydra_launch import launch  # here: Hydra's plugin scan stays fast

        assert self.config is not None and self.hydra_context is not None
        assert self.task_function is not None
        return launch(
            self.params, hydra_context=self.hydra_context, task_function=self.task_function,
            config=self.config, job_overrides=job_overrides, initial_job_idx=initial_job_idx,
        )  # fmt: skip
