"""CLI start-up: wall time of `hpcui --help`, `hpcui jobs --help`, `hpcui jobs --json`
(against the dev cluster) and `import hpcui`, beside `python -c pass` as the floor.

    HPCUI_CONFIG=.devcluster/hpcui.toml python -m benchmarks.cli_bench [--runs N]

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    opts = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("HPCUI_CONFIG", str(ROOT / ".devcluster" / "hpcui.toml"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    py = [sys.executable]
    cases = [
        ("python -c pass (floor)", [*py, "-c", "pass"]),
        ('python -c "import hpcui"', [*py, "-c", "import hpcui"]),
        ('python -c "import pydantic" (its share below)', [*py, "-c", "import pydantic"]),
        ('python -c "import hpcui.api"', [*py, "-c", "import hpcui.api"]),
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
        runs = max(3, opts.runs // 3) if "SSH" in label else opts.runs
        med, low, rc = wall(cmd, runs, env)
        floor = floor if floor is not None else med
        extra = f"  (+{med - floor:.0f} ms over the floor)" if label != cases[0][0] else ""
        print(f"{label:<48} {med:7.1f}ms {low:7.1f}ms  {rc}{extra}")
    for argv in (["--help"], ["jobs", "--help"]):
        heavy = heavy_imports(argv, env)
        print(f"heavy modules imported by `hpcui {' '.join(argv)}`: {', '.join(heavy) or 'none'}")
    for module in ("hpcui", "hpcui.cli", "hpcui.api"):
        total, slow = importtime(module, env)
        print(f"\npython -X importtime -c 'import {module}': {total:.1f} ms cumulative; slowest:")
        print("\n".join("  " + s for s in slow))


if __name__ == "__main__":
    main()
