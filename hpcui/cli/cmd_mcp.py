"""`hpcui mcp`: an MCP server on stdio (the `mcp` SDK) for AI agents: hpcui's verbs as
tools (hpcui.cli.mcp_tools), each call one `hpcui ... --json` through the agent.

Read-only unless the config's `[mcp] allow` names more. A client registers it as a stdio
server whose command is `hpcui mcp` (docs/mcp.md has the JSON snippet).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

from hpcui.cli import EXIT_OK
from hpcui.cli import mcp_tools as tools
from hpcui.errors import UsageError

#: one tool call at most this long (a download of a large folder included)
CALL_TIMEOUT_S = 600.0


def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        import anyio
        import mcp  # noqa: F401  (the SDK, checked before anything starts)
    except ImportError:
        raise UsageError(
            "`hpcui mcp` needs the MCP SDK, which is not installed: pip install 'hpcui[mcp]'."
        ) from None
    from hpcui.config import load_config

    allowed = load_config().mcp.allowed()
    anyio.run(_serve, allowed)
    return EXIT_OK


def output_schema(tool: tools.Tool) -> dict[str, Any]:
    """The tool's result as `{"result": <the --json output>}`, with that command's model."""
    from hpcui.cli.models import output_type, schema
    from hpcui.cli.parser import shared_parser

    argv = tool.schema_argv or tool.argv(_sample(tool))
    inner = schema(output_type(shared_parser().parse_args([argv[0], "--json", *argv[1:]])))
    if tool.name == "logs":  # JSON lines of chunks: one per task, its last lines
        inner = {"type": "array", "items": inner}
    defs = inner.pop("$defs", {})
    return {"type": "object", "properties": {"result": inner}, "required": ["result"],
            **({"$defs": defs} if defs else {})}  # fmt: skip


def _sample(tool: tools.Tool) -> dict[str, Any]:
    return {
        "job": "1", "jobs": ["1"], "path": "x", "script": "x.py",
    }  # fmt: skip


def run_hpcui(argv: list[str]) -> tuple[int, str, str]:
    """`hpcui ARGV` as its own process, through the agent like any call (no terminal:
    a cluster that needs a 2FA code and has no login yet says so)."""
    res = subprocess.run(
        [sys.executable, "-m", "hpcui.cli", *argv],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CALL_TIMEOUT_S,
    )  # fmt: skip
    return res.returncode, res.stdout, res.stderr


def parse_output(tool: tools.Tool, text: str, arguments: dict[str, Any]) -> Any:
    text = text.strip()
    if tool.name != "logs":
        return json.loads(text) if text else None
    chunks = [json.loads(line) for line in text.splitlines() if line.strip()]
    return tail_chunks(chunks, int(arguments.get("tail") or 200))


def tail_chunks(chunks: list[dict[str, Any]], lines: int) -> list[dict[str, Any]]:
    """One chunk per task and stream: its last `lines` lines, `offset` where they start."""
    joined: dict[tuple[int, str], dict[str, Any]] = {}
    for c in chunks:
        key = (int(c["task"]), str(c["stream"]))
        if key in joined:
            joined[key]["text"] += c["text"]
        else:
            joined[key] = dict(c)
    out = []
    for c in joined.values():
        whole = c["text"]
        kept = "".join(whole.splitlines(keepends=True)[-lines:])
        skipped = len(whole.encode()) - len(kept.encode())
        out.append({**c, "text": kept, "offset": int(c["offset"]) + skipped})
    return out


def call(name: str, arguments: dict[str, Any], allowed: set[str]) -> tuple[bool, Any, str]:
    """(ok, structured result, text for the model) of one tool call."""
    tool = tools.BY_NAME.get(name)
    if tool is None:
        return False, None, f"No tool {name!r} (tools: {', '.join(tools.BY_NAME)})."
    if tool.acts and name not in allowed:
        return False, None, tools.refusal(name)
    try:
        argv = tools.command_line(tool, arguments)
    except (KeyError, ValueError, TypeError) as exc:
        return False, None, f"Bad arguments for {name}: {exc}"
    code, stdout, stderr = run_hpcui(argv)
    if code != 0:
        said = stderr.strip() or stdout.strip() or f"exit status {code}"
        return False, None, f"`hpcui {' '.join(argv)}` failed (exit {code}): {said}"
    value = parse_output(tool, stdout, arguments)
    return True, value, json.dumps(value, indent=1)


async def _serve(allowed: set[str]) -> None:
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    from hpcui.version import __version__

    offered = [t for t in tools.TOOLS if not t.acts or t.name in allowed]
    listing = [
        types.Tool(
            name=t.name, description=t.description, input_schema=tools.input_schema(t),
            output_schema=output_schema(t),
            annotations=types.ToolAnnotations(read_only_hint=not t.acts,
                                              destructive_hint=t.name == "cancel"),
        )
        for t in offered
    ]  # fmt: skip

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        ok, value, text = await anyio.to_thread.run_sync(call, params.name, arguments, allowed)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content={"result": value} if ok else None,
            is_error=not ok,
        )

    server: Server[Any] = Server(
        "hpcui", version=__version__, on_list_tools=list_tools, on_call_tool=call_tool,
        instructions="hpcui: your jobs on HPC clusters (Slurm, PBS) through one login.",
    )  # fmt: skip
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
