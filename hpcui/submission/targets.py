"""What to run, named as text: ``pkg.mod:func``, ``path/file.py:func`` or a script file.

One loader for every face (the CLI's ``submit``/``run``, the app's Submit form): the same
text means the same call everywhere, and a mistake gets the same message.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcui.errors import UsageError
from hpcui.node.runscript import run_script


@dataclass
class Call:
    """A loaded call: the function and its arguments, plus the default job name."""

    fn: Callable[..., Any]
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    name: str = "hpcui"


def is_function_spec(target: str) -> bool:
    """``module:function`` (a function) rather than a script file."""
    return ":" in target


def default_name(target: str) -> str:
    """The job name when none is given: the function's name, or the script's stem."""
    target = target.strip()
    if not target:
        return "hpcui"
    if not is_function_spec(target):
        return Path(target).stem or "script"
    return target.rpartition(":")[2].rpartition(".")[2] or "hpcui"


def load_function(spec: str) -> Callable[..., Any]:
    """`pkg.mod:func`, `mod:Class.method` or `path/to/file.py:func`, imported locally.

    The current directory is importable (as with `python -m`); the function's own code
    then travels with the job by value, so the cluster needs none of your files.
    """
    module_name, sep, attr = spec.strip().partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"Expected MODULE:FUNCTION (e.g. train:main), got {spec!r}.")
    try:
        if module_name.endswith(".py"):
            module = _load_file(Path(module_name).expanduser())
        else:
            if "" not in sys.path and os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(
            f"Cannot import {module_name!r}: {type(exc).__name__}: {exc}. Run hpcui from the "
            "directory that contains it, or install it."
        ) from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UsageError(f"{module_name!r} has no attribute {attr!r}.")
        obj = getattr(obj, part)
    if not callable(obj):
        raise UsageError(f"{spec} is a {type(obj).__name__}, not a function.")
    return obj


def _load_file(path: Path) -> Any:
    if not path.is_file():
        raise UsageError(f"No such file: {path}.")
    name = path.stem
    mod_spec = importlib.util.spec_from_file_location(name, path)
    if mod_spec is None or mod_spec.loader is None:
        raise UsageError(f"{path} is not a Python module.")
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.resolve().parent))
    mod_spec.loader.exec_module(module)
    return module


def script_call(script: str | Path, argv: list[str] | None = None) -> Call:
    """A script file (Python, else bash) as a call: its text travels in the pickle.

    It is read and, for Python, compiled here, so a typo fails now and not after the queue.
    """
    path = Path(script).expanduser()
    if not path.is_file():
        raise UsageError(
            f"No such script: {script} (a function is written `package.module:function`)."
        )
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"Cannot read {script}: {exc}.") from None
    if path.suffix == ".py":
        try:
            compile(source, str(path), "exec")
        except SyntaxError as exc:
            raise UsageError(f"{script} does not compile: {exc}.") from None
    return Call(
        run_script, [source, path.name, [str(a) for a in argv or []]], {}, default_name(str(script))
    )


def json_value(text: str, what: str, kind: type) -> Any:
    """``--args``/``--kwargs`` (and the form's boxes): a JSON list or object."""
    try:
        value = json.loads(text or ("[]" if kind is list else "{}"))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} is not valid JSON ({exc}): {text!r}.") from None
    if not isinstance(value, kind):
        want = (
            "a JSON list, e.g. '[1, \"a\"]'"
            if kind is list
            else "a JSON object, e.g. '{\"lr\": 0.1}'"
        )
        raise UsageError(f"{what} must be {want}, got {type(value).__name__}.")
    return value


def load_call(
    target: str, args: list[Any] | None = None, kwargs: dict[str, Any] | None = None
) -> Call:
    """A function spec with its arguments, or a script file whose arguments become argv."""
    target = target.strip()
    if not target:
        raise UsageError("Say what to run: `package.module:function` or a script file.")
    if not is_function_spec(target):
        if kwargs:
            raise UsageError("A script takes arguments only (its argv), not keyword arguments.")
        return script_call(target, [str(a) for a in args or []])
    return Call(load_function(target), list(args or []), dict(kwargs or {}), default_name(target))
