"""Environment modules on the login node: Lmod or Tcl Environment Modules, one round trip.

Which system a site runs is probed once (``module --version``) and cached by the
Cluster; after that ``fetch_modules`` asks for the loaded list, the loadable list and the
defaults in one round trip. Lmod's terse ``avail`` does not mark defaults, so the
defaults (and descriptions) come from its spider JSON, matched by full name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from hpcui.backends import modules as mod
from hpcui.backends.modules import Module, ModuleState, ModuleSystem
from hpcui.errors import HpcuiError
from hpcui.sitestate.remote import Part, all_command, parse_parts
from hpcui.transport.base import Transport

__all__ = [
    "ModuleError",
    "detect_system",
    "fetch_modules",
    "missing_modules",
    "search_modules",
    "setup_modules",
]


class ModuleError(HpcuiError):
    """No module system, or it answered with something hpcui cannot read."""


def detect_system(transport: Transport, *, cluster: str = "the cluster") -> ModuleSystem:
    res = transport.run(mod.version_command())
    system = mod.detect_module_system(res.stdout + res.stderr)
    if system is None:
        said = (res.stdout + res.stderr).strip()[:300] or "(no output)"
        raise ModuleError(
            f"No module system on {cluster}: `module --version` in a login shell said {said!r}. "
            "Modules are optional: set `setup`/`python` in the cluster config without "
            "`module load`, or ask the site how software is provided."
        )
    return system


def _run(transport: Transport, parts: list[tuple[str, str]], cluster: str) -> dict[str, Part]:
    res = transport.run(all_command(parts))
    got = {p.name: p for p in parse_parts(res.stdout, [n for n, _ in parts])}
    missing = [n for n, _ in parts if n not in got]
    if missing:
        raise ModuleError(
            f"`module` on {cluster} did not answer ({', '.join(missing)} missing; exit status "
            f"{res.exit_status}: {(res.stderr or res.stdout).strip()[:300]!r}). "
            "Try `module list` in a login shell there."
        )
    return got


def fetch_modules(
    transport: Transport,
    system: ModuleSystem,
    *,
    cluster: str = "the cluster",
    setup: Sequence[str] = (),
) -> ModuleState:
    """Loaded and available modules, defaults and hidden ones marked: ONE round trip.

    ``setup``: the cluster's job setup lines, run before listing, so "loaded" is what a
    job sees rather than a bare login shell.
    """
    if system == "lmod":
        parts = [
            ("list", mod.list_command(system, setup)),
            ("avail", mod.avail_command(system)),
            ("spider", mod.spider_command()),
        ]
        got = _run(transport, parts, cluster)
        said, listed = mod.split_setup_output(got["list"].output)
        loaded = mod.parse_list(listed)
        available = mod.parse_avail(got["avail"].output)
        try:
            spider = {m.full_name: m for m in mod.parse_lmod_spider_json(got["spider"].output)}
        except ValueError:  # spider is a bonus (defaults, descriptions); avail still stands
            spider = {}
        available = [
            m.model_copy(
                update={
                    "default": m.default
                    or (s.default if (s := spider.get(m.full_name)) else False),
                    "description": m.description or (s.description if s else None),
                    # Lmod 8.6 lists hidden modules (--show_hidden) without a marker
                    "hidden": m.hidden or (s.hidden if s else False),
                }
            )
            for m in available
        ]
    else:
        parts = [("list", mod.list_command(system, setup)), ("avail", mod.avail_command(system))]
        got = _run(transport, parts, cluster)
        said, listed = mod.split_setup_output(got["list"].output)
        try:
            # -j list prints {} or nothing at all when no module is loaded; a text list
            # (its variants in {}) is read as the JSON would be
            loaded = mod.parse_envmodules_list(listed)
            available = mod.parse_envmodules_json(got["avail"].output)
        except ValueError as exc:
            raise ModuleError(
                f"Environment Modules on {cluster} answered in a form hpcui cannot read ({exc}). "
                "hpcui needs Environment Modules 4.5+ (`module -j`); check `module --version`."
            ) from exc
    return mod.module_state(loaded, available, mod.parse_load_error(said) if said else None)


def search_modules(
    transport: Transport, system: ModuleSystem, term: str, *, cluster: str = "the cluster"
) -> list[Module]:
    """Modules whose name (Lmod: or description) mentions ``term``."""
    res = transport.run(mod.keyword_command(system, term))
    if system == "lmod":
        return mod.parse_lmod_keyword(res.stdout)
    if "{" not in res.stdout:
        return []
    try:
        return mod.parse_envmodules_json(res.stdout)
    except ValueError as exc:
        raise ModuleError(
            f"`module avail --contains` on {cluster} printed no JSON ({exc})."
        ) from exc


_LOAD = re.compile(r"\b(?:module|ml)\s+(?:load|add|try-load)\s+([^;&|#\n]+)")


def setup_modules(setup: Iterable[str]) -> list[str]:
    """Module names that ``setup`` lines load (``module load a/1 b``), in order."""
    names: list[str] = []
    for line in setup:
        for m in _LOAD.finditer(line):
            names += [w for w in m[1].split() if not w.startswith("-")]
    return names


def missing_modules(setup: Iterable[str], state: ModuleState) -> list[str]:
    """The names a job's setup would load that the site does not have.

    ``cuda`` matches any cuda/<version>; ``cuda/12.4`` needs that exact version.
    """
    full = {m.full_name for m in state.available} | {m.full_name for m in state.loaded}
    short = {m.name for m in state.available} | {m.name for m in state.loaded}
    return [n for n in setup_modules(setup) if n not in full and n not in short]
