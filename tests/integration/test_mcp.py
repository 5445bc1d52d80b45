"""`hpcui mcp` driven by the `mcp` SDK's own client over stdio, against the dev cluster:
the tools listed (read-only ones only, by default), `jobs` and `logs` of a real job, a
`cancel` refused with how to allow it, and with `[mcp] allow = ["cancel"]` one that
cancels a running job. Every call goes through the agent (one login)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.integration.test_agent import hpcui, logins

pytestmark = pytest.mark.devcluster

HELLO = """\
import sys
for i in range(5):
    print(f"mcp-line {i}", flush=True)
"""
SLEEPER = "import time\ntime.sleep(300)\n"


def session_calls(
    env: dict[str, str], calls: list[tuple[str, dict[str, Any]]]
) -> tuple[list[str], list[Any]]:
    """The tools listed and each call's result, over one stdio session."""

    async def go() -> tuple[list[str], list[Any]]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "hpcui.cli", "mcp"], env=env
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            listed = await s.list_tools()
            results = [await s.call_tool(name, args) for name, args in calls]
            return [t.name for t in listed.tools], results

    return anyio.run(go)


def test_an_mcp_client_lists_reads_and_is_refused_then_allowed_to_cancel(agent_env, tmp_path):
    env = dict(agent_env("5m"), HOME=str(tmp_path))
    (tmp_path / "hello.py").write_text(HELLO)
    done = hpcui(
        env,
        "-c",
        "dev",
        "run",
        "--time",
        "5m",
        "--wait",
        "--json",
        str(tmp_path / "hello.py"),
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    job_id = json.loads(done.stdout)["job_id"]

    names, (jobs, logs, refused) = session_calls(
        env,
        [
            ("jobs", {"cluster": "dev", "history_days": 1}),
            ("logs", {"cluster": "dev", "job": job_id, "tail": 2}),
            ("cancel", {"cluster": "dev", "jobs": [job_id]}),
        ],
    )
    assert "jobs" in names and "logs" in names and "show" in names
    assert not {"cancel", "submit", "hold", "release", "download"} & set(names)  # read-only
    assert not jobs.is_error, jobs.content
    assert job_id in {row["job_id"] for row in jobs.structured_content["result"]}
    assert not logs.is_error, logs.content
    (chunk,) = logs.structured_content["result"]
    assert chunk["text"] == "mcp-line 3\nmcp-line 4\n"  # the last two lines
    assert refused.is_error
    assert '[mcp] allow = ["cancel"]' in refused.content[0].text

    # allowed: a running job is cancelled through the tool
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    config = tmp_path / "hpcui.toml"
    config.write_text(config.read_text() + '\n[mcp]\nallow = ["cancel"]\n')
    started = hpcui(
        env, "-c", "dev", "run", "--time", "5m", "--json", str(tmp_path / "sleeper.py"), timeout=120
    )
    assert started.returncode == 0, started.stderr
    sleeper = json.loads(started.stdout)["job_id"]
    names, (cancelled,) = session_calls(env, [("cancel", {"cluster": "dev", "jobs": [sleeper]})])
    assert "cancel" in names and "submit" not in names
    assert not cancelled.is_error, cancelled.content
    deadline = time.monotonic() + 60
    while True:
        shown = json.loads(hpcui(env, "-c", "dev", "show", "--json", sleeper).stdout)
        if shown["state"] == "CANCELLED":
            break
        assert time.monotonic() < deadline, shown["state"]
        time.sleep(1)
    assert logins(env, "dev") == 1  # the server's calls shared the agent's one login
