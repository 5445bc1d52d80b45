"""A laptop without fcntl, termios and unix sockets (native Windows), by SIMULATION.

Nothing here can run Windows or macOS. tests/support/no_posix/sitecustomize.py hides from
a real interpreter what Windows' Python lacks (fcntl, termios, tty, pty, pwd, grp,
resource, socket.AF_UNIX and SO_PEERCRED); the API, the CLI and the app then run against
the dev cluster in that interpreter: direct connections (no agent, said in one line),
file locks by the last resort, `hpcui shell` refused in words. The macOS peer check
(LOCAL_PEERCRED) is checked on its struct in tests/unit/test_agent_parts.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import DEVCLUSTER, ROOT

pytestmark = pytest.mark.devcluster

NO_POSIX = ROOT / "tests" / "support" / "no_posix"


@pytest.fixture
def windows_like(devcluster: Path, tmp_path: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "HPCUI_CONFIG": str(DEVCLUSTER / "hpcui.toml"),
        "HPCUI_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": os.pathsep.join([str(NO_POSIX), str(ROOT)]),
        "NO_COLOR": "1",
        "USERNAME": os.environ.get("USER", "root"),  # what Windows sets (no USER, no pwd)
    }


def py(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def test_the_simulation_hides_what_windows_lacks(windows_like):
    probe = py(
        windows_like,
        "-c",
        "import socket, importlib.util\n"
        "for m in ('fcntl', 'termios', 'tty', 'pwd'):\n"
        "    try:\n"
        "        __import__(m); print('has', m)\n"
        "    except ImportError: print('no', m)\n"
        "print('AF_UNIX', hasattr(socket, 'AF_UNIX'))",
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split("\n")[:5] == [
        "no fcntl",
        "no termios",
        "no tty",
        "no pwd",
        "AF_UNIX False",
    ]


def test_cli_without_agent_or_terminal_calls(windows_like):
    jobs = py(windows_like, "-m", "hpcui.cli", "jobs", "-c", "dev", "--json")
    assert jobs.returncode == 0, jobs.stderr
    assert isinstance(json.loads(jobs.stdout), list)
    note = "hpcui: no agent: this platform's Python has no unix sockets (native Windows)"
    assert jobs.stderr.count(note) == 1, jobs.stderr  # one line, and it says why
    shell = py(windows_like, "-m", "hpcui.cli", "shell", "-c", "dev", "1")
    assert shell.returncode == 2, shell.stderr
    assert "`hpcui shell` is not available here: an interactive shell needs a POSIX" in (
        shell.stderr
    )
    assert "Use WSL" in shell.stderr and "Traceback" not in shell.stderr
    agent = py(windows_like, "-m", "hpcui.cli", "agent", "status")
    assert agent.returncode == 2 and "there is no agent here" in agent.stderr, agent.stderr


API = textwrap.dedent(
    """
    import sys
    import hpcui

    def work(x):
        print("working on", x, flush=True)
        return x * 7

    assert "fcntl" not in sys.modules
    cluster = hpcui.connect("dev")
    job = cluster.submit(work, 6, time="5m")
    print("result", job.result(timeout=150))
    print("log", "".join(c.text for c in job.logs(follow=True, timeout=60)).strip())
    print("transport", type(cluster.transport).__name__)
    cluster.close()
    """
)


def test_api_submits_and_follows_without_posix_modules(windows_like):
    res = py(windows_like, "-c", API)
    assert res.returncode == 0, res.stderr
    assert "result 42" in res.stdout
    assert "working on 6" in res.stdout.split("log ", 1)[1]  # the job's log, followed
    assert "transport SshTransport" in res.stdout  # direct: no agent to relay through


APP = textwrap.dedent(
    """
    import asyncio, time
    from hpcui.tui.app import HpcuiApp
    from hpcui.tui.job_table import JobTable

    # Textual picks its terminal driver by sys.platform (its Windows driver on Windows),
    # which this simulation leaves "linux": its Linux driver needs termios. The headless
    # test driver replaces either in run_test; it is asked for here too.
    from textual.drivers.headless_driver import HeadlessDriver
    HpcuiApp.get_driver_class = lambda self: HeadlessDriver

    async def main():
        app = HpcuiApp("dev", connect=["dev"])
        async with app.run_test(size=(140, 40)) as pilot:
            ends = time.monotonic() + 60
            while app.hub.conns["dev"].status != "connected":
                assert time.monotonic() < ends, app.hub.conns["dev"].status
                await pilot.pause(0.2)
            app.screen.query_one(JobTable)  # the Jobs screen, composed
            print("app connected", app.hub.conns["dev"].status)
            await pilot.press("q")
    asyncio.run(main())
    """
)


def test_the_app_runs_without_posix_modules(windows_like):
    res = py(windows_like, "-c", APP)
    assert res.returncode == 0, res.stderr
    assert "app connected connected" in res.stdout
