"""The layering, checked and not only written (docs/architecture.md, "Layers").

Every import counts: module level, inside functions and under TYPE_CHECKING. The repo's
top-level backends/ folder is the package ``hpcui.backends``.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

SCHEDULER_COMMANDS = {"sbatch", "squeue", "sacct", "scancel", "sinfo", "scontrol", "srun"}
SCHEDULER_COMMANDS |= {"qsub", "qstat", "qdel", "qselect", "pbsnodes"}
#: what a face may take from the dialects: neutral records and enums, no command lines
FACE_BACKENDS = {
    "hpcui.backends.records": None,  # any name
    "hpcui.backends.states": None,
    "hpcui.backends.modules": {"Module"},
    "hpcui.backends.model": {"Model"},  # the one pydantic base (schemas built on first use)
}


#: the agent's socket (standard library; no SSH): its name, frames and reach
FACE_AGENT_LINK = {
    "hpcui.transport.agent.paths",
    "hpcui.transport.agent.wire",
    "hpcui.transport.agent.reach",
}


@cache
def modules() -> dict[str, Path]:
    out = {}
    for folder, prefix in ((ROOT / "hpcui", ["hpcui"]), (ROOT / "backends", ["hpcui", "backends"])):
        for path in folder.rglob("*.py"):
            parts = [*prefix, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _resolve(name: str) -> str | None:
    mods = modules()
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str) -> Iterator[tuple[str, tuple[str, ...], int]]:
    """(absolute module imported, names taken from it, line) for every import statement."""
    path = modules()[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, (), node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            yield target, tuple(a.name for a in node.names), node.lineno


@cache
def graph() -> dict[str, set[str]]:
    """hpcui module -> the hpcui modules it imports (a submodule named in a from-import
    counts as the submodule)."""
    edges: dict[str, set[str]] = {m: set() for m in modules()}
    for module in modules():
        for target, names, _line in imports(module):
            if not target.startswith("hpcui"):
                continue
            for name in names or ("",):
                full = f"{target}.{name}" if name else target
                dep = full if full in modules() else _resolve(target)
                if dep and dep != module:
                    edges[module].add(dep)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def under(prefix: str) -> list[str]:
    return [m for m in modules() if m == prefix or m.startswith(prefix + ".")]


def test_no_import_cycle_inside_hpcui():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_one():
    """The check above can fail: a loop like the old app <-> screens one is reported."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c"]]


def test_backends_import_nothing_of_hpcui_and_only_pydantic_beyond_the_stdlib():
    bad = []
    for module in under("hpcui.backends"):
        for target, _names, line in imports(module):
            top = target.split(".")[0]
            if target.startswith("hpcui.backends"):
                continue  # its own modules, imported relatively
            if top in ("hpcui", "backends") or not (
                top in sys.stdlib_module_names or top in ("__future__", "pydantic")
            ):
                bad.append(f"{module}:{line} imports {target}")
    assert bad == []


#: standard-library-only modules every floor may use
LEAVES = (
    "hpcui.errors",
    "hpcui.version",
    "hpcui.common",
    "hpcui.common.clock",
    "hpcui.common.config_path",
    "hpcui.common.file_lock",
    "hpcui.common.formatting",
    "hpcui.common.units",
)
#: the floors, bottom up (docs/architecture.md, "Layers"); the agent's client side is a
#: transport (hpcui.transport.agent), its server side hosts the CLI and sits above the faces
FLOORS = ("dialects", "leaves", "transport", "core", "faces", "agent")


def floor(module: str) -> int:
    if module.startswith("hpcui.backends"):
        return FLOORS.index("dialects")
    if module in LEAVES:
        return FLOORS.index("leaves")
    if module.startswith("hpcui.transport"):
        return FLOORS.index("transport")
    if module.startswith(("hpcui.cli", "hpcui.tui")):
        return FLOORS.index("faces")
    if module.startswith("hpcui.agent"):
        return FLOORS.index("agent")
    return FLOORS.index("core")


def test_no_import_goes_up_a_floor():
    """Every import, lazy ones and TYPE_CHECKING ones included, points down or sideways."""
    up = [
        f"{m} ({FLOORS[floor(m)]}) -> {d} ({FLOORS[floor(d)]})"
        for m, deps in sorted(graph().items())
        for d in sorted(deps)
        if floor(d) > floor(m)
    ]
    assert up == []


def test_the_floor_check_sees_an_arrow_up():
    """The check above can fail: the old `cli.common -> agent.routing` is an arrow up."""
    assert floor("hpcui.cli.common") < floor("hpcui.agent.server")
    assert (
        floor("hpcui.transport.agent.remote")
        < floor("hpcui.clusters.api")
        < floor("hpcui.cli.main")
    )


def test_leaves_import_nothing_of_hpcui():
    bad = [
        f"{module}:{line} imports {target}"
        for module in LEAVES
        for target, _names, line in imports(module)
        if target.startswith("hpcui")
    ]
    assert bad == []


def test_transport_imports_nothing_above_it():
    # the pure dialect layer lies below it (Transport.free_bytes reads df with parse_df)
    allowed = ("hpcui.transport", "hpcui.backends", *LEAVES)
    bad = [
        f"{module}:{line} imports {target}"
        for module in under("hpcui.transport")
        for target, _names, line in imports(module)
        if target.startswith("hpcui") and not target.startswith(allowed)
    ]
    assert bad == []


def test_faces_never_import_ssh_transports_schedulers_or_dialect_commands():
    bad = []
    for module in under("hpcui.cli") + under("hpcui.tui"):
        for target, names, line in imports(module):
            where = f"{module}:{line} imports {target}"
            if target in FACE_AGENT_LINK or (
                target == "hpcui.transport.agent" and set(names) <= {"paths", "wire", "reach"}
            ):
                continue  # `hpcui agent status|stop` and the routing of prompts speak to it
            if target.split(".")[0] == "paramiko" or target.startswith(
                ("hpcui.transport", "hpcui.schedulers")
            ):
                bad.append(where)
            elif target.startswith("hpcui.backends"):
                allowed = FACE_BACKENDS.get(target, set())
                if allowed is not None and not set(names) <= allowed:
                    bad.append(f"{where} ({', '.join(names)})")
    assert bad == []


def test_faces_run_no_scheduler_command_themselves():
    bad = []
    for module in under("hpcui.cli") + under("hpcui.tui"):
        tree = ast.parse(modules()[module].read_text())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            first = node.args[0]
            if isinstance(first, ast.List) and first.elts:
                first = first.elts[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                word = first.value.split()[0] if first.value.split() else ""
                if word in SCHEDULER_COMMANDS:
                    bad.append(f"{module}:{node.lineno} runs {first.value!r}")
    assert bad == []


def test_packages_in_pyproject_are_the_packages_on_disk():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {m for m, p in modules().items() if p.name == "__init__.py"}
    # Hydra's launcher: a package of the `hydra_plugins` namespace, which other Hydra plugins
    # share, so the namespace itself has no __init__.py (Hydra finds launchers only there)
    plugins = ROOT / "hydra_plugins"
    assert not (plugins / "__init__.py").exists()
    on_disk |= {f"hydra_plugins.{p.parent.name}" for p in plugins.glob("*/__init__.py")}
    assert set(config["packages"]) == on_disk
    assert "package-dir" not in config  # the symlink below, not a mapping mypy cannot follow
    link = ROOT / "hpcui" / "backends"
    assert link.is_symlink() and link.readlink() == Path("..") / "backends"


@pytest.mark.timeout(240)
def test_the_wheel_installs_no_top_level_backends(tmp_path):
    """`pip install hpcui` must not put a package named `backends` in site-packages: a
    user's own `backends` package would collide with it (pickling and on the node). The
    wheel carries py.typed and the LICENSE, and installs into a fresh venv whose `hpcui
    --version` answers (the thin entry point needs nothing beyond the standard library)."""
    src = tmp_path / "src"  # a copy: building writes build/ beside pyproject.toml
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(ROOT / "hpcui", src / "hpcui", ignore=skip, symlinks=True)
    shutil.copytree(ROOT / "backends", src / "backends", ignore=skip)
    shutil.copytree(ROOT / "hydra_plugins", src / "hydra_plugins", ignore=skip)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    wheel_cmd = [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps"]
    subprocess.run(
        [*wheel_cmd, "--no-build-isolation", "-q", "-w", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("hpcui-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if "/" in n and ".dist-info" not in n}
    assert tops == {"hpcui", "hydra_plugins"}  # the namespace Hydra takes launchers from
    assert "hydra_plugins/__init__.py" not in names  # a namespace other plugins share
    assert "hydra_plugins/hpcui_launcher/hpcui_launcher.py" in names
    assert "hpcui/backends/slurm/script.py" in names and "hpcui/backends/job_paths.py" in names
    assert "hpcui/py.typed" in names
    assert any(
        n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE") for n in names
    )
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    metadata = zipfile.ZipFile(wheel).read(meta).decode()
    assert "License-File: LICENSE" in metadata or "License: MIT" in metadata
    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "--no-deps", "-q", str(wheel)],
        check=True, capture_output=True,
    )  # fmt: skip
    done = subprocess.run(
        [str(venv / "bin" / "hpcui"), "--version"], capture_output=True, text=True, timeout=60
    )
    from hpcui.version import __version__

    assert done.returncode == 0 and __version__ in done.stdout, done.stdout + done.stderr


def test_faces_reach_status_transport_and_registry_only_through_cluster():
    """Issue 37: a face asks its Cluster (records, job_status, refresh_states, track,
    watch_stall, prompt) instead of reaching into its parts; the registry it may read is the
    read-only `JobRecords` (list, get)."""
    bad = []
    for module in under("hpcui.cli") + under("hpcui.tui"):
        tree = ast.parse(modules()[module].read_text())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)):
                continue
            part, use = node.value.attr, node.attr
            if part in ("status", "transport") or (
                part == "registry" and use not in ("list", "get", "path")
            ):
                bad.append(f"{module}:{node.lineno} reaches .{part}.{use}")
    assert bad == []


#: the `type: ignore`s hpcui/ and backends/ may keep (issue 37), each saying why
MAX_TYPE_IGNORES = 15


def type_ignores() -> list[tuple[str, int, str]]:
    found = []
    for module, path in modules().items():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "# type: ignore" in line:
                found.append((module, number, line.split("# type: ignore", 1)[1]))
    return found


def test_few_type_ignores_and_each_says_why():
    ignores = type_ignores()
    assert len(ignores) <= MAX_TYPE_IGNORES, [f"{m}:{n}" for m, n, _ in ignores]
    silent = [f"{m}:{n}" for m, n, rest in ignores if "#" not in rest]  # `[code]  # why`
    assert silent == []


def lazy_imports() -> list[tuple[str, int, str]]:
    """(module, line, the statement's text) of every import inside a function."""
    found = []
    for module, path in modules().items():
        source = path.read_text()
        lines = source.splitlines()
        for fn in ast.walk(ast.parse(source)):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        text = "\n".join(lines[node.lineno - 1 : node.end_lineno])
                        found.append((module, node.lineno, text))
    return found


#: why an import sits inside a function, by what it imports: the start-up cost measured
#: (`python -X importtime -c "import X"` on the dev machine), or why it may be absent
LAZY_BY_TARGET = {
    "torch": "2 s: only where a job uses it",
    "paramiko": "0.13 s: SSH clusters only",
    "pydantic": "0.19 s with hpcui's models: when a command prints one",
    "hpcui.cli.models": "pydantic (0.19 s): when a command prints its model",
    "textual": "0.17 s: when the app or a dialog shows",
    "textual_serve": "textual (0.17 s) and aiohttp: `hpcui serve` only",
    "submitit": "0.06 s: on the node, or when a call is submitted",
    "cloudpickle": "when a call is pickled",
    "platformdirs": "0.04 s: when a path is asked",
    "IPython": "present only where IPython runs",
}
#: why an import sits inside a function, by where it sits
LAZY_BY_IMPORTER = {
    "hpcui.cli": "the CLI's fast path: `hpcui --help` imports argparse alone; the core "
    "(0.16 s: pydantic, the clusters, the transports) loads when a command runs",
    "hpcui.tui": "textual screens: the core and each dialog load when first shown",
    "hpcui.agent": "the agent loads a cluster's parts when a call needs them",
    "hpcui.node": "on the node: only what this job step runs",
    "hpcui.clusters.parts": "the one transport and scheduler adapter chosen (an SSH "
    "cluster never imports the local one)",
    "hpcui.transport": "the transport chosen at run time only",
}


def lazy_reason(module: str, text: str) -> str | None:
    if "#" in text:
        return text.split("#", 1)[1].strip()
    tree = ast.parse(textwrap.dedent(text))
    node = tree.body[0]
    target = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
    for key, why in LAZY_BY_TARGET.items():
        if target == key or (target or "").startswith(key + "."):
            return why
    for key, why in LAZY_BY_IMPORTER.items():
        if module == key or module.startswith(key + "."):
            return why
    return None


def test_every_import_inside_a_function_has_a_reason():
    """An import sits inside a function for a measured start-up cost, for code that runs
    on the node, or for a platform's module: the tables above say which, once; a comment
    beside the import says a reason of its own."""
    silent = [f"{m}:{n}: {t.strip()}" for m, n, t in lazy_imports() if lazy_reason(m, t) is None]
    assert silent == []


def test_no_comment_quotes_an_import_cost():
    """The costs live in the tables above, not copied beside each import."""
    cost = re.compile(
        r"#.*\b(?:torch|textual|paramiko|pydantic|the core|submitit)\b.*\(\d+(?:\.\d+)? s\)"
    )
    quoted = [
        f"{m}:{n}"
        for m, path in modules().items()
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if cost.search(line)
    ]
    assert quoted == []


def test_the_lazy_import_check_sees_one():
    assert any(m == "hpcui.clusters.parts" for m, _n, _t in lazy_imports())


#: the folders, bottom up (docs/architecture.md, "The folders"): an import between two of
#: them points down this list, never up. A top-level module (the public `hpcui.distributed`,
#: `hpcui.live`, `hpcui.metrics`, the leaves) counts as a folder of its own.
FOLDERS = (
    # dialects: text in, typed records out; shared records at the root, then each scheduler
    "hpcui.backends", "hpcui.backends.slurm", "hpcui.backends.pbs",
    # leaves: standard library only
    "hpcui.errors", "hpcui.version", "hpcui.common",
    # the compute node: what the runtime bundle runs there
    "hpcui.distributed", "hpcui.node",
    # reaching a cluster
    "hpcui.transport", "hpcui.transport.ssh", "hpcui.transport.agent",
    # the core, bottom up: what a job asks for, what jobs/ and submit/ share (store), jobs
    "hpcui.profiles", "hpcui.config", "hpcui.request", "hpcui.schedulers", "hpcui.store",
    "hpcui.logs", "hpcui.live", "hpcui.jobs", "hpcui.submission", "hpcui.services",
    "hpcui.sitestate", "hpcui.trackers", "hpcui.clusters", "hpcui.metrics", "hpcui.sweeps",
    "hpcui",
    # the faces, then the agent that hosts the CLI
    "hpcui.tui", "hpcui.cli", "hpcui.agent",
)  # fmt: skip


def folder_of(module: str) -> str:
    best = ""
    for f in FOLDERS:
        if (module == f or (f != "hpcui" and module.startswith(f + "."))) and len(f) > len(best):
            best = f
    assert best, f"{module} is in no folder of FOLDERS"
    return best


def folder_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {f: set() for f in FOLDERS}
    for module, deps in edges.items():
        for dep in deps:
            a, b = folder_of(module), folder_of(dep)
            if a != b:
                out[a].add(b)
    return out


def arrows_up(folders: dict[str, set[str]]) -> list[str]:
    return [
        f"{a} -> {b}"
        for a, deps in sorted(folders.items())
        for b in sorted(deps)
        if FOLDERS.index(b) > FOLDERS.index(a)
    ]


def test_every_module_lies_in_a_named_folder():
    homeless = []
    for module in modules():
        try:
            folder_of(module)
        except AssertionError:
            homeless.append(module)
    assert homeless == []
    top = {m for m in modules() if m.count(".") == 1 and m != "hpcui.backends"}
    assert top <= set(FOLDERS), top - set(FOLDERS)


def test_imports_between_folders_point_down_and_never_loop():
    folders = folder_graph(graph())
    assert arrows_up(folders) == []
    assert cycles(folders) == []


def test_the_folder_check_sees_an_arrow_up_and_a_loop():
    """The check above can fail: jobs/ importing submission/ (as the flat job.py once imported
    submission.py) is an arrow up, and with submission/ -> jobs/ a loop."""
    edges = {m: set(d) for m, d in graph().items()}
    edges["hpcui.jobs.job"].add("hpcui.submission.submitter")
    folders = folder_graph(edges)
    assert arrows_up(folders) == ["hpcui.jobs -> hpcui.submission"]
    folders["hpcui.submission"].add("hpcui.jobs")
    assert ["hpcui.jobs", "hpcui.submission"] in cycles(folders)


#: what a comment in the package may not point at: a tracker number (it means nothing in a
#: clone) or a file outside the repo
OUTSIDE = re.compile(r"\bissues? #?\d+|\.\./shared|DESIGN\.md|SITES\.md")


def outside_references(texts: dict[str, str]) -> list[str]:
    return [
        f"{name}:{n}"
        for name, text in texts.items()
        for n, line in enumerate(text.splitlines(), 1)
        if OUTSIDE.search(line)
    ]


def test_no_comment_names_an_issue_or_a_file_outside_the_repo():
    texts = {m: p.read_text() for m, p in modules().items()}
    for folder in (ROOT / "hpcui", ROOT / "backends"):
        for path in folder.rglob("*"):
            if path.suffix in (".toml", ".tcss"):
                texts[str(path.relative_to(ROOT))] = path.read_text()
    assert outside_references(texts) == []


def test_the_outside_reference_check_sees_one():
    assert outside_references({"a": "x = 1  # see issue 35\n", "b": "# ../shared/SITES.md"}) == [
        "a:1",
        "b:1",
    ]


MAX_LINES = 500


def test_no_module_over_500_lines_without_its_reason():
    """A module does one job; one that is longer says why in its docstring ("Over 500
    lines: ..."). Tests and the dev-cluster scripts are not counted."""
    unsaid = []
    for module, path in modules().items():
        text = path.read_text()
        if text.count("\n") > MAX_LINES and "Over 500 lines:" not in (
            ast.get_docstring(ast.parse(text)) or ""
        ):
            unsaid.append(f"{module} ({text.count(chr(10))} lines)")
    assert unsaid == []
