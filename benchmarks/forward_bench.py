"""What a service on a node costs to reach (issue 33).

    python -m benchmarks.forward_bench        # the dev cluster up (scripts/devcluster up)

1. Time from `hpcui jupyter` to the URL printed, the job starting at once (an idle dev
   cluster): the CLI through the agent, as a user runs it (submit, wait for the job and
   the server's runtime file, forward). Reference from the same run: a plain
   `hpcui run` of a trivial function to its result, the submit-and-start cost alone.
2. Throughput of a 64 MiB HTTP download from a job's node (curl): through hpcui's forward
   (one direct-tcpip channel of the cluster's SSH connection, paramiko) beside OpenSSH's
   own `ssh -L` through the same login node, same file, same run; medians of N downloads.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import sized
from hpcui.backends.states import JobState
from hpcui.clusters.api import connect
from tests.conftest import DEVCLUSTER, ROOT
from tests.integration.ranks import VENV_PYTHON

N = sized(5, 1)
SIZE_MIB = sized(64, 1)
SERVE = """#!/bin/bash
#SBATCH --time=10
mkdir -p ~/fwdbench && cd ~/fwdbench && head -c {size} /dev/urandom > blob
exec python3 -m http.server {port} --bind "$(getent hosts $SLURMD_NODENAME | cut -d' ' -f1)"
"""


def env_with_lab(tmp: Path) -> dict[str, str]:
    """An agent of this run, and the dev login with JupyterLab's environment (`lab`)."""
    base = (DEVCLUSTER / "hpcui.toml").read_text()
    dev = base.split("[clusters.dev]\n", 1)[1].split("\n\n", 1)[0]
    lab = dev.replace('python = "/usr/bin/python3"', f'python = "{VENV_PYTHON}"')
    (tmp / "hpcui.toml").write_text(f"{base}\n[clusters.lab]\n{lab}\n")
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "XDG_RUNTIME_DIR": tempfile.mkdtemp(prefix="hpb-"),
        "HPCUI_CONFIG": str(tmp / "hpcui.toml"),
        "HPCUI_DATA_DIR": str(tmp / "data"),
        "PYTHONPATH": str(ROOT),
        "NO_COLOR": "1",
    }


def hpcui(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpcui.cli", *args], env=env, capture_output=True, text=True,
        timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def jupyter_start(env: dict[str, str], tmp: Path) -> tuple[list[float], list[float]]:
    hpcui(env, "-c", "lab", "exec", "true")  # the agent up and logged in: not measured
    script = tmp / "one.py"
    script.write_text("print(1)\n")
    lab, plain = [], []
    for _ in range(sized(3, 1)):
        t0 = time.perf_counter()
        res = hpcui(env, "-c", "lab", "jupyter", "--no-browser", "--json", "--time", "5")
        lab.append(time.perf_counter() - t0)
        if res.returncode != 0:
            raise SystemExit(res.stderr)
        json.loads(res.stdout)
        hpcui(env, "-c", "lab", "jupyter", "--stop")
        t0 = time.perf_counter()
        res = hpcui(env, "-c", "lab", "run", "--wait", "--time", "5", str(script))
        plain.append(time.perf_counter() - t0)
    return lab, plain


def download(url: str) -> float:
    """MiB/s of one download of the blob, by curl: a process of its own, as a browser is
    (read in this process, the client took the GIL from the forward it measured: the
    212 vs 392 MiB/s of the first runs were half that)."""
    res = subprocess.run(
        ["curl", "-sS", "--max-time", "120", "-o", "/dev/null", "-w", "%{size_download} %{time_total}", url],
        capture_output=True, text=True,
    )  # fmt: skip
    words = res.stdout.split()
    if res.returncode != 0 or len(words) != 2 or int(words[0]) != SIZE_MIB * 2**20:
        raise OSError(f"download of {url} failed: {res.stderr.strip() or res.stdout}")
    return int(words[0]) / 2**20 / float(words[1])


def throughput() -> tuple[list[float], list[float]]:
    from tests.chromium import free_port
    from tests.integration.test_any_job import sbatch_script

    dev = connect("dev")
    port = free_port()
    job_id = sbatch_script(dev, SERVE.format(size=SIZE_MIB * 2**20, port=port), "--time=10")
    try:
        end = time.monotonic() + 120
        while dev.control.details(job_id).state is not JobState.RUNNING:
            if time.monotonic() > end:
                raise SystemExit("the bench job did not start")
            time.sleep(0.5)
        node = dev.control.details(job_id).nodelist.split(",")[0]
        with dev.control.forward(job_id, port) as fwd:
            url = f"http://{fwd.address}/blob"
            for _ in range(40):
                try:
                    download(url)
                    break
                except OSError:
                    time.sleep(0.5)
            ours = [download(url) for _ in range(N)]
        local = free_port()
        ssh = subprocess.Popen(
            ["ssh", "-F", str(DEVCLUSTER / "ssh" / "config"), "-N", "-L",
             f"127.0.0.1:{local}:{node}:{port}", "hpcui-dev"],
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{local}/blob"
            for _ in range(40):
                try:
                    download(url)
                    break
                except OSError:
                    time.sleep(0.25)
            theirs = [download(url) for _ in range(N)]
        finally:
            ssh.terminate()
            ssh.wait(timeout=10)
    finally:
        dev.control.cancel([job_id])
        dev.close()
    return ours, theirs


def main() -> None:
    os.environ.setdefault("HPCUI_CONFIG", str(DEVCLUSTER / "hpcui.toml"))
    os.environ["HPCUI_AGENT"] = "off"  # this process's own connection: the forward's
    with tempfile.TemporaryDirectory() as tmp:
        env = env_with_lab(Path(tmp))
        try:
            lab, plain = jupyter_start(env, Path(tmp))
        finally:
            hpcui(env, "agent", "stop", "--all")
    med = statistics.median
    print(f"hpcui jupyter to the URL printed    median {med(lab):6.2f} s  (n={len(lab)})")
    print(f"  reference: hpcui run --wait       median {med(plain):6.2f} s  (n={len(plain)})")
    ours, theirs = throughput()
    print(f"{SIZE_MIB} MiB through hpcui's forward    median {med(ours):7.1f} MiB/s  (n={N})")
    print(f"  reference: ssh -L, same login     median {med(theirs):7.1f} MiB/s  (n={N})")


if __name__ == "__main__":
    main()
