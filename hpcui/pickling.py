"""Pickle a call for a machine that does not have the caller's source files."""

from __future__ import annotations

import contextlib
import io
import linecache
import sys
import sysconfig
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

_INSTALLED_ROOTS = tuple(
    str(Path(p).resolve())
    for key in ("stdlib", "platstdlib", "purelib", "platlib")
    if (p := sysconfig.get_paths().get(key))
)
_SHIPPED = {"hpcui", "submitit", "cloudpickle"}


def _user_package(fn: Callable[..., Any]) -> ModuleType | None:
    """The top-level package of `fn` when it is the user's own code (not installed, not stdlib).

    The cluster has the same site-packages story only by luck, and never the user's
    working copy: such code travels by value, as cloudpickle does for `__main__`.
    """
    name = getattr(fn, "__module__", None) or ""
    module = sys.modules.get(name)
    if module is None or name == "__main__":
        return None
    top = name.split(".")[0]
    if top in _SHIPPED or top in sys.stdlib_module_names:
        return None
    file = getattr(module, "__file__", None)
    if not file:
        return None
    path = str(Path(file).resolve())
    if any(path.startswith(root + "/") for root in _INSTALLED_ROOTS) or "site-packages" in path:
        return None
    return sys.modules.get(top)


@contextlib.contextmanager
def by_value(fn: Callable[..., Any]) -> Iterator[None]:
    import cloudpickle

    pkg = _user_package(fn)
    if pkg is None:
        yield
        return
    already = pkg.__name__ in cloudpickle.list_registry_pickle_by_value()
    if not already:
        cloudpickle.register_pickle_by_value(pkg)
    try:
        yield
    finally:
        if not already:
            cloudpickle.unregister_pickle_by_value(pkg)


#: a file larger than this travels without its lines (its traceback shows names and numbers)
MAX_SOURCE_BYTES = 1 << 20


def _source_lines(
    filename: str, cache: dict[str, tuple[str, ...] | None]
) -> tuple[str, ...] | None:
    """The file's lines as linecache sees them now (a notebook cell's too), once per file:
    the same tuple in every code object of a pickle, which pickle's memo stores once."""
    if filename not in cache:
        lines = tuple(linecache.getlines(filename))
        cache[filename] = lines if lines and sum(map(len, lines)) <= MAX_SOURCE_BYTES else None
    return cache[filename]


def dumps(obj: Any) -> bytes:
    """cloudpickle.dumps, with each by-value code object's file name and source lines kept.

    Independent of how a cloudpickle release names code objects: hpcui.compute.code_source
    restores the name after cloudpickle's own rebuild on the node.
    """
    import cloudpickle

    from hpcui.compute.code_source import restore

    lines: dict[str, tuple[str, ...] | None] = {}

    class _Pickler(cloudpickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            if type(obj) is types.CodeType:
                make, args = cloudpickle.Pickler.dispatch_table[types.CodeType](obj)
                name = obj.co_filename
                return restore, (make, args, name, _source_lines(name, lines))
            return super().reducer_override(obj)

    buf = io.BytesIO()
    _Pickler(buf, protocol=cloudpickle.DEFAULT_PROTOCOL).dump(obj)
    return buf.getvalue()


#: Time-limit requeues a Checkpointable gets (submitit's executors default to 3 as well).
MAX_NUM_TIMEOUT = 3


def pickle_calls(
    fn: Callable[..., Any],
    calls: list[tuple[tuple, dict]],
    *,
    time_s: int | None = None,
    max_num_timeout: int = MAX_NUM_TIMEOUT,
) -> list[bytes]:
    """One submitit DelayedSubmission pickle per (args, kwargs).

    The timeout is what submitit's signal handler reads on USR2: without it (a
    DelayedSubmission's default countdown is 0) every signal counts as a time-out "too
    many times" and a Checkpointable is never requeued. submitit's own executors set it.
    """
    from submitit.core.utils import DelayedSubmission

    timeout_min = -(-time_s // 60) if time_s else 0
    out = []
    with by_value(fn):
        for a, kw in calls:
            delayed = DelayedSubmission(fn, *a, **kw)
            delayed.set_timeout(timeout_min, max_num_timeout)
            out.append(dumps(delayed))
    return out
