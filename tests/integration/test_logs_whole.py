"""Every reader of a job's log ends with the whole file: `hpcui logs` read a second time
(from the local spool), after an interrupted `logs -f`, and `hpcui metrics`, with the
agent and without, compared byte for byte with the file on the cluster (real Slurm, real
sshd). A replayed spool once ended the read at its first 1 MiB chunk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.devcluster

TASKS = """
def lines(n):
    import json
    for i in range(n):
        print(f"line {i:06d} " + "x" * 36)
        if i % 20 == 0:
            print(json.dumps({"step": i, "loss": 1.0 / (i + 1)}))
    return n
"""


def _run(env: dict[str, str], work: Path, *args: str, timeout: float = 180):
    res = subprocess.run(
        [sys.executable, "-m", "hpcui.cli", *args],
        cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
    )  # fmt: skip
    assert b"Traceback" not in res.stderr, res.stderr.decode()
    return res


@pytest.mark.parametrize("persist", ["5m", 0], ids=["agent", "no-agent"])
def test_a_log_read_again_is_the_whole_remote_file(agent_env, tmp_path: Path, persist):
    env = agent_env(persist)
    work = tmp_path / "work"
    work.mkdir()
    (work / "bigout.py").write_text(TASKS)
    env = {**env, "PYTHONPATH": f"{env['PYTHONPATH']}{os.pathsep}{work}"}
    res = _run(env, work, "submit", "bigout:lines", "--args", "[60000]", "--time", "5m",
               "--wait", "--json")  # fmt: skip
    assert res.returncode == 0, res.stderr.decode()
    job = json.loads(res.stdout)["job_id"]
    shown = json.loads(_run(env, work, "show", job, "--json").stdout)
    remote = _run(env, work, "exec", "--", "cat", f"{shown['folder']}/{job}_0_log.out").stdout
    assert len(remote) > 3_000_000  # three chunks and more

    first = _run(env, work, "logs", job).stdout
    second = _run(env, work, "logs", job).stdout  # from the spool, then the remote end
    assert first == remote and second == remote

    (metrics,) = json.loads(_run(env, work, "metrics", job, "--json").stdout)
    (loss,) = [s for s in metrics["series"] if s["name"] == "loss"]
    assert len(loss["x"]) == 3000  # every point of the whole log (once 1 in 3)

    spool = Path(env["HPCUI_DATA_DIR"])
    for f in spool.rglob("*.log"):  # a fresh spool: the next read is interrupted mid-way
        f.unlink()
    follow = subprocess.Popen(
        [sys.executable, "-m", "hpcui.cli", "logs", "-f", job],
        cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert follow.stdout is not None
    follow.stdout.read(200_000)  # some of it arrived...
    follow.send_signal(signal.SIGINT)  # ...and the user pressed ^C
    follow.communicate(timeout=60)
    time.sleep(0.2)
    res = _run(env, work, "logs", job)
    after = res.stdout
    assert after == remote, (
        res.stderr,
        res.returncode,
        len(after),
        len(remote),
        [
            (f.name, f.stat().st_size, f.with_name(f.name + ".json").read_text())
            for f in spool.rglob("*.log")
        ],
    )
