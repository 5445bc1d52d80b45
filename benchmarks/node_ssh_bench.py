"""A job's node for the user's own ssh: `hpcui proxy` beside OpenSSH, same login, one run.

    python -m benchmarks.node_ssh_bench [--quick]     # the dev cluster up

1. The thin client, through a warm agent: `python -c pass` (the floor), `hpcui --version`,
   `hpcui exec dev true`, `hpcui jobs --json`, and the proxy's start (exec to the node
   sshd's banner on its stdout) beside OpenSSH ControlMaster's `ssh host true` and its own
   proxy, `ssh -S MASTER -W node:22` (exec to the same banner). Medians of N processes.
2. Connecting: `ssh -F <hpcui ssh-config> hpcui-dev-JOB true` beside `ssh -J` through the
   same login node (`hpcui-dev`, 127.0.0.1:2222) to the same node's sshd.
3. A 64 MiB scp to the node, both ways of getting there (MiB/s, medians of N copies).
"""

from __future__ import annotations

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

N = sized(7, 1)
RUNS = sized(15, 2)
SIZE_MIB = sized(64, 1)
SSH_CONFIG = DEVCLUSTER / "ssh" / "config"
KEY = DEVCLUSTER / "ssh" / "id_ed25519"


def agent_env(tmp: Path) -> dict[str, str]:
    run = tempfile.mkdtemp(prefix="hpn-")
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "XDG_RUNTIME_DIR": run,
        "HPCUI_CONFIG": str(DEVCLUSTER / "hpcui.toml"),
        "HPCUI_DATA_DIR": str(tmp / "data"),
        "PYTHONPATH": str(ROOT),
        "NO_COLOR": "1",
    }


def hpcui_script() -> list[str]:
    script = Path(sys.executable).parent / "hpcui"
    return [str(script)] if script.exists() else [sys.executable, "-m", "hpcui.cli"]


def wall_ms(cmd: list[str], env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        res = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True)
        times.append((time.perf_counter() - t0) * 1000)
        if res.returncode != 0:
            raise SystemExit(f"{cmd} failed: {res.stderr.decode(errors='replace')}")
    return statistics.median(times)


def banner_ms(cmd: list[str], env: dict[str, str], runs: int) -> float:
    """Exec of a ProxyCommand to the first bytes of the node sshd's banner on its stdout."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert proc.stdout is not None
        got = proc.stdout.read(8)
        times.append((time.perf_counter() - t0) * 1000)
        proc.kill()
        proc.wait()
        if not got.startswith(b"SSH-2.0"):
            raise SystemExit(f"{cmd}: no banner ({got!r})")
    return statistics.median(times)


def entry_proxy(cfg: Path, host: str, node: str) -> str:
    """The ProxyCommand `hpcui ssh-config` wrote for `host`, its tokens expanded."""
    seen = subprocess.run(["ssh", "-G", "-F", str(cfg), host], capture_output=True, text=True)
    line = next(ln for ln in seen.stdout.splitlines() if ln.startswith("proxycommand "))
    return line.split(" ", 1)[1].replace("%h", node).replace("%p", "22").replace("%%", "%")


def ssh_j(node: str) -> list[str]:
    """OpenSSH through the same login node as a jump host, to the node's sshd."""
    return [
        "ssh", "-F", str(SSH_CONFIG), "-J", "hpcui-dev", "-i", str(KEY),
        "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
        "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "BatchMode=yes",
        f"hpcuser@{node}",
    ]  # fmt: skip


def scp_mib_s(cmd: list[str], env: dict[str, str]) -> float:
    times = []
    for _ in range(N):
        t0 = time.perf_counter()
        res = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True)
        times.append(time.perf_counter() - t0)
        if res.returncode != 0:
            raise SystemExit(f"{cmd} failed: {res.stderr.decode(errors='replace')}")
    return SIZE_MIB / statistics.median(times)


def main() -> None:
    os.environ.setdefault("HPCUI_CONFIG", str(DEVCLUSTER / "hpcui.toml"))
    os.environ["HPCUI_AGENT"] = "off"  # this process's own connection: the job's
    from tests.integration.test_any_job import sbatch_script

    dev = connect("dev")
    job_id = sbatch_script(dev, "#!/bin/bash\nsleep 900\n", "--time=15")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        env = agent_env(tmp)
        hp = hpcui_script()
        control = os.path.join(env["XDG_RUNTIME_DIR"], "cm")
        cm = ["ssh", "-F", str(SSH_CONFIG), "-o", f"ControlPath={control}"]
        try:
            deadline = time.monotonic() + 120
            while dev.control.details(job_id).state is not JobState.RUNNING:
                if time.monotonic() > deadline:
                    raise SystemExit("the bench job did not start")
                time.sleep(0.5)
            node = dev.control.details(job_id).nodelist
            subprocess.run(
                [*cm, "-o", "ControlMaster=yes", "-o", "ControlPersist=300", "-N", "-f", "hpcui-dev"],
                check=True,
            )  # fmt: skip
            made = subprocess.run(
                [*hp, "-c", "dev", "ssh-config"], env=env, capture_output=True, text=True
            )
            if made.returncode != 0:
                raise SystemExit(made.stderr)
            cfg = tmp / "ssh_config"
            cfg.write_text(made.stdout)
            host = f"hpcui-dev-{job_id}"

            print(f"1. the thin client, warm agent ({' '.join(hp)}); median of {RUNS} processes")
            rows = [
                ("python -c pass (interpreter start: the floor)",
                 wall_ms([sys.executable, "-c", "pass"], env, RUNS)),
                ("OpenSSH ControlMaster: ssh host true", wall_ms([*cm, "hpcui-dev", "true"], env, RUNS)),
                ("hpcui --version", wall_ms([*hp, "--version"], env, RUNS)),
                ("hpcui exec true (agent, warm)", wall_ms([*hp, "-c", "dev", "exec", "true"], env, RUNS)),
                ("hpcui jobs --json (agent, warm)", wall_ms([*hp, "-c", "dev", "jobs", "--json"], env, RUNS)),
                ("OpenSSH ControlMaster's proxy: ssh -W node:22, to the banner",
                 banner_ms([*cm, "-W", f"{node}:22", "hpcui-dev"], env, RUNS)),
                ("the entry's ProxyCommand (ssh -W to the agent's mux), to the banner",
                 banner_ms(["sh", "-c", entry_proxy(cfg, host, node)], env, RUNS)),
                ("hpcui proxy dev JOB (agent, warm; the fallback), to the banner",
                 banner_ms([*hp, "proxy", "dev", job_id], env, RUNS)),
            ]  # fmt: skip
            for label, ms in rows:
                print(f"   {label:<64} {ms:7.1f} ms")
            table = dict(rows)
            cm_true = table["OpenSSH ControlMaster: ssh host true"]
            cm_w = table["OpenSSH ControlMaster's proxy: ssh -W node:22, to the banner"]
            entry = table["the entry's ProxyCommand (ssh -W to the agent's mux), to the banner"]
            print(
                f"   exec true / ControlMaster ssh true: "
                f"{table['hpcui exec true (agent, warm)'] / cm_true:.1f}x; "
                f"the entry's proxy / ControlMaster's ssh -W: {entry / cm_w:.1f}x (goal: within 2x)"
            )

            ours = wall_ms(["ssh", "-F", str(cfg), host, "true"], env, N)
            theirs = wall_ms([*ssh_j(node), "true"], env, N)
            print(f"2. connect + `true` on the node, median of {N}")
            print(f"   ssh through hpcui proxy (agent's login)  {ours:7.1f} ms")
            print(f"   reference: ssh -J through the same login  {theirs:7.1f} ms")

            blob = tmp / "blob"
            blob.write_bytes(os.urandom(SIZE_MIB * 2**20))
            ours_mib = scp_mib_s(
                ["scp", "-q", "-F", str(cfg), str(blob), f"{host}:/tmp/bench-blob"], env
            )
            jump = ssh_j(node)
            scp_j = ["scp", "-q", *jump[1:-1], str(blob), f"{jump[-1]}:/tmp/bench-blob"]
            theirs_mib = scp_mib_s(scp_j, env)
            print(f"3. scp of {SIZE_MIB} MiB to the node (connect included), median of {N}")
            print(f"   through hpcui proxy                       {ours_mib:7.1f} MiB/s")
            print(f"   reference: scp -J through the same login  {theirs_mib:7.1f} MiB/s")
            print(f"   ratio {ours_mib / theirs_mib:.2f}x (goal: at least 0.8x)")
        finally:
            subprocess.run([*hp, "agent", "stop"], env=env, capture_output=True)
            subprocess.run([*cm, "-O", "exit", "hpcui-dev"], capture_output=True)
            dev.control.cancel([job_id])
            dev.close()


if __name__ == "__main__":
    main()
