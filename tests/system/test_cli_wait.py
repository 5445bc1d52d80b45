"""Issue 35, "told when a job ends": `hpcui wait JOB... [--notify]` on the local box (real
local processes). The desktop notifier is `notify-send` where there is one; the test puts a
STAND-IN of it first on PATH that records its arguments (notify-send's documented form:
`notify-send [OPTION...] SUMMARY [BODY]`), and runs without one to hear the bell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

TASKS = """
import time

def nap(s):
    time.sleep(s)
    return s

def fail():
    raise RuntimeError("on purpose")
"""


def hpcui(tmp: Path, *args: str, path: str = "/usr/bin:/bin") -> subprocess.CompletedProcess:
    env = {
        "HPCUI_CONFIG": str(tmp / "c.toml"), "HPCUI_DATA_DIR": str(tmp / "data"),
        "HOME": str(tmp), "PATH": path, "PYTHONPATH": str(ROOT), "HPCUI_AGENT": "off",
    }  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "hpcui.cli", "-c", "box", *args], cwd=tmp, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def submit(tmp: Path, target: str, *args: str) -> str:
    done = hpcui(tmp, "submit", target, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["job_id"]


def setup(tmp: Path) -> None:
    (tmp / "c.toml").write_text(
        f'[clusters.box]\nscheduler = "local"\nremote_base = "{tmp}/base"\n'
    )
    (tmp / "waittasks.py").write_text(TASKS)


def test_wait_says_each_end_and_notifies_on_the_desktop(tmp_path):
    setup(tmp_path)
    stand_in = tmp_path / "bin"
    stand_in.mkdir()
    (stand_in / "notify-send").write_text(
        f'#!/bin/sh\nprintf "%s|" "$@" >> {tmp_path}/notified\necho >> {tmp_path}/notified\n'
    )
    os.chmod(stand_in / "notify-send", 0o755)
    ok = submit(tmp_path, "waittasks:nap", "--args", "[1]")
    bad = submit(tmp_path, "waittasks:fail")
    done = hpcui(tmp_path, "wait", ok, bad, "--notify", path=f"{stand_in}:/usr/bin:/bin")
    assert done.returncode == 5, done.stderr  # one did not complete
    lines = done.stdout.splitlines()
    assert f"box:{ok} nap ended COMPLETED" in lines and f"box:{bad} fail ended FAILED" in lines
    notified = (tmp_path / "notified").read_text().splitlines()
    assert sorted(notified) == sorted(
        f"--app-name=hpcui|hpcui: job ended|{line}|" for line in lines
    )
    assert "\a" not in done.stderr


def test_wait_rings_the_bell_without_a_notifier_and_times_out(tmp_path):
    setup(tmp_path)
    quick = submit(tmp_path, "waittasks:nap", "--args", "[0]")
    slow = submit(tmp_path, "waittasks:nap", "--args", "[60]")
    done = hpcui(tmp_path, "wait", quick, slow, "--notify", "--timeout", "5", "--json")
    assert done.returncode == 6, done.stderr
    rows = json.loads(done.stdout)
    assert [(r["job_id"], r["ended"]) for r in rows] == [(quick, True), (slow, False)]
    assert rows[0]["state"] == "COMPLETED" and rows[1]["state"] == "RUNNING"
    assert done.stderr.count("\a") == 1 and f"box:{slow} (RUNNING)" in done.stderr
    hpcui(tmp_path, "cancel", slow)
