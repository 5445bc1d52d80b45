"""One Hydra job of a multirun, on the compute node (`hydra/launcher=hpcui`).

The laptop composed the job's configuration (its config files are there, not here); this
runs it as Hydra's own launchers do - `run_job` with Hydra's global state as the laptop
had it - in `<job folder>/hydra/<element key>/`, where `.hydra/` and the job's log are
written, and the laptop copies that folder into its sweep folder afterwards
(hpcui/sweeps/hydra_launch.py). A task that raises fails this job, traceback kept, as any
call does: the sweep's table and `resume()` see it.

Needs hydra-core where the job runs (the job's environment, as for any import).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: the folder of a job's Hydra outputs, under its job folder: one per element
OUTPUTS = "hydra"


@dataclass
class HydraElement:
    """One element's composed configuration and its sweep key (its folder's name)."""

    key: str
    config: Any  # omegaconf.DictConfig


def output_dir(job_folder: str, key: str) -> str:
    """Where an element's Hydra outputs are, under the folder of the job that ran it."""
    return f"{job_folder.rstrip('/')}/{OUTPUTS}/{key}"


class HydraTask:
    """The user's task function with what Hydra's run_job needs around it. Wrapped as
    functools does, so the job's name and the registry's `function` are the task's."""

    def __init__(
        self,
        task_function: Callable[[Any], Any],
        hydra_context: Any,
        singleton_state: Any,
    ) -> None:
        functools.update_wrapper(self, task_function)
        self.task_function = task_function
        self.hydra_context = hydra_context
        self.singleton_state = singleton_state

    def __call__(self, element: HydraElement) -> Any:
        from hydra.core.singleton import Singleton  # hydra-core: only where Hydra jobs run
        from hydra.core.utils import JobStatus, run_job, setup_globals
        from omegaconf import open_dict, read_write

        Singleton.set_state(self.singleton_state)
        setup_globals()
        folder = os.environ.get("HPCUI_JOB_FOLDER") or os.environ.get("SUBMITIT_FOLDER")
        config = element.config
        with read_write(config.hydra), open_dict(config.hydra):
            config.hydra.sweep.dir = os.path.join(folder or os.getcwd(), OUTPUTS)
            config.hydra.sweep.subdir = element.key
            job_id = os.environ.get("HPCUI_JOB_ID") or os.environ.get("SLURM_JOB_ID")
            if job_id:
                config.hydra.job.id = job_id
        ret = run_job(
            hydra_context=self.hydra_context,
            task_function=self.task_function,
            config=config,
            job_dir_key="hydra.sweep.dir",
            job_subdir_key="hydra.sweep.subdir",
        )
        if ret.status == JobStatus.FAILED:
            raise ret._return_value  # the task's own exception, its traceback with it
        return ret._return_value
