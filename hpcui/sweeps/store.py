"""Where a sweep is kept on this machine: its definition, its call, and one lock.

`<data dir>/sweeps/<cluster>/<name>/`: `sweep.json` (the configurations with their keys,
the resources, the function's name), `call.pkl` (the function and its fixed arguments,
pickled by value as a job carries them, so a new process resumes without the user's
module) and `lock` (held while a process submits, so two never submit one element).
Which job ran which element is not here: every element's job record in the registry
carries the sweep's name and the element's key from before sbatch, so a submit cut off
anywhere is still found there (one place per fact).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import cloudpickle
from pydantic import Field, ValidationError

from hpcui.backends.model import Model
from hpcui.common.file_lock import locked
from hpcui.errors import UsageError
from hpcui.store.registry import default_path

#: a sweep's name: a folder here, a column in `hpcui sweep list`, a job-name prefix there
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SPEC = "sweep.json"
CALL = "call.pkl"


class Element(Model):
    key: str
    config: dict[str, Any]


class SweepSpec(Model):
    """What a sweep is, as kept: enough for any process to resume it."""

    name: str
    cluster: str
    function: str
    #: "call": fn(*args, **config); "script": the script with each config as --options;
    #: "keyed": fn(*args[:-1], args[-1][key]), each element's own argument looked up by its
    #: key (Hydra's composed configurations: one element's, not all, in each task's pickle)
    mode: Literal["call", "script", "keyed"] = "call"
    elements: list[Element]
    #: the resources of its submits (Resources' keywords), JSON as given
    resources: dict[str, Any] = Field(default_factory=dict)
    #: elements run this many to an array task, one after another (`calls_per_task=`)
    calls_per_task: int = Field(1, ge=1)
    #: a packed task's elements run this many at once on each of its GPUs (`tasks_per_gpu=`)
    tasks_per_gpu: int | None = Field(None, ge=1)
    created_at: float = Field(default_factory=time.time)


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise UsageError(
            f"A sweep's name is 1-64 letters, digits, '.', '_' or '-' (starting with a letter "
            f"or digit), got {name!r}: e.g. name='lr-scan'."
        )
    return name


def sweeps_root() -> Path:
    return default_path().parent / "sweeps"


def folder(cluster: str, name: str) -> Path:
    return sweeps_root() / cluster / check_name(name)


def _write(path: Path, data: bytes) -> None:
    """Whole or not at all: a reader never sees half a file (a crash keeps the old one)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@contextlib.contextmanager
def holding(cluster: str, name: str) -> Iterator[Path]:
    """The sweep's folder, made if new, with its lock held for the block."""
    where = folder(cluster, name)
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock_path = where / "lock"
    with open(lock_path, "a+b") as f, locked(f, lock_path):
        yield where


def load(cluster: str, name: str) -> SweepSpec | None:
    path = folder(cluster, name) / SPEC
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return SweepSpec.model_validate_json(text)
    except ValidationError as exc:
        raise UsageError(
            f"The sweep file {path} is damaged ({exc.error_count()} errors: "
            f"{exc.errors()[0]['msg']}). Move its folder aside to start the sweep anew; its "
            "jobs stay in `hpcui jobs`."
        ) from None


def save(where: Path, spec: SweepSpec, call: bytes | None) -> None:
    if call is not None:
        _write(where / CALL, call)
    _write(where / SPEC, spec.model_dump_json(indent=1).encode())


def load_call(cluster: str, name: str) -> tuple[Callable[..., Any], list[Any]]:
    """The function and its fixed arguments (a script sweep: the script's source)."""
    path = folder(cluster, name) / CALL
    try:
        fn, args = cloudpickle.loads(path.read_bytes())
    except FileNotFoundError:
        raise UsageError(f"The sweep {name!r} has no call file {path}: it cannot be resumed "
                         "from this machine. Start it again with the same name.") from None  # fmt: skip
    except Exception as exc:  # a pickle from another Python or a removed dependency
        raise UsageError(
            f"The sweep {name!r}'s function could not be loaded from {path}: "
            f"{type(exc).__name__}: {exc}. Run the sweep again (same name: only what has no "
            "result is submitted)."
        ) from None
    return fn, list(args)


def names(cluster: str | None = None) -> list[tuple[str, str]]:
    """(cluster, name) of every sweep kept here."""
    root = sweeps_root()
    if not root.is_dir():
        return []
    found = []
    for c in sorted(root.iterdir()) if cluster is None else [root / cluster]:
        if c.is_dir():
            found += [(c.name, s.name) for s in sorted(c.iterdir()) if (s / SPEC).is_file()]
    return found
