"""Training frameworks as hpcui meets them before a job queues: which launcher a piece of
code wants (`launcher="auto"`), and the mistakes that would otherwise surface as a failed
start or a rendezvous that waits forever — a Lightning `Trainer` whose `devices`/`num_nodes`
differ from the allocation, an Accelerate config file of another shape.

Read from the code's text (the script's source, or the callable's own source and the
functions of its module it names): never imported here, so the laptop needs none of
the frameworks installed. Only literal values are checked; a value computed at run time
is left to the framework's own check on the node (Lightning's "does not match").
"""

from __future__ import annotations

import ast
import inspect
import logging
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcui.backends.launch import LAUNCHER_CONFIG
from hpcui.config import ClusterConfig
from hpcui.errors import UsageError
from hpcui.node.runscript import run_script
from hpcui.profiles import Profile
from hpcui.request.allocation import Advice, Allocation
from hpcui.request.resources import Resources

__all__ = [
    "CodeText",
    "LightningTrainer",
    "check_accelerate_config",
    "check_lightning",
    "choose_launcher",
    "code_text",
    "launcher_files",
    "lightning_trainers",
    "module_advice",
    "read_launcher_config",
    "resolve_launcher",
    "with_module_advice",
]

log = logging.getLogger(__name__)
_LIGHTNING = ("lightning", "pytorch_lightning")
#: imported top-level package -> the launcher that runs it the way its guides do
_BY_IMPORT = (
    ("lightning", "lightning"),
    ("pytorch_lightning", "lightning"),
    ("deepspeed", "deepspeed"),
    ("accelerate", "accelerate"),
)
#: Accelerate's distributed types that one `accelerate launch` per node runs through
#: torchrun (MULTI_CPU would ask for mpirun; NO starts one process per node)
_ACCELERATE_TYPES = ("MULTI_GPU", "FSDP")


@dataclass(frozen=True)
class CodeText:
    """The code a job runs, as text: where it came from and its source."""

    where: str  # `train.py`, or `module.function`
    source: str
    #: the function's own source and its helpers', each with its first line in the file
    #: (None for a script: the whole file runs)
    bodies: tuple[tuple[str, int], ...] | None = None


def code_text(fn: Callable[..., Any], args: Sequence[Any] = ()) -> CodeText | None:
    """The source of a call: a script's text (`hpcui run`), else the callable's module,
    with its own body and those of the module's functions it calls. None: no source
    (a built-in, a lambda typed at a prompt): nothing to check."""
    if fn is run_script and len(args) >= 2 and isinstance(args[0], str):
        return CodeText(str(args[1]), args[0])
    fn = inspect.unwrap(fn)  # a decorated function, or a packed map's (node/packed.py)
    # a function, or an instance of a callable class (submitit's Checkpointable): its __call__
    target = fn if inspect.isroutine(fn) else inspect.getattr_static(type(fn), "__call__", None)
    if not inspect.isroutine(target):
        return None
    try:
        module = inspect.getmodule(target)
        module_source = inspect.getsource(module) if module else ""
        bodies = [_lines(target)]
    except (OSError, TypeError):
        return None
    code = getattr(target, "__code__", None)
    if module is not None and code is not None:
        for name in code.co_names:
            helper = getattr(module, name, None)
            if inspect.isfunction(helper) and helper is not target:
                try:
                    bodies.append(_lines(helper))
                except (OSError, TypeError):
                    continue
    where = f"{getattr(module, '__name__', '?')}.{getattr(target, '__qualname__', '?')}"
    return CodeText(where, module_source, tuple(bodies))


def _lines(fn: Any) -> tuple[str, int]:
    lines, first = inspect.getsourcelines(fn)
    return textwrap.dedent("".join(lines)), first


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _imported(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def choose_launcher(code: CodeText | None) -> tuple[str, str]:
    """`launcher="auto"`: the launcher the code's imports call for, and why (said to the
    user). Lightning and DeepSpeed run as one task per rank, Accelerate (and the HF
    Trainer, which runs on it) as `accelerate launch` per node; anything else: submitit."""
    tree = _parse(code.source) if code else None
    imports = _imported(tree) if tree else set()
    for text, _ in (code.bodies or ()) if code else ():
        body_tree = _parse(text)
        imports |= _imported(body_tree) if body_tree else set()
    if "transformers" in imports:
        imports.add("accelerate")
    for package, launcher in _BY_IMPORT:
        if package in imports:
            return (
                launcher,
                f"launcher=auto: {code.where if code else 'the code'} imports {package}: {launcher}",
            )
    where = code.where if code else "the code"
    return "submitit", f"launcher=auto: {where} imports no training framework: submitit"


@dataclass(frozen=True)
class LightningTrainer:
    """A literal `Trainer(...)` of Lightning in the code: what it asks for."""

    line: int
    devices: int | None  # None: not a literal count ("auto", -1, a variable)
    num_nodes: int | None  # None: not a literal; 1 when the keyword is absent


def _lightning_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(names bound to Lightning modules, names bound to Lightning's Trainer)."""
    modules: set[str] = set()
    trainers: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in _LIGHTNING:
                    modules.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] not in _LIGHTNING:
                continue
            for a in node.names:
                if a.name == "Trainer":
                    trainers.add(a.asname or a.name)
                else:
                    modules.add(a.asname or a.name)  # `from lightning import pytorch as pl`
    return modules, trainers


def _is_lightning_trainer(func: ast.expr, modules: set[str], trainers: set[str]) -> bool:
    if isinstance(func, ast.Name):
        return func.id in trainers
    if isinstance(func, ast.Attribute) and func.attr == "Trainer":
        root = func.value
        while isinstance(root, ast.Attribute):
            root = root.value
        return isinstance(root, ast.Name) and root.id in modules
    return False


def _count(node: ast.expr | None) -> int | None:
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            return None
        if isinstance(value, int) and value > 0:
            return value
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
        if isinstance(value, str) and re.fullmatch(r"\s*\d+(\s*,\s*\d+)*\s*,?\s*", value):
            return len([v for v in value.split(",") if v.strip()])  # "0,1": two devices
        return None
    if isinstance(node, (ast.List, ast.Tuple)):
        return len(node.elts)
    return None


def lightning_trainers(code: CodeText) -> list[LightningTrainer]:
    """Every Lightning `Trainer(...)` call in the code that runs (the function's own body
    and its helpers for a callable, the whole file for a script)."""
    tree = _parse(code.source)
    if tree is None:
        return []
    modules, trainers = _lightning_names(tree)
    if not (modules or trainers):
        return []
    parts = [(tree, 1)] if code.bodies is None else [(_parse(t), n) for t, n in code.bodies]
    found = []
    for body, first in parts:
        for node in ast.walk(body) if body is not None else ():
            if not isinstance(node, ast.Call) or not _is_lightning_trainer(
                node.func, modules, trainers
            ):
                continue
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            splat = any(k.arg is None for k in node.keywords)
            nodes = _count(kw.get("num_nodes")) if "num_nodes" in kw else (None if splat else 1)
            line = node.lineno + first - 1  # the line in the file
            found.append(LightningTrainer(line, _count(kw.get("devices")), nodes))
    return found


def check_lightning(code: CodeText, *, nodes: int, ranks_per_node: int) -> None:
    """Refuse a Trainer whose literal devices/num_nodes differ from the job's layout:
    Lightning would refuse at its start on Slurm, and wait at the rendezvous on PBS."""
    for t in lightning_trainers(code):
        wrong = []
        if t.devices is not None and t.devices != ranks_per_node:
            wrong.append(f"devices={t.devices}")
        if t.num_nodes is not None and t.num_nodes != nodes:
            wrong.append(f"num_nodes={t.num_nodes}")
        if not wrong:
            continue
        raise UsageError(
            f"The Lightning Trainer in {code.where} (line {t.line}) asks for "
            f"{' and '.join(wrong)}, but this job starts {ranks_per_node} rank(s) on each of "
            f"{nodes} node(s): Lightning would refuse to start (or wait for ranks that never "
            f"come). Set Trainer(devices={ranks_per_node}, num_nodes={nodes}), or ask for "
            f"nodes={t.num_nodes or nodes} and tasks_per_node={t.devices or ranks_per_node} "
            "(with as many GPUs per node). Nothing was submitted."
        )


def read_launcher_config(path: str) -> bytes:
    """The launcher's config file from this machine, to upload with the job."""
    file = Path(path).expanduser()
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise UsageError(
            f"Cannot read the launcher config {path}: {exc.strerror or exc}. Give the path "
            "of your accelerate config file (as written by `accelerate config`)."
        ) from None
    if len(data) > 1 << 20:
        raise UsageError(f"{path} is {len(data)} bytes: a launcher config is a small YAML file.")
    return data


def _top_level(text: str) -> dict[str, str]:
    """The config's top-level `key: value` lines (YAML at column 0; JSON one level in):
    all hpcui checks."""
    indent = r"\s{0,4}" if text.lstrip().startswith("{") else ""
    found: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(rf'^{indent}"?([A-Za-z_]+)"?\s*:\s*(.*?)\s*,?\s*$', line)
        if m:
            found.setdefault(m.group(1), m.group(2).strip("'\""))
    return found


def check_accelerate_config(data: bytes, name: str, *, nodes: int, ranks_per_node: int) -> None:
    """Refuse a config of another shape or type before the job queues (`accelerate launch`
    would be told the allocation's shape and run something the file did not describe)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{name} is not text: give accelerate's YAML config file.") from None
    keys = _top_level(text)
    kind = keys.get("distributed_type", "")
    if kind and kind not in _ACCELERATE_TYPES:
        raise UsageError(
            f"{name} says distributed_type: {kind}; hpcui runs one `accelerate launch` per "
            f"node through torchrun, which needs {' or '.join(_ACCELERATE_TYPES)} (on nodes "
            "without GPUs hpcui makes it use the CPU itself). Change distributed_type, or run "
            "the script with launcher='submitit'. Nothing was submitted."
        )
    want = {"num_machines": nodes, "num_processes": nodes * ranks_per_node}
    wrong = []
    for key, value in want.items():
        given = keys.get(key, "")
        if given.isdigit() and int(given) != value:
            wrong.append(f"{key}: {given} (this job: {value})")
    if wrong:
        raise UsageError(
            f"{name} describes another shape: {'; '.join(wrong)}. The job has {nodes} node(s) "
            f"x {ranks_per_node} rank(s). Set num_machines: {nodes} and num_processes: "
            f"{nodes * ranks_per_node} in it, or change the request. Nothing was submitted."
        )


def resolve_launcher(
    req: Resources, defaults: dict[str, Any], fn: Callable[..., Any], calls: Sequence[tuple]
) -> tuple[Resources, CodeText | None]:
    """The request with `launcher="auto"` replaced by the launcher the code calls for
    (said in the log; the CLI says it itself), and the code's text for the checks."""
    args = calls[0][0] if calls else ()
    code = code_text(fn, args)
    if req.merged(defaults).launcher != "auto":
        return req, code
    chosen, why = choose_launcher(code)
    log.info("%s", why)
    return Resources(**{**req.model_dump(exclude_unset=True), "launcher": chosen}), code


def launcher_files(req: Resources, alloc: Allocation, code: CodeText | None) -> dict[str, bytes]:
    """Every framework check for the code a job runs, and the files its launcher needs in
    the job folder (Accelerate's config). Raises UsageError before anything is queued."""
    per_node = max(alloc.num_tasks // max(alloc.nodes, 1), 1)
    if code is not None and alloc.launcher != "accelerate":
        check_lightning(code, nodes=alloc.nodes, ranks_per_node=per_node)
    if not req.launcher_config:
        return {}
    if alloc.launcher != "accelerate":
        raise UsageError(
            f"launcher_config= is read by launcher='accelerate' only (this job's launcher: "
            f"{alloc.launcher}). Add launcher='accelerate', or leave the config out; a "
            "DeepSpeed JSON config goes in your script's own arguments."
        )
    data = read_launcher_config(req.launcher_config)
    check_accelerate_config(
        data, Path(req.launcher_config).name, nodes=alloc.nodes, ranks_per_node=per_node
    )
    return {LAUNCHER_CONFIG: data}


def with_module_advice(
    alloc: Allocation, profile: Profile, config: ClusterConfig, python: str | None
) -> Allocation:
    """The allocation with module_advice's hint added, where it has one (`python`: the
    request's own, else the cluster config's)."""
    setup = config.setup or profile.setup
    hint = module_advice(alloc, profile, setup=setup, python=python or config.python)
    return alloc.model_copy(update={"advice": (*alloc.advice, hint)}) if hint else alloc


def module_advice(
    alloc: Allocation, profile: Profile, *, setup: Sequence[str], python: str | None
) -> Advice | None:
    """Where the site's guide names the module that carries a framework (CSC: pytorch) and
    the job neither loads it nor names a Python of its own: say so before it queues."""
    module = profile.framework_modules.get(alloc.launcher)
    if not module or (python and "/" in python):  # a venv's python: the user's own choice
        return None
    loaded = " ".join([*setup, *alloc.modules])
    if re.search(rf"(?<![\w/.-]){re.escape(module)}(?![\w-])", loaded):
        return None
    return Advice(
        code="framework-module",
        message=(
            f"{alloc.launcher} on {profile.name} comes with `module load {module}` (the site's "
            f"guide): add modules=[{module!r}] (--modules {module}), or put it in the "
            "cluster's setup lines."
        ),
        suggestion={"modules": [*alloc.modules, module]},
    )
