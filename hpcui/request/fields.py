"""The resources a user can ask for, declared once: the CLI's options and the app's Submit
form are generated from this table, and a test checks it against ``Resources``.

Standard library only: the argparse tree imports it, and `hpcui --help` must start fast.
Keywords are those of ``Cluster.submit`` (``Resources.from_kwargs``: ``time``/``mem`` are
the friendly spellings of ``time_s``/``mem_mb``); the core validates every value.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpcui.backends.launch import LAUNCHERS


@dataclass(frozen=True)
class RequestField:
    keyword: str
    #: the value's type on the command line; None: a flag that takes no value
    kind: type | None
    metavar: str | None
    help: str
    #: label on the app's Submit form; None: not on the form (the CLI and API only)
    label: str | None = None
    #: given several times on the command line; whitespace-separated on the form
    repeatable: bool = False
    choices: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        return "--" + self.keyword.replace("_", "-")


REQUEST_FIELDS: tuple[RequestField, ...] = (
    RequestField(
        "gpus", int, "N", "GPUs in total (the profile picks nodes and tasks)", "GPUs (total)"
    ),
    RequestField("nodes", int, "N", "nodes", "nodes"),
    RequestField(
        "tasks_per_node", int, "N", "tasks per node (default: one per GPU)", "tasks per node"
    ),
    RequestField("cpus_per_task", int, "N", "CPU cores per task", "cpus per task"),
    RequestField("mem", str, "SIZE", "memory per node: 4G, 500M", "memory per node"),
    RequestField("time", str, "TIME", "time limit: 90m, 2h, 1:00:00, 1-00:00:00", "time limit"),
    RequestField("partition", str, "NAME", "partition (PBS: queue)", "partition"),
    RequestField("qos", str, "NAME", "quality of service", "QoS"),
    RequestField("account", str, "NAME", "account / project to charge", "account"),
    RequestField("constraint", str, "EXPR", "node constraint (Slurm --constraint)", "constraint"),
    RequestField("exclusive", None, None, "whole nodes for this job", "exclusive nodes"),
    RequestField("name", str, "NAME", "job name", "job name"),
    RequestField(
        "launcher",
        str,
        "{" + ",".join(LAUNCHERS) + "}",
        "how ranks start (auto: from what the code imports)",
        "launcher",
        choices=LAUNCHERS,
    ),
    RequestField(
        "launcher_config",
        str,
        "FILE",
        "the launcher's config file, uploaded with the job (Accelerate's YAML)",
        "launcher config",
    ),
    RequestField("max_restarts", int, "N", "torchrun --max-restarts", "torchrun restarts"),
    RequestField(
        "signal_delay",
        str,
        "TIME",
        "tell the job this long before its time limit (stop_requested() turns true; "
        "default: the profile's, 90s)",
        "early signal",
    ),
    RequestField(
        "chain",
        int,
        "N",
        "past the site's longest time limit: up to N jobs in a row, each starting when the one "
        "before ends (afterany) and resuming from the call's own checkpoint; the rest are "
        "cancelled once one finishes the work",
        "chain segments",
    ),
    RequestField(
        "track",
        str,
        "TRACKER",
        "experiment trackers written offline on the node and relayed here while the job runs "
        "(`hpcui track`): auto, wandb, mlflow or tensorboard",
        "trackers",
        choices=("auto", "wandb", "mlflow", "tensorboard"),
    ),
    RequestField(
        "env",
        str,
        "ENV",
        "the packages this job needs, built once on the login node: `auto` (what the call "
        "uses, at this machine's versions), requirements (repeatable: name==1.2), a "
        "requirements file, a pyproject.toml or uv.lock, or the path of an environment on "
        "the cluster",
        "environment",
        repeatable=True,
    ),
    RequestField(
        "modules",
        str,
        "MODULE",
        "a module this job loads after the cluster's setup (repeatable)",
        "modules to load",
        repeatable=True,
    ),
    RequestField(
        "after_ok",
        str,
        "JOB",
        "start only after this job completed successfully (repeatable; Slurm afterok)",
        "after jobs (ok)",
        repeatable=True,
    ),
    RequestField(
        "python",
        str,
        "PYTHON",
        "the Python this job runs on the cluster, e.g. a venv's bin/python (default: the "
        "cluster's `python`); its minor version must match this machine's",
        "python (cluster)",
    ),
    RequestField(
        "container",
        str,
        "IMAGE",
        "run inside this image: a .sif or .sqsh path on the cluster, an enroot container "
        "name, or a registry reference (docker://..., nvcr.io#...) imported once",
        "container image",
    ),
    RequestField(
        "container_runtime",
        str,
        "{apptainer,singularity,enroot,pyxis}",
        "the runtime that starts the image (default: the profile's)",
        "container runtime",
        choices=("apptainer", "singularity", "enroot", "pyxis"),
    ),
    RequestField(
        "binds",
        str,
        "SRC[:DST[:ro]]",
        "a folder bound into the container besides the job's (repeatable)",
        "container binds",
        repeatable=True,
    ),
    RequestField(
        "container_env",
        str,
        "NAME=VALUE",
        "a variable set inside the container only (repeatable)",
        "container env",
        repeatable=True,
    ),
    RequestField(
        "extra",
        str,
        "DIRECTIVE",
        "another scheduler directive (repeatable)",
        "extra directives",  # e.g. --begin=now+60 --mail-type=END
        repeatable=True,
    ),
)

#: Resources fields no face offers as an option, and why (the table test reads this).
API_ONLY: dict[str, str] = {
    "array_parallelism": "only map() makes arrays; `hpcui submit` sends one job",
    "track_group": "a sweep sets it to its name: its runs' W&B group and MLflow experiment",
}

#: Resources field -> the keyword users write for it
FRIENDLY: dict[str, str] = {"time_s": "time", "mem_mb": "mem", "signal_delay_s": "signal_delay"}
