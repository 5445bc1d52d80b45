"""Capture hpcui's own squeue/sacct/sinfo outputs from a dev site, verbatim, as test fixtures.

Usage (the dev cluster up, from the repository root):
    HPCUI_CONFIG=.devcluster/hpcui.toml python scripts/capture_slurm_fixtures.py dev24 \
        tests/fixtures/slurm-24.11.5-dev24

Submits the same five jobs on any site (a completed one, a failed one, a 2-GPU one, an
array of 6 limited to 2 at a time, a held one), waits until the array runs, then runs the
command lines hpcui builds (backends/slurm/queue.py) for exactly those jobs and writes what
they printed, unedited, with COMMANDS.txt naming the site and the commands.
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import hpcui
from hpcui.backends.slurm.accounting import sacct_command
from hpcui.backends.slurm.partitions import sinfo_command
from hpcui.backends.slurm.queue import squeue_command


def ok() -> int:
    return 1


def fail() -> None:
    raise SystemExit(1)


def nap(seconds: float) -> float:
    import time as _t

    _t.sleep(seconds)
    return seconds


def main(cluster_name: str, out: Path) -> int:
    c = hpcui.connect(cluster_name)
    done = c.submit(ok, name="capture-ok", time="5m")
    failed = c.submit(fail, name="capture-fail", time="5m")
    done.wait(timeout=120)
    failed.wait(timeout=120)
    gpu = c.submit(nap, 120, name="capture-gpu", gpus=2, time="5m")
    array = c.map(nap, [120] * 6, name="capture-array", time="5m", array_parallelism=2)
    held = c.run(
        ["sbatch", "--parsable", "--hold", "--job-name=capture-held", "--time=5", "--wrap", "true"]
    ).check("sbatch")
    held_id = held.stdout.strip().split(";")[0]
    ids = [done.job_id, failed.job_id, gpu.job_id, array[0].job_id.split("_")[0], held_id]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if array[0].state.name == "RUNNING" and gpu.state.name == "RUNNING":
            break
        time.sleep(1)
    time.sleep(3)  # a step's accounting reaches slurmdbd
    out.mkdir(parents=True, exist_ok=True)
    commands = {
        "squeue_hpcui_format.txt": squeue_command(ids),
        "sacct_hpcui_format.txt": sacct_command(ids),
        "sinfo_hpcui_format.txt": sinfo_command(),
    }
    for name, argv in commands.items():
        (out / name).write_text(c.run(argv).check(argv[0]).stdout)
    version = c.run(["sinfo", "--version"]).stdout.strip()
    (out / "COMMANDS.txt").write_text(
        f"Captured verbatim from the dev cluster's site {cluster_name!r} ({version}) by\n"
        "scripts/capture_slurm_fixtures.py: the command lines hpcui builds\n"
        "(backends/slurm/queue.py) for the five jobs it submitted, output unedited:\n"
        + "".join(f"{shlex.join(argv)}\n" for argv in commands.values())
    )
    c.scheduler.cancel([gpu.job_id, array[0].job_id.split("_")[0], held_id])
    c.close()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], Path(sys.argv[2])))
