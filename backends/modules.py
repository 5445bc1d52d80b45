"""Environment modules (Lmod and Tcl Environment Modules): commands and their outputs.

``module`` is a shell function that exists only in a login shell, so every command is
built as ``bash -lc '...'``. Both implementations write to stderr by default; the
builders move the output to stdout (Lmod ``--redirect``, Environment Modules ``2>&1``)
and prefer the machine-readable modes: Lmod ``-t`` and ``spider-json``, Environment
Modules (4.5+) ``-j``. The parsers take that text and return :class:`Module` objects.

Over 500 lines: Lmod and Environment Modules answer each command (list, avail, spider, keyword) in their own shapes; each parser sits beside its command line, as in every dialect module.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Literal

from pydantic import ConfigDict, Field

from hpcui.backends.model import Model
from hpcui.backends.required_fields import require

__all__ = [
    "Module",
    "ModuleLoadFailure",
    "ModuleState",
    "ModuleSystem",
    "avail_command",
    "detect_module_system",
    "keyword_command",
    "list_command",
    "listed",
    "module_label",
    "module_state",
    "parse_avail",
    "parse_envmodules_json",
    "parse_list",
    "parse_lmod_keyword",
    "parse_lmod_spider_json",
    "parse_load_error",
    "spider_command",
    "version_command",
]

ModuleSystem = Literal["lmod", "envmodules"]


class Module(Model):
    """One modulefile; ``full_name`` is what ``module load`` takes."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str | None = None
    full_name: str
    default: bool = False
    loaded: bool = False
    sticky: bool = False
    hidden: bool = False
    description: str | None = None
    #: for an alias (Lmod ``module_alias``): the module ``module load <name>`` loads
    alias_of: str | None = None
    #: a loaded module's alias names (what ``module load`` was given), if a list showed them
    aliases: tuple[str, ...] = ()
    #: Environment Modules 5 variants of a loaded module (``foo/1.0{bar=val:+dbg}``):
    #: name -> value ("on"/"off" for a boolean); never part of the version
    variants: dict[str, str] = Field(default_factory=dict)
    #: an Lmod extension (``numpy/1.16.4 (E)``): provided by another module, not loadable
    #: by this name; `extension_of` lists the modules that provide it, as Lmod's spider says
    extension: bool = False
    extension_of: tuple[str, ...] = ()


class ModuleLoadFailure(Model):
    """Why ``module load`` failed, worded for the user, with the names it rejected."""

    modules: list[str]
    message: str


class ModuleState(Model):
    """What is loaded now and what could be loaded, as one site snapshot."""

    loaded: list[Module]
    available: list[Module]
    #: why the cluster's setup lines could not load a module (a job would fail the same way)
    setup_failure: ModuleLoadFailure | None = None


# --- detection and commands -----------------------------------------------------------


def detect_module_system(
    version_text: str = "", env: Mapping[str, str] | None = None
) -> ModuleSystem | None:
    """Lmod or Environment Modules, from ``module --version`` text or the login env.

    Lmod prints "Modules based on Lua: Version 8.6.19", Environment Modules
    "Modules Release 5.2.0"; Lmod exports LMOD_VERSION/LMOD_CMD, Environment Modules
    MODULES_CMD (modulecmd.tcl). None when neither is recognised.
    """
    if "Modules based on Lua" in version_text:
        return "lmod"
    if re.search(r"Modules Release \d", version_text):
        return "envmodules"
    env = env or {}
    if env.get("LMOD_VERSION") or env.get("LMOD_CMD"):
        return "lmod"
    if env.get("MODULES_CMD"):
        return "envmodules"
    return None


def _login_shell(inner: str) -> str:
    return "bash -lc " + shlex.quote(inner)


def _module(system: ModuleSystem, args: str) -> str:
    if system == "lmod":
        return _login_shell(f"module --redirect {args}")
    return _login_shell(f"module {args} 2>&1")


def version_command() -> str:
    """``module --version`` (both tools print it on stderr); feed it to detect_module_system."""
    return _login_shell("module --version 2>&1")


SETUP_MARK = "#hpcui-setup# "


def split_setup_output(text: str) -> tuple[str, str]:
    """(what the setup lines said, the list itself) from `list_command`'s output."""
    said: list[str] = []
    rest: list[str] = []
    for line in text.splitlines():
        (said if line.startswith(SETUP_MARK) else rest).append(line.removeprefix(SETUP_MARK))
    return "\n".join(said), "\n".join(rest)


def list_command(system: ModuleSystem, setup: Sequence[str] = ()) -> str:
    """Loaded modules: Lmod terse list, Environment Modules JSON.

    ``setup``: shell lines run first (a cluster's job setup, e.g. ``module load ...``), so
    the list is what a job sees; what they print comes first, marked (`split_setup_output`).
    """
    args = "-t list" if system == "lmod" else "-j list"
    if not setup:
        return _module(system, args)
    # the setup runs in this shell (its loads must count); what it says comes back first,
    # each line marked (SETUP_MARK), so that a failed load can be told to the user
    inner = (
        "__e=$(mktemp 2>/dev/null) || __e=/dev/null; { "
        + "\n".join(setup)
        + f'\n}} >"$__e" 2>&1; sed "s/^/{SETUP_MARK}/" "$__e"; rm -f "$__e"; '
    )
    tail = f"module --redirect {args}" if system == "lmod" else f"module {args} 2>&1"
    return _login_shell(inner + tail)


def avail_command(system: ModuleSystem) -> str:
    """Loadable modules: Lmod terse avail (hidden ones too: a job may load them),
    Environment Modules JSON."""
    return _module(system, "--show_hidden -t avail" if system == "lmod" else "-j avail")


def spider_command() -> str:
    """Lmod only: the whole module tree (also modules behind a hierarchy) as JSON."""
    return _login_shell('"$LMOD_DIR/spider" -o spider-json "$MODULEPATH"')


#: between Lmod's keyword answer and its list of defaults in one search round trip
DEFAULTS_MARK = "#hpcui-defaults#"
#: before Lmod's spider answer for one extension the keyword search found ("numpy/1.12 (E)")
EXTENSION_MARK = "#hpcui-extension#"
#: the most extensions asked about in one search (each is one `module spider`)
MAX_EXTENSIONS = 20


def keyword_command(system: ModuleSystem, word: str) -> str:
    """Search: Lmod ``keyword`` (names, descriptions) then ``-t -d avail`` (keyword marks
    no default: the defaults come after DEFAULTS_MARK), then ``spider`` of each extension
    it found (Lmod marks them `` (E)``: which modules provide one is spider's to say);
    Environment Modules name match. One round trip."""
    if system == "lmod":
        found = "$(printf '%s\\n' \"$k\" | grep -o '[^ ,:]* (E)' | sed 's/ (E)$//' | sort -u | "
        return _login_shell(
            f"k=$(module --redirect keyword {shlex.quote(word)}); printf '%s\\n' \"$k\"; "
            f"echo {shlex.quote(DEFAULTS_MARK)} ; module --redirect -t -d avail; "
            f"for e in {found}head -n {MAX_EXTENSIONS}); do "
            f'echo "{EXTENSION_MARK} $e"; module --redirect spider "$e"; done'
        )
    return _module(system, f"-j avail --contains {shlex.quote(word)}")


# --- parsers --------------------------------------------------------------------------

_EMPTY = re.compile(r"No modules loaded|No Modulefiles Currently Loaded", re.I)
_MARKS = re.compile(r"\(([^()]*)\)|<([^<>]*)>")
#: Lmod's terse avail names an alias with its target: "torch(@pytorch/2.13.0)"
_ALIAS = re.compile(r"^(\S+?)\(@(\S+)\)$")


#: Lmod's own modulefiles where a distribution puts the `Core` folder itself on MODULEPATH
#: (Debian, Ubuntu: /usr/share/lmod/lmod/modulefiles/Core/lmod): modules `lmod` and
#: `settarg` without a version, not versions "lmod"/"settarg" of a module "Core"
_LMOD_OWN = {"Core/lmod": "lmod", "Core/settarg": "settarg"}


def _module_from(full_name: str, marks: AbstractSet[str] = frozenset(), **extra: Any) -> Module:
    name, _, version = full_name.rpartition("/")
    if full_name in _LMOD_OWN:
        name, version = _LMOD_OWN[full_name], ""
    return Module(
        name=name or full_name,
        version=version if name else None,
        full_name=full_name,
        default=bool(marks & {"D", "default"}),
        loaded=bool(marks & {"L", "loaded", "aL", "auto-loaded"}),
        sticky=bool(marks & {"S", "sticky", "sS", "super-sticky"}),
        hidden=bool(marks & {"H", "hidden", "hidden-loaded"}),
        **extra,
    )


def _terse_line(line: str) -> Module | None:
    """One terse line: "gcc/12.2.0", "gcc/12.2.0(default)", "cuda/12.2 <L>", "gcc/12.2.0 (L,D)".

    Skips modulepath headers ("/opt/modules/mf/Core:"), directory entries ("gcc/")
    and the titles both tools print above a list.
    """
    line = line.strip()
    if not line or line.endswith(":") or line.startswith("-") or _EMPTY.search(line):
        return None
    if alias := _ALIAS.match(line):
        return _module_from(alias[1], alias_of=alias[2])
    if line.startswith("{"):  # Environment Modules' legend: "{variant=value}  (symbolic-version)"
        return None
    shown = re.split(r"[\s(<]", line, maxsplit=1)[0]
    full, variants = split_variants(shown)
    if not full or full.endswith(("/", ":")):  # directory entry or legend ("S:  Sticky")
        return None
    marks = {m for a, b in _MARKS.findall(line[len(shown) :]) for m in re.split(r"[,:]", a or b)}
    module = _module_from(full, {m.strip() for m in marks})
    return module.model_copy(update={"variants": variants}) if variants else module


#: Environment Modules 5: ``name/version{variant=value:+boolean:-boolean}`` in a list
_VARIANTS = re.compile(r"^([^{}]+)\{([^{}]*)\}$")


def split_variants(shown: str) -> tuple[str, dict[str, str]]:
    """("variant/1.0", {"bar": "val2", "dbg": "on"}) from "variant/1.0{bar=val2:+dbg}":
    the variants never become part of the version (``module load`` takes the name)."""
    m = _VARIANTS.match(shown)
    if m is None:
        return shown, {}
    variants: dict[str, str] = {}
    for item in filter(None, m[2].split(":")):
        if "=" in item:
            key, _, value = item.partition("=")
            variants[key] = value
        elif item[0] in "+-~":  # a boolean: +on, -off (Spack's ~ reads the same)
            variants[item[1:]] = "on" if item[0] == "+" else "off"
        else:  # a value behind a shortcut character ("%gcc"): kept under that character
            variants[item[0]] = item[1:]
    return m[1], variants


def parse_avail(text: str) -> list[Module]:
    """Terse ``avail``/``spider`` of Lmod or Environment Modules (markers read if shown)."""
    return [m for line in text.splitlines() if (m := _terse_line(line))]


#: the sections of a non-terse list that name modules which are NOT loaded
_NOT_LOADED = re.compile(
    r"^\s*(Inactive Modules|The following have been reloaded|Due to MODULEPATH changes|"
    r"Where:)",
    re.I,
)
#: one numbered entry with its markers: "1) gcc/12.2.0 (S,L)", "2) torch -> pytorch/2.13.0"
_ENTRY = re.compile(r"(\d+)\)\s+(\S+)(?:\s+->\s+(\S+))?((?:\s+(?:\([^()\s]*\)|<[^<>\s]*>))*)")


def parse_list(text: str) -> list[Module]:
    """``list`` of either tool, terse or numbered ("1) gcc/12.2.0   2) cuda/12.2").

    Every module here is loaded; "No modules loaded" gives an empty list. Numbered lists
    are laid out down the columns (1-5 in the first column, 6-10 in the second), so the
    load order is the numbers', not the reading order; markers after a name ("(S)",
    "(L,D)", "<aL>", "(H)") are flags, never part of it; "Inactive Modules:" and the
    reload notes that follow a swap name modules that are not loaded.
    """
    terse: list[Module] = []
    numbered: list[tuple[int, Module]] = []
    # a numbered list's other lines (headers, notes, legends) are never modules
    is_numbered = "Loaded Modules" in text or any(
        _ENTRY.match(line.strip()) for line in text.splitlines()
    )
    for line in text.splitlines():
        if _NOT_LOADED.match(line):
            break
        entries = _ENTRY.findall(line)
        if not entries:
            if not is_numbered and (module := _terse_line(line)) is not None:
                terse.append(module)
            continue
        for number, name, target, marks in entries:
            flags = {m.strip() for a, b in _MARKS.findall(marks) for m in re.split(r"[,:]", a or b)}
            if (module := _terse_line(target or name)) is not None:
                if target:
                    module = module.model_copy(update={"aliases": (name,)})
                numbered.append((int(number), _with_flags(module, flags)))
    listed = [m for _, m in sorted(numbered, key=lambda pair: pair[0])] + _fold_alias_lines(terse)
    return [m.model_copy(update={"loaded": True}) for m in listed]


def _fold_alias_lines(terse: list[Module]) -> list[Module]:
    """Lmod 8.7.27+ follows a module loaded by another name with that name on a line of
    its own, decorated for the module ("intel/15.0.2" then "intel/15"; "nvhpc/24.4.0" then
    "nvhpc/24 <H>"). Lmod loads one version of a name at a time, so a line with the name
    of the module above it is that module's alias line (a `module_alias` to another name,
    "torch" after "pytorch/2.13.0", needs avail to tell: `module_state`)."""
    out: list[Module] = []
    for m in terse:
        last = out[-1] if out else None
        if last is not None and last.version is not None and m.name == last.name:
            aliases = (
                last.aliases if m.full_name == last.full_name else (*last.aliases, m.full_name)
            )
            out[-1] = last.model_copy(
                update={
                    "aliases": aliases,
                    "hidden": last.hidden or m.hidden,
                    "sticky": last.sticky or m.sticky,
                }
            )
            continue
        out.append(m)
    return out


def _with_flags(module: Module, flags: AbstractSet[str]) -> Module:
    marked = _module_from(module.full_name, flags)
    return module.model_copy(
        update={
            "default": module.default or marked.default,
            "sticky": module.sticky or marked.sticky,
            "hidden": module.hidden or marked.hidden,
        }
    )


def _json_object(text: str) -> Any:
    """The JSON object in ``text``; warnings merged in by 2>&1 may surround it."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in module output")
    return json.loads(text[start : end + 1])


def parse_envmodules_json(text: str) -> list[Module]:
    """Environment Modules ``-j list`` ({name: info}) or ``-j avail`` ({modulepath: ...}).

    ``tags`` carry loaded/sticky/hidden, ``symbols`` the "default" symbolic version;
    everything in a list output is loaded even when its tags are empty.
    """
    data = _json_object(text)
    # a list maps names to entries ({"name": ..., "type": ...}); avail maps modulepaths
    # to such maps
    is_list = all(
        isinstance(v, dict) and ({"name", "type", "pathname"} & set(v)) for v in data.values()
    )
    entries = data.values() if is_list else [e for d in data.values() for e in d.values()]
    out = []
    for entry in entries:
        require(entry, ("name",), "This Environment Modules JSON entry")
        marks = set(entry.get("tags", [])) | set(entry.get("symbols", []))
        module = _module_from(entry["name"], marks)
        raw = entry.get("variants")
        if isinstance(raw, dict) and raw:
            variants = {
                str(k): ("on" if v else "off") if isinstance(v, bool) else str(v)
                for k, v in raw.items()
            }
            module = module.model_copy(update={"variants": variants})
        out.append(module.model_copy(update={"loaded": True}) if is_list else module)
    return out


def parse_envmodules_list(text: str) -> list[Module]:
    """Environment Modules' loaded modules: ``-j list`` JSON, or the text list a module
    command printed instead (its ``{}`` of variants is not JSON), read to the same
    records."""
    try:
        _json_object(text)
    except ValueError:  # not JSON (json.JSONDecodeError is a ValueError too)
        return parse_list(text)
    return parse_envmodules_json(text)


def _lmod_marked_default(weight: str) -> bool:
    """Lmod's isMarked(): a marked default's version weight starts with '^', 's' or 'u'."""
    return weight.rsplit("/", 1)[-1][:1] >= "^"


def parse_lmod_spider_json(text: str) -> list[Module]:
    """Lmod ``spider -o spider-json``: {package: {modulefile path: info}}.

    The default is the marked one, else the highest version that is not hidden, as Lmod
    resolves it. The version is what follows the package in ``fullName``: for a version
    hidden by its dot ("foo/.2.0") some Lmod releases repeat the default's in ``Version``.
    """
    out = []
    for package, versions in _json_object(text).items():
        infos = sorted(versions.values(), key=lambda i: i.get("pV", ""))
        marked = [i for i in infos if _lmod_marked_default(i.get("wV", ""))]
        shown = [i for i in infos if not i.get("hidden")]
        default = (marked or shown or infos)[-1]
        for info in infos:
            # the name is the package key (it may hold "/" itself: "intel/mpi")
            full = info["fullName"]
            if full.startswith(f"{package}/"):
                name, version = package, full[len(package) + 1 :] or None
            else:
                name, version = full, info.get("Version") or None
            out.append(
                Module(
                    name=name,
                    version=version if full != name else None,
                    full_name=full,
                    default=info is default,
                    hidden=bool(info.get("hidden")),
                    description=info.get("Description"),
                )
            )
    return out


def parse_lmod_keyword(text: str) -> list[Module]:
    """Lmod ``keyword``: "  cuda: cuda/12.2" lines, each followed by its description; with
    `keyword_command`'s list of defaults after DEFAULTS_MARK, those are marked default.

    An entry marked `` (E)`` ("  numpy: numpy/1.12 (E), numpy/1.16.4 (E)") is an
    extension: its name never holds the marker, it is not loadable by that name, and the
    spider answers after EXTENSION_MARK say which modules provide it.
    """
    text, _, rest = text.partition(DEFAULTS_MARK)
    defaults_text, *spiders = rest.split(EXTENSION_MARK)
    defaults = {m.full_name for m in parse_avail(defaults_text)}
    providers = dict(_extension_providers(block) for block in spiders)
    out = []
    for m in _keyword_entries(text):
        if m.extension:
            m = m.model_copy(update={"extension_of": providers.get(m.full_name, ())})
        elif m.full_name in defaults:
            m = m.model_copy(update={"default": True})
        out.append(m)
    return out


_PROVIDED_BY = "This extension is provided by the following modules"


def _extension_providers(block: str) -> tuple[str, tuple[str, ...]]:
    """(extension, the modules that provide it) from one `EXTENSION_MARK name` block:
    the lines under Lmod's "This extension is provided by the following modules." (a
    module in a hierarchy is followed by what must be loaded first, in parentheses)."""
    first, _, body = block.partition("\n")
    name = first.strip()
    providers: list[str] = []
    lines = body.splitlines()
    for i, line in enumerate(lines):
        if _PROVIDED_BY in line:
            for after in lines[i + 1 :]:
                if not after.startswith("       ") or not after.strip():
                    break
                providers.append(after.strip())
            break
    return name, tuple(providers)


#: Lmod's marker of an extension in keyword, avail and spider answers
_EXTENSION = "(E)"


def _keyword_entries(text: str) -> list[Module]:
    out: list[Module] = []
    names: list[str] = []
    description: list[str] = []

    def flush() -> None:
        joined = " ".join(description) or None
        for n in names:
            name, marked = (
                (n[: -len(_EXTENSION)].strip(), True) if n.endswith(_EXTENSION) else (n, False)
            )
            out.append(_module_from(name, description=joined, extension=marked))
        names.clear()
        description.clear()

    for line in text.splitlines():
        if m := re.match(r"^  (\S+): (\S.*)$", line):
            flush()
            names.extend(n.strip() for n in m[2].split(","))
        elif names and line.startswith("    ") and line.strip():
            description.append(line.strip())
        elif names and (not line.strip() or line.startswith("-")):
            flush()
    flush()
    return out


_LMOD_UNKNOWN = re.compile(r"module\(s\) are unknown:\s*((?:\"[^\"]+\"\s*)+)", re.S)
_ENV_UNKNOWN = re.compile(r"Unable to locate a modulefile for '([^']+)'")
_LMOD_ERROR = re.compile(r"Lmod has detected the following error:\s*(.+)")
_ENV_ERROR = re.compile(r"^ERROR:\s*(.+)$", re.M)


_LMOD_HIERARCHY = re.compile(
    r"module\(s\)(?: or extension\(s\))? exist but cannot be loaded as requested:\s*"
    r"((?:\"[^\"]+\"[\s,]*)+)",
    re.S,
)
_SPIDER_HINT = re.compile(r'Try:\s*"(module spider [^"]+)"')


def parse_load_error(text: str) -> ModuleLoadFailure | None:
    """The reason a ``module load`` failed, from its stderr; None when nothing failed."""
    if m := _LMOD_HIERARCHY.search(text):
        names = re.findall(r"\"([^\"]+)\"", m[1])
        hint = _SPIDER_HINT.search(text)
        spider = hint[1] if hint else f"module spider {names[0]}"
        return ModuleLoadFailure(
            modules=names,
            message=f"{', '.join(names)} exist(s) on this site but cannot be loaded yet: the "
            "site's module tree hides it until the modules it was built with (a compiler, an "
            f"MPI) are loaded. Run `{spider}` on the login node to see which to load, and "
            "load those first in the cluster's setup.",
        )
    if m := _LMOD_UNKNOWN.search(text):
        names = re.findall(r"\"([^\"]+)\"", m[1])
    else:
        names = _ENV_UNKNOWN.findall(text)
    if names:
        listed = ", ".join(names)
        return ModuleLoadFailure(
            modules=names,
            message=f"Unknown module: {listed}. Check the name and version with "
            f"'module avail' or 'module spider'.",
        )
    if m := _LMOD_ERROR.search(text) or _ENV_ERROR.search(text):
        return ModuleLoadFailure(modules=[], message=m[1].strip())
    return None


def module_label(m: Module) -> str:
    """How Lmod's own list names it: an alias with its target ("torch -> pytorch/2.13.0";
    a loaded module by the name it was loaded with, "gcc/13 -> gcc/13.2.0")."""
    if m.extension:
        by = f"; module load {' or '.join(m.extension_of)}" if m.extension_of else ""
        return f"{m.full_name} (an extension{by})"
    if m.alias_of:
        return f"{m.full_name} -> {m.alias_of}"
    shown = m.full_name + (
        "{" + ":".join(f"{k}={v}" for k, v in m.variants.items()) + "}" if m.variants else ""
    )
    return f"{m.aliases[0]} -> {shown}" if m.aliases else shown


def listed(
    modules: Iterable[Module], query: str = "", *, show_hidden: bool = False
) -> list[Module]:
    """What a list of available modules shows, as ``module avail`` does: hidden modules
    only with ``show_hidden``, when loaded, or when asked for by their full name (what
    ``module load`` takes: "cuda/12.2", "foo/.2.0"); ``query`` filters by name."""
    q = query.strip().lower()
    return [
        m
        for m in modules
        if (not q or q in m.full_name.lower())
        and (show_hidden or not m.hidden or m.loaded or m.full_name.lower() == q)
    ]


def module_state(
    loaded: list[Module], available: list[Module], setup_failure: ModuleLoadFailure | None = None
) -> ModuleState:
    """Pair a list and an avail output; marks as loaded what avail alone cannot show.

    Each module is listed once: Lmod 8.7.27+ follows a module loaded through an alias with
    the alias's name on a line of its own ("pytorch/2.13.0", then "torch"), which is
    dropped here; a hidden module is marked hidden although Lmod 8.6 lists it bare.
    """
    names = {m.full_name for m in loaded}
    aliases = {m.full_name: m.alias_of for m in available if m.alias_of}
    hidden = {m.full_name for m in available if m.hidden}
    kept: list[Module] = []
    for m in loaded:
        if (target := aliases.get(m.full_name)) in names:  # the alias's own line: its name
            kept = [
                k.model_copy(update={"aliases": (*k.aliases, m.full_name)})
                if k.full_name == target and m.full_name not in k.aliases
                else k
                for k in kept
            ]
            continue
        if m.full_name in {k.full_name for k in kept}:
            continue
        kept.append(m.model_copy(update={"hidden": True}) if m.full_name in hidden else m)
    return ModuleState(
        setup_failure=setup_failure,
        loaded=kept,
        available=[
            m.model_copy(update={"loaded": m.loaded or m.full_name in names}) for m in available
        ],
    )
