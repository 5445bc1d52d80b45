"""hpcui's verbs as MCP tools: what each takes, the `hpcui` command line it runs, and the
JSON model of what it returns (the same model as `hpcui CMD --json-schema`).

Every call is one `hpcui ... --json` through the agent (one login per cluster, its 2FA
answered once in a terminal); nothing here reaches a cluster itself. Tools that change
something (submit, cancel, hold, release, download) are offered only when the config's
`[mcp] allow` names them; a call to one that is not allowed says how to allow it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hpcui.config import MCP_ACTIONS
from hpcui.request.fields import REQUEST_FIELDS

_STR = {"type": "string"}
_JOB = {"type": "string", "description": "a job id (as `hpcui jobs` shows it)"}
_JOBS = {"type": "array", "items": _JOB, "minItems": 1}
_CLUSTER = {"type": "string", "description": "a cluster of the config (default: its default)"}
_RESOURCES = {
    "type": "object",
    "description": "resources, by the names of `hpcui submit --help` (gpus, time, nodes, ...)",
    "additionalProperties": {"type": ["string", "integer", "number", "boolean"]},
}


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    #: JSON schema properties of the arguments (cluster is added to every tool)
    properties: dict[str, Any]
    argv: Callable[[dict[str, Any]], list[str]]
    required: tuple[str, ...] = ()
    #: changes something: offered only when `[mcp] allow` names it
    acts: bool = False
    #: the output model's command line (for its schema), when it differs from argv's
    schema_argv: list[str] = field(default_factory=list)


def resource_flags(resources: dict[str, Any] | None) -> list[str]:
    """`{"gpus": 4, "time": "1h"}` -> `--gpus 4 --time 1h`; unknown names refused."""
    known = {f.keyword: f for f in REQUEST_FIELDS}
    out: list[str] = []
    for name, value in (resources or {}).items():
        if name not in known:
            raise ValueError(f"unknown resource {name!r} (known: {', '.join(sorted(known))})")
        flag = known[name].flag
        if value is True:
            out.append(flag)
        elif value is not False and value is not None:
            out += [flag, str(value)]
    return out


def _jobs_argv(a: dict[str, Any]) -> list[str]:
    argv = ["jobs"]
    if a.get("all"):
        argv.append("--all")
    if a.get("history_days"):
        argv += ["--history", str(a["history_days"])]
    if a.get("state"):
        argv += ["--state", str(a["state"])]
    return argv


def _logs_argv(a: dict[str, Any]) -> list[str]:
    argv = ["logs", str(a["job"]), "--quiet-runtime"]
    if a.get("stderr"):
        argv.append("--stderr")
    if a.get("rank") is not None:
        argv += ["--rank", str(int(a["rank"]))]
    return argv


TOOLS: tuple[Tool, ...] = (
    Tool("clusters", "The clusters hpcui is configured for.", {}, lambda a: ["clusters"]),
    Tool(
        "jobs",
        "Your jobs in the queue (hpcui's, or all with all=true), or the history of the last "
        "history_days days.",
        {
            "all": {"type": "boolean"},
            "history_days": {"type": "number", "exclusiveMinimum": 0},
            "state": {"type": "string", "description": "e.g. running,pending"},
        },
        _jobs_argv,
    ),
    Tool(
        "show",
        "One job: state, folder, tasks, exit code, efficiency.",
        {"job": _JOB},
        lambda a: ["show", str(a["job"])],
        required=("job",),
    ),
    Tool(
        "logs",
        "The last lines of a job's stdout (or stderr), all ranks unless rank is given.",
        {
            "job": _JOB,
            "stderr": {"type": "boolean"},
            "rank": {"type": "integer", "minimum": 0},
            "tail": {"type": "integer", "minimum": 1, "maximum": 5000, "default": 200},
        },
        _logs_argv,
        required=("job",),
    ),
    Tool(
        "metrics",
        "The numbers a job's log printed (loss, accuracy...) per step.",
        {"jobs": _JOBS},
        lambda a: ["metrics", *map(str, a["jobs"])],
        required=("jobs",),
    ),
    Tool("quota", "Disk quota on the cluster (the site's tool, or df).", {}, lambda a: ["quota"]),
    Tool("modules", "Loaded environment modules.", {}, lambda a: ["modules"]),
    Tool("free", "Free CPUs and GPUs per partition now.", {}, lambda a: ["free"]),
    Tool(
        "budget",
        "Fair share, pending jobs' priority, the project's usage.",
        {},
        lambda a: ["budget"],
    ),
    Tool(
        "script",
        "The batch script a request would submit (nothing is submitted).",
        {"resources": _RESOURCES},
        lambda a: ["script", *resource_flags(a.get("resources"))],
        schema_argv=["script"],
    ),
    Tool(
        "submit",
        "Run a Python script (a file on this machine) on the cluster as a job.",
        {
            "script": {"type": "string", "description": "path of a .py file here"},
            "args": {"type": "array", "items": _STR},
            "resources": _RESOURCES,
        },
        lambda a: [
            "run",
            *resource_flags(a.get("resources")),
            str(a["script"]),
            *map(str, a.get("args") or []),
        ],
        required=("script",),
        acts=True,
        schema_argv=["run", "x.py"],
    ),
    Tool(
        "cancel",
        "Cancel jobs.",
        {"jobs": _JOBS},
        lambda a: ["cancel", *map(str, a["jobs"])],
        required=("jobs",),
        acts=True,
    ),
    Tool(
        "hold",
        "Keep pending jobs from starting.",
        {"jobs": _JOBS},
        lambda a: ["hold", *map(str, a["jobs"])],
        required=("jobs",),
        acts=True,
    ),
    Tool(
        "release",
        "Let held jobs start.",
        {"jobs": _JOBS},
        lambda a: ["release", *map(str, a["jobs"])],
        required=("jobs",),
        acts=True,
    ),
    Tool(
        "download",
        "Copy a file or folder of a job's folder to this machine.",
        {
            "job": _JOB,
            "path": {"type": "string", "description": "inside the job's folder"},
            "dest": {"type": "string", "description": "here (default: the current folder)"},
        },
        lambda a: [
            "download",
            str(a["job"]),
            str(a["path"]),
            *([str(a["dest"])] if a.get("dest") else []),
        ],
        required=("job", "path"),
        acts=True,
    ),
)

BY_NAME = {t.name: t for t in TOOLS}
ACTING = MCP_ACTIONS


def input_schema(tool: Tool) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {**tool.properties, "cluster": _CLUSTER},
        "required": list(tool.required),
        "additionalProperties": False,
    }


def command_line(tool: Tool, arguments: dict[str, Any]) -> list[str]:
    """The `hpcui` arguments of one call: `-c CLUSTER VERB --json ...` (--json before
    the rest: after a script's name everything is the script's)."""
    cluster = arguments.get("cluster")
    head = ["-c", str(cluster)] if cluster else []
    verb, *rest = tool.argv(arguments)
    return [*head, verb, "--json", *rest]


def refusal(name: str) -> str:
    return (
        f"`{name}` changes your jobs and is not allowed for MCP clients by your hpcui config. "
        f'To allow it, add to the config: [mcp] allow = ["{name}"] (names: '
        f'{", ".join(ACTING)}; or "all"), then restart the MCP server.'
    )
