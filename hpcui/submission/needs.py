"""What a call needs on the cluster besides Python: the installed distributions it uses.

Recorded while pickling (hpcui.submission.pickling's Pickler notes every module, function,
class and object it writes by reference, and the `import` statements of the code it
carries by value); a script for `hpcui run` is read with `ast`, never run. Each name is
mapped to the distribution that installed it here (importlib.metadata) and its version;
the cluster's interpreter is then asked, in the probe's round trip, whether it imports
each and at which version (hpcui.store.remote), so a job that would die of
ModuleNotFoundError after hours in the queue is refused before it is submitted.
"""

from __future__ import annotations

import ast
import dis
import functools
import importlib.metadata as metadata
import logging
import sys
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hpcui.errors import RemotePythonError
from hpcui.request.plan import job_setup
from hpcui.store import remote as remote_side
from hpcui.store.remote import NAME, RemoteInfo
from hpcui.transport.base import Transport

log = logging.getLogger(__name__)

#: what hpcui's runtime bundle carries to every job: never needed from the cluster
SHIPPED = frozenset({"hpcui", "submitit", "cloudpickle"})


@dataclass(frozen=True)
class Need:
    """One distribution a call uses: `module` (its top-level import name) as installed here."""

    module: str
    dist: str
    version: str
    #: objects of it travel in the pickle (not only names): they load only where its
    #: version is close enough
    objects: bool = False
    #: only imported inside a `try` (an optional import, `except ImportError`): warned
    #: about where missing, never refused
    optional: bool = False


class References:
    """Top-level module names a pickle refers to (True: objects of it travel too)."""

    def __init__(self) -> None:
        self.modules: dict[str, bool] = {}
        #: names seen only in guarded imports (inside a try or with block)
        self.optional: set[str] = set()

    def _add(self, name: str | None, objects: bool = False, *, optional: bool = False) -> None:
        top = (name or "").split(".")[0]
        if not top:
            return
        if optional and top not in self.modules:
            self.optional.add(top)
        elif not optional:
            self.optional.discard(top)
        self.modules[top] = self.modules.get(top, False) or objects

    def note(self, obj: Any) -> None:
        """An object the pickler writes: a module, a function or class (its module), or an
        instance (its class's modules, bases included: the object itself travels)."""
        if isinstance(obj, types.ModuleType):
            self._add(obj.__name__)
        elif isinstance(obj, type | types.FunctionType | types.BuiltinFunctionType):
            self._add(getattr(obj, "__module__", None))
        else:  # its class and every base class: a model's state is its base's format too
            for klass in getattr(type(obj), "__mro__", (type(obj),)):
                self._add(getattr(klass, "__module__", None), objects=True)

    def imports_in(self, code: types.CodeType) -> None:
        """The absolute `import` statements of code carried by value (nested code objects
        are pickled, and so seen, on their own)."""
        ops = list(dis.get_instructions(code))
        guarded = getattr(dis.Bytecode(code), "exception_entries", [])  # try/with ranges
        for i, op in enumerate(ops):
            if op.opname == "IMPORT_NAME" and i >= 2 and ops[i - 2].argval == 0:
                inside = any(e.start <= op.offset < e.end for e in guarded)
                self._add(str(op.argval), optional=inside)

    def script(self, source: str) -> None:
        """The absolute imports of a script's source, read without running it (those
        inside a `try` are optional)."""
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return  # the job says so where it runs, in Python's words

        def visit(node: ast.AST, guarded: bool) -> None:
            for child in ast.iter_child_nodes(node):
                inside = guarded or isinstance(node, ast.Try | ast.TryStar)
                if isinstance(child, ast.Import):
                    for alias in child.names:
                        self._add(alias.name, optional=inside)
                elif isinstance(child, ast.ImportFrom) and child.level == 0:
                    self._add(child.module, optional=inside)
                visit(child, inside)

        visit(tree, False)


@functools.cache
def _distributions() -> Mapping[str, list[str]]:
    return metadata.packages_distributions()


@functools.cache
def _version(dist: str) -> str | None:
    """A distribution's version here (read once per process: a METADATA file each)."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def needs_of(refs: References, by_value: frozenset[str] = frozenset()) -> list[Need]:
    """The installed distributions among `refs` (not the standard library, not what the
    runtime bundle carries, not the user's own code that travels by value), by name."""
    out: dict[str, Need] = {}
    for top, objects in sorted(refs.modules.items()):
        if top in SHIPPED or top in sys.stdlib_module_names or top in by_value:
            continue
        if top.startswith("_") or top in ("builtins", "__main__") or not NAME.match(top):
            continue
        dists = _distributions().get(top)
        if not dists or not NAME.match(dists[0]):
            continue  # not installed as a distribution here (a local module: by value)
        version = _version(dists[0])
        if version is None:
            continue
        out[top] = Need(top, dists[0], version, objects, optional=top in refs.optional)
    return list(out.values())


def _newer_major(here: str, there: str) -> bool:
    """Objects pickled under a newer major version do not load under an older one (pydantic
    2 models under 1.x, numpy 2 arrays under 1.x: `numpy._core`); the other way they may."""
    a, b = here.split(".")[0], there.split(".")[0]
    return a.isdigit() and b.isdigit() and int(a) > int(b)


def _minor(version: str) -> tuple[str, ...]:
    return tuple(version.split(".")[:2])


def problems(
    needs: list[Need], there: dict[str, tuple[bool, str]], *, cluster: str, python: str
) -> tuple[list[str], list[str]]:
    """(refusals, warnings) for what the cluster's interpreter said of each need: missing
    is refused, and so are objects made under a newer major version than the one there;
    objects at another major.minor version are warned about (they may not load)."""
    refused, warned = [], []
    for need in needs:
        found, version = there.get(need.module, (True, ""))
        if not found and need.optional:
            warned.append(
                f"`{need.module}` ({need.dist} {need.version} here) is not importable by "
                f"{cluster}'s Python ({python}); the call imports it inside a try, so it "
                "may do without it"
            )
        elif not found:
            refused.append(
                f"`{need.module}` ({need.dist} {need.version} here) is not importable by "
                f"{cluster}'s Python ({python})"
            )
        elif need.objects and version not in ("", "-") and _newer_major(need.version, version):
            refused.append(
                f"objects of `{need.dist}` travel in this call, made with {need.version} here; "
                f"{cluster}'s Python ({python}) has {version}, an older major version: they "
                "will not load there"
            )
        elif need.objects and version not in ("", "-") and _minor(version) != _minor(need.version):
            warned.append(
                f"objects of `{need.dist}` travel in this call, made with {need.version} here; "
                f"{cluster}'s Python ({python}) has {version}: they may not load there. "
                f"Install {need.dist}=={need.version} there, or point `python` at an "
                "environment that has it."
            )
    return refused, warned


def refusal(refused: list[str], needs: list[Need], python: str) -> str:
    """The whole message: what is missing, and the two ways out."""
    said = "".join(refused)
    pins = " ".join(
        f"{n.dist}=={n.version}" for n in needs if f"`{n.module}`" in said or f"`{n.dist}`" in said
    )
    return (
        "; ".join(refused)
        + ". Nothing was submitted: the job would fail there (a module missing, or objects it "
        f"cannot load). Install it there (on the login node: `{python} -m pip install --user "
        f"{pins}`), or give the submit a python= (or the cluster a `python`) of an environment that has it."
    )


def check_needs(
    transport: Transport,
    info: RemoteInfo,
    needs: list[Need],
    python: str,
    setup: Sequence[str],
    *,
    cluster: str,
    modules: Sequence[str] = (),
) -> None:
    """Every distribution the call uses imports with the cluster's Python, else
    RemotePythonError and nothing is submitted; objects made by another version there are
    warned about. Names the probe already answered cost nothing; others one round trip.
    With the job's own `modules` (a site's `pytorch` carries the frameworks) the Python is
    asked after loading them, as the job runs it."""
    known = info.loaded.setdefault(tuple(modules), {}) if modules else info.modules
    new = {n.module: n.dist for n in needs if n.module not in known}
    if new and info.python_version is not None:
        known.update(remote_side.ask_modules(transport, python, job_setup(setup, modules), new))
    said = f"{python} after `module load {' '.join(modules)}`" if modules else python
    refused, warned = problems(needs, known, cluster=cluster, python=said)
    for line in warned:
        log.warning("%s", line)
    if refused and modules and "/" in python:  # the modules' PATH does not choose it
        refused[-1] += (
            "; a Python by its path is that one whatever `module load` puts first on PATH: "
            "for the modules' own Python give python='python3' (the submit's or the cluster's)"
        )
    if refused:
        raise RemotePythonError(refusal(refused, needs, python))
