"""Pickle a call for a machine that does not have the caller's source files."""

from __future__ import annotations

import contextlib
import functools
import io
import linecache
import sys
import sysconfig
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from hpcui.node.code_source import restore
from hpcui.node.runscript import run_script
from hpcui.submission.needs import Need, References, needs_of

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


#: a code object whose lines exceed this travels without them (its traceback shows names
#: and line numbers only)
MAX_SOURCE_BYTES = 1 << 20


def _span(code: types.CodeType) -> tuple[int, int]:
    """The first and last line of `code` (its decorators included: co_firstlineno)."""
    lines = [line for _, _, line in code.co_lines() if line is not None]
    return code.co_firstlineno, max([code.co_firstlineno, *lines])


class _Sources:
    """The source lines each code object of one pickle carries: its own span of its file,
    not the whole file (a map of 1,000 calls carries each function 1,000 times), and
    nothing for a code object inside a span already carried (a nested function, a
    comprehension: pickled after the function that holds it)."""

    def __init__(self) -> None:
        self._sent: dict[str, list[tuple[int, int]]] = {}

    def lines_of(self, code: types.CodeType) -> tuple[int, tuple[str, ...]] | None:
        name = code.co_filename
        first, last = _span(code)
        sent = self._sent.setdefault(name, [])
        if any(a <= first and last <= b for a, b in sent):
            return None
        lines = tuple(linecache.getlines(name)[first - 1 : last])  # a notebook cell's too
        if not lines or sum(map(len, lines)) > MAX_SOURCE_BYTES:
            return None
        sent.append((first, last))
        return first, lines


@functools.cache
def _pickler() -> type:
    """cloudpickle's Pickler with code objects wrapped (made once: cloudpickle is imported
    on first use, not with hpcui)."""
    import cloudpickle

    class Pickler(cloudpickle.Pickler):
        def __init__(self, file: Any, refs: References | None = None) -> None:
            super().__init__(file, protocol=cloudpickle.DEFAULT_PROTOCOL)
            self.sources = _Sources()
            self.refs = refs

        def reducer_override(self, obj: Any) -> Any:
            if type(obj) is types.CodeType:
                if self.refs is not None:
                    self.refs.imports_in(obj)
                make, args = cloudpickle.Pickler.dispatch_table[types.CodeType](obj)
                return restore, (make, args, obj.co_filename, self.sources.lines_of(obj))
            if self.refs is not None:
                self.refs.note(obj)
            return super().reducer_override(obj)

    return Pickler


def dumps(obj: Any, refs: References | None = None) -> bytes:
    """cloudpickle.dumps, with each by-value code object's file name and source lines kept.

    Independent of how a cloudpickle release names code objects: hpcui.node.code_source
    restores the name after cloudpickle's own rebuild on the node. `refs`: what it refers
    to by reference is noted there (hpcui.submission.needs).
    """
    buf = io.BytesIO()
    _pickler()(buf, refs).dump(obj)
    return buf.getvalue()


#: Time-limit requeues a Checkpointable gets (submitit's executors default to 3 as well).
MAX_NUM_TIMEOUT = 3


def pickle_calls(
    fn: Callable[..., Any],
    calls: list[tuple[tuple, dict]],
    *,
    time_s: int | None = None,
    max_num_timeout: int = MAX_NUM_TIMEOUT,
    needs: list[Need] | None = None,
) -> list[bytes]:
    """One submitit DelayedSubmission pickle per (args, kwargs).

    The timeout is what submitit's signal handler reads on USR2: without it (a
    DelayedSubmission's default countdown is 0) every signal counts as a time-out "too
    many times" and a Checkpointable is never requeued. submitit's own executors set it.
    `needs` is filled with the installed distributions the calls use (a script's imports
    for `hpcui run`): what the cluster's Python must import.
    """
    from submitit.core.utils import (
        DelayedSubmission,
    )

    timeout_min = -(-time_s // 60) if time_s else 0
    out = []
    refs = References()
    with by_value(fn):
        for a, kw in calls:
            delayed = DelayedSubmission(fn, *a, **kw)
            delayed.set_timeout(timeout_min, max_num_timeout)
            out.append(dumps(delayed, refs))
            if fn is run_script and a and isinstance(a[0], str):
                refs.script(a[0])  # `hpcui run`: the script's source, read not run
    if needs is not None:
        pkg = _user_package(fn)
        needs += needs_of(refs, frozenset({pkg.__name__}) if pkg else frozenset())
    return out
