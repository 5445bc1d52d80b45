"""What a user asks for: one validated model of every resource keyword (`gpus=16`, `time="2h"`,
`container=...`), with the words that reach a batch directive checked here, before any
network. `hpcui.request.plan` resolves it against a site profile."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator

from hpcui.backends.chain import MAX_SEGMENTS
from hpcui.backends.containers import ENV_NAME, IMAGE, parse_bind
from hpcui.backends.launch import Launcher
from hpcui.backends.model import Model
from hpcui.common.units import parse_mem_mb, parse_signal_delay, parse_time
from hpcui.errors import UsageError

__all__ = ["Resources", "parse_mem_mb", "parse_time"]

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
    launcher: Launcher = "submitit"
    #: a local file the launcher reads (Accelerate's config YAML): uploaded with the job
    launcher_config: str | None = None
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
    #: the Python this job runs on the cluster (a venv's bin/python), instead of the
    #: cluster table's `python`: a second environment on one site needs no second table
    python: str | None = None
    #: run inside this image (docs/containers.md); the runtime defaults to the profile's
    container: str | None = None
    container_runtime: Literal["apptainer", "singularity", "enroot", "pyxis"] | None = None
    binds: tuple[str, ...] = ()
    container_env: dict[str, str] = Field(default_factory=dict)
    #: the job's packages on the cluster (hpcui.submission.environments): "auto",
    #: requirements, a requirements file here, or the path of an environment there
    env: tuple[str, ...] = ()
    #: the experiment trackers the job writes offline and hpcui relays to this machine
    #: while it runs (hpcui.trackers; "auto": W&B, MLflow and TensorBoard alike)
    track: Literal["", "auto", "wandb", "mlflow", "tensorboard"] = ""
    #: what the trackers group these runs under (a sweep's name: W&B group, MLflow experiment)
    track_group: str = Field("", pattern=r"^[A-Za-z0-9_.:+-]*$", max_length=128)
    #: run as up to this many jobs in a row past the site's time limit (backends/chain.py)
    chain: int = Field(1, ge=1, le=MAX_SEGMENTS, description="segments of a chain (1: none)")

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

    @field_validator("python")
    @classmethod
    def _python(cls, v: str | None) -> str | None:
        if v is None:
            return None
        v = v.strip()
        if not v or len(v) > 1024 or any(c in v for c in "\n\r\0"):
            raise ValueError(
                "give the path of a Python on the cluster (e.g. ~/venvs/torch/bin/python), one line"
            )
        return v

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

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, v: Any) -> tuple[str, ...]:
        if v is None:
            return ()
        items = (v,) if isinstance(v, str) else tuple(v)
        if any(not isinstance(i, str) or "\n" in i or "\0" in i for i in items):
            raise ValueError("env= takes 'auto', requirements, a requirements file or a path")
        return tuple(i.strip() for i in items if i.strip())

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
