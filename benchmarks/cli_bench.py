"""CLI start-up: wall time of `hpcui --help`, `hpcui jobs --help`, `hpcui jobs --json`
(against the dev cluster) and `import hpcui`, beside `python -c pass` as the floor; then
the agent: warm `hpcui jobs --json` and `hpcui exec true` through it beside OpenSSH's
ControlMaster running the same commands on the same host, and the cold path.

    HPCUI_CONFIG=.devcluster/hpcui.toml python -m benchmarks.cli_bench [--runs N] [--agent-only]

Each figure is the median of N fresh processes (`sys.executable`, so no pyenv/venv shim
is counted; the installed `hpcui` script is measured too when it is on PATH). Also
prints which heavy modules `--help` imports (should be none) and the slowest imports
of `import hpcui` from `python -X importtime`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("pydantic", "paramiko", "textual", "rich", "torch", "cloudpickle", "submitit")


def wall(cmd: list[str], runs: int, env: dict[str, str]) -> tuple[float, float, int]:
    """(median ms, min ms, exit status of the last run)."""
    times, rc = [], 0
    for _ in range(runs):
        t = time.perf_counter()
        rc = subprocess.run(
            cmd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        ).returncode
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), min(times), rc


def heavy_imports(argv: list[str], env: dict[str, str]) -> list[str]:
    code = (
        "import sys\nfrom hpcui.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("HEAVY="))
    return [m for m in line.removeprefix("HEAVY=").split(",") if m]


def importtime(module: str, env: dict[str, str], top: int = 8) -> tuple[float, list[str]]:
    """(cumulative ms of `module`, its slowest imports) from `python -X importtime`."""
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    rows = []
    total = 0.0
    for line in err.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if not line.startswith("import time:") or len(parts) != 3:
            continue
        try:
            cum = int(parts[1])
        except ValueError:  # the header line
            continue
        name = parts[2].strip()
        rows.append((cum, name))
        if name == module:
            total = cum / 1000
    rows.sort(reverse=True)
    return total, [f"{c / 1000:6.1f} ms  {n}" for c, n in rows[:top]]


def hpcui_script() -> list[str]:
    """The installed `hpcui` script beside this Python (no pyenv shim), else `-m`."""
    script = Path(sys.executable).parent / "hpcui"
    return [str(script)] if script.exists() else [sys.executable, "-m", "hpcui.cli"]


def agent_section(runs: int, env: dict[str, str]) -> None:
    """Warm and cold calls through the agent, beside OpenSSH with a ControlMaster socket
    (`ssh -o ControlPath=...`, the anchor of issue 17) in the same run."""
    import tempfile

    from hpcui.backends.slurm.queue import squeue_command
    from hpcui.transport.quoting import quote_argv

    ssh_config = str(ROOT / ".devcluster" / "ssh" / "config")
    squeue = quote_argv(squeue_command(None, me=True)).decode()
    hp = hpcui_script()
    with tempfile.TemporaryDirectory(prefix="hpcui-bench-") as run_dir:
        os.chmod(run_dir, 0o700)
        aenv = {**env, "XDG_RUNTIME_DIR": run_dir}
        aenv.pop("HPCUI_AGENT", None)
        direct = {**aenv, "HPCUI_AGENT": "off"}
        control = os.path.join(run_dir, "cm")
        ssh = ["ssh", "-F", ssh_config, "-o", f"ControlPath={control}"]
        subprocess.run(
            [*ssh, "-o", "ControlMaster=yes", "-o", "ControlPersist=120", "-N", "-f", "hpcui-dev"],
            check=True,
        )
        stop = [*hp, "agent", "stop"]
        try:
            print(f"\nagent: {' '.join(hp)}; median of {runs} runs (warm: after one call)")
            print(f"{'command':<58} {'median':>9} {'min':>9}  rc")
            rows: dict[str, float] = {}
            cases = [
                ("python -c pass (interpreter start: the floor)", [sys.executable, "-c", "pass"], aenv),
                ("python -c 'import hpcui.agent.client' (the thin client)",
                 [sys.executable, "-c", "import hpcui.agent.client"], aenv),
                ("OpenSSH ControlMaster: ssh host true", [*ssh, "hpcui-dev", "true"], aenv),
                ("OpenSSH ControlMaster: ssh host '<hpcui's squeue>'", [*ssh, "hpcui-dev", squeue], aenv),
                ("hpcui exec true (agent, warm)", [*hp, "exec", "true"], aenv),
                ("hpcui jobs --json (agent, warm)", [*hp, "jobs", "--json"], aenv),
            ]  # fmt: skip
            subprocess.run([*hp, "exec", "true"], env=aenv, check=True, capture_output=True)
            for label, cmd, e in cases:
                med, low, rc = wall(cmd, runs, e)
                rows[label] = med
                print(f"{label:<58} {med:7.1f}ms {low:7.1f}ms  {rc}")
            # cold and direct in turns (the machine's drift hits both alike)
            cold, plain = [], []
            for _ in range(max(1 if runs == 1 else 5, runs // 2)):
                subprocess.run(stop, env=aenv, capture_output=True, check=True)
                cold.append(wall([*hp, "jobs", "--json"], 1, aenv)[0])
                plain.append(wall([*hp, "jobs", "--json"], 1, direct)[0])
            for label, times in (
                ("hpcui jobs --json, no agent (HPCUI_AGENT=off: as before)", plain),
                ("hpcui jobs --json, cold (starts the agent)", cold),
            ):
                rows[label] = statistics.median(times)
                print(f"{label:<58} {rows[label]:7.1f}ms {min(times):7.1f}ms")
            ratio_exec = (
                rows["hpcui exec true (agent, warm)"] / rows["OpenSSH ControlMaster: ssh host true"]
            )
            ratio_jobs = (
                rows["hpcui jobs --json (agent, warm)"]
                / rows["OpenSSH ControlMaster: ssh host '<hpcui's squeue>'"]
            )
            print(
                f"warm exec vs ssh true: {ratio_exec:.1f}x; warm jobs vs ssh squeue: {ratio_jobs:.1f}x (goal: within 3x)"
            )
        finally:
            subprocess.run([*hp, "agent", "stop"], env=aenv, capture_output=True)
            subprocess.run([*ssh, "-O", "exit", "hpcui-dev"], capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--agent-only", action="store_true", help="only the agent section")
    ap.add_argument("--quick", action="store_true", help="small sizes, seconds (the suite)")
    opts = ap.parse_args()
    if opts.quick:
        opts.runs = 1
    env = dict(os.environ)
    env.setdefault("HPCUI_CONFIG", str(ROOT / ".devcluster" / "hpcui.toml"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if opts.agent_only:
        agent_section(opts.runs, env)
        return
    py = [sys.executable]
    cases = [
        ("python -c pass (floor)", [*py, "-c", "pass"]),
        ('python -c "import hpcui"', [*py, "-c", "import hpcui"]),
        ('python -c "import pydantic" (its share below)', [*py, "-c", "import pydantic"]),
        ('python -c "import hpcui.clusters.api"', [*py, "-c", "import hpcui.clusters.api"]),
        ("hpcui --help", [*py, "-m", "hpcui.cli", "--help"]),
        ("hpcui jobs --help", [*py, "-m", "hpcui.cli", "jobs", "--help"]),
        ("hpcui profiles --json (no network)", [*py, "-m", "hpcui.cli", "profiles", "--json"]),
        ("hpcui jobs --json (dev cluster, SSH)", [*py, "-m", "hpcui.cli", "jobs", "--json"]),
    ]
    script = shutil.which("hpcui")
    if script:
        cases.append(("installed `hpcui` script --help", [script, "--help"]))
    print(f"python {sys.version.split()[0]} at {sys.executable}; median of {opts.runs} runs")
    if script:
        print(f"installed script: {script}")
    print(f"{'command':<48} {'median':>9} {'min':>9}  rc")
    floor = None
    for label, cmd in cases:
        runs = max(min(3, opts.runs), opts.runs // 3) if "SSH" in label else opts.runs
        med, low, rc = wall(cmd, runs, env)
        floor = floor if floor is not None else med
        extra = f"  (+{med - floor:.0f} ms over the floor)" if label != cases[0][0] else ""
        print(f"{label:<48} {med:7.1f}ms {low:7.1f}ms  {rc}{extra}")
    for argv in (["--help"], ["jobs", "--help"]):
        heavy = heavy_imports(argv, env)
        print(f"heavy modules imported by `hpcui {' '.join(argv)}`: {', '.join(heavy) or 'none'}")
    for module in ("hpcui", "hpcui.cli", "hpcui.clusters.api"):
        total, slow = importtime(module, env)
        print(f"\npython -X importtime -c 'import {module}': {total:.1f} ms cumulative; slowest:")
        print("\n".join("  " + s for s in slow))
    agent_section(opts.runs, env)


if __name__ == "__main__":
    main()
