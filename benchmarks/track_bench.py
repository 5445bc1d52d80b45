"""What the tracker relay costs the login node: CPU per pass of 20 running jobs' trackers.

    python -m benchmarks.track_bench [--quick]

20 job folders as track= jobs leave them (an MLflow metric file, a W&B transaction log
and a TensorBoard event file each, growing every second) are relayed here as the login
node would relay them: hpcui's pass is its one command (`python3 -S -I -c REMOTE`, the
request on stdin; hpcui.trackers.mirror) run under this process, its CPU counted whole;
beside it the naive loop, one `rsync -a` of the 20 folders per interval, whose server
side (what the login node runs: `rsync --server --sender`) is counted the same way
through a remote shell that runs it here. Each at the relay's default interval
(INTERVAL_S): the share of one core is CPU per pass / interval (goal: <= 0.1 %).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks import sized
from hpcui.trackers import mirror
from hpcui.trackers.relay import INTERVAL_S

JOBS = 20
PASSES = sized(4, 2)
PACE_S = sized(INTERVAL_S / 3, 1.0)  # the files grow between passes
#: the login node's python3, as the relay's command runs it (the cluster's `python`)
LOGIN_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable

#: rsync's remote shell: runs the server-side rsync here and adds its CPU to a file
RSH = """import os, resource, subprocess, sys
subprocess.run(sys.argv[2:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(os.environ["HPCUI_BENCH_CPU"], "a") as fh:
    fh.write(f"{r.ru_utime + r.ru_stime}\\n")
"""


#: what each job's W&B log and event file already hold when the passes are measured (a
#: few hours into a run): rsync reads a changed file whole to find what changed
GROWN = sized(16 << 20, 1 << 20)


def seed(root: Path) -> None:
    for j in range(JOBS):
        track = root / f"job{j}" / "track" / str(1000 + j)
        for rel, size in (
            ("wandb/offline-run-x/run-x.wandb", GROWN),
            ("tb/events.out.tfevents", GROWN // 2),
        ):
            (track / rel).parent.mkdir(parents=True, exist_ok=True)
            (track / rel).write_bytes(os.urandom(size))


def grow(root: Path, stop: threading.Event) -> None:
    """Every job's trackers write as a training loop's do: a point, a record, an event."""
    step = 0
    while not stop.is_set():
        for j in range(JOBS):
            track = root / f"job{j}" / "track" / str(1000 + j)
            metrics = track / "mlruns" / "1" / "run" / "metrics"
            metrics.mkdir(parents=True, exist_ok=True)
            with (metrics / "loss").open("a") as fh:
                fh.write(f"{int(time.time() * 1000)} {1 / (step + 1)} {step}\n")
            wandb = track / "wandb" / "offline-run-x"
            wandb.mkdir(parents=True, exist_ok=True)
            with (wandb / "run-x.wandb").open("ab") as fh:
                fh.write(os.urandom(200))
            (track / "tb").mkdir(exist_ok=True)
            with (track / "tb" / "events.out.tfevents").open("ab") as fh:
                fh.write(os.urandom(100))
        step += 1
        stop.wait(1.0)


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


#: commands the login node ran, and folders they listed (counted as they run)
COUNTS = {"commands": 0, "listed": 0}


def hpcui_pass(roots: list[str], locals_: list[Path]) -> tuple[float, int]:
    """One relay pass: the login node's command, its CPU, the bytes it sent back."""
    before = children_cpu()
    res = subprocess.run([LOGIN_PYTHON, "-S", "-I", "-c", mirror.REMOTE],
                         input=mirror.request(roots, locals_), capture_output=True, check=True)  # fmt: skip
    COUNTS["commands"] += 1
    cpu = children_cpu() - before
    got = mirror.apply(res.stdout, locals_)
    COUNTS["listed"] += sum(1 for n in got.listed or [] if n)
    return cpu, len(res.stdout)


def rsync_pass(src: Path, dst: Path, rsh: Path, cpu_file: Path) -> float:
    """One naive loop turn: `rsync -a` of every job folder; its server side's CPU."""
    cpu_file.write_text("")
    subprocess.run(["rsync", "-a", "-e", f"{sys.executable} {rsh}", f"login:{src}/", str(dst)],
                   check=True, env={**os.environ, "HPCUI_BENCH_CPU": str(cpu_file)})  # fmt: skip
    return sum(float(x) for x in cpu_file.read_text().split())


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        remote, here, naive = root / "login", root / "here", root / "naive"
        seed(remote)
        stop = threading.Event()
        writer = threading.Thread(target=grow, args=(remote, stop), daemon=True)
        writer.start()
        time.sleep(2)
        roots = [str(remote / f"job{j}" / "track" / str(1000 + j)) for j in range(JOBS)]
        locals_ = [here / str(1000 + j) for j in range(JOBS)]
        rsh = root / "rsh.py"
        rsh.write_text(RSH)
        ours, theirs, sent = [], [], []
        rsyncs = 0
        while hpcui_pass(roots, locals_)[1] >= 1 << 20:  # the first copy: not what is measured
            pass
        rsync_pass(remote, naive, rsh, root / "cpu")
        COUNTS.update(commands=0, listed=0)
        for _ in range(PASSES):
            time.sleep(PACE_S)
            cpu, size = hpcui_pass(roots, locals_)
            ours.append(cpu)
            sent.append(size)
            theirs.append(rsync_pass(remote, naive, rsh, root / "cpu"))
            rsyncs += 1
        stop.set()
    a, b = sum(ours) / len(ours), sum(theirs) / len(theirs)
    print(f"{JOBS} running jobs' trackers ({GROWN / 2**20:g} MiB W&B log and {GROWN / 2**21:g} MiB "
          f"event file each, growing), one pass every {INTERVAL_S:g} s (the default), "
          f"{PASSES} passes measured")  # fmt: skip
    per = COUNTS["commands"] / PASSES
    print(f"{'':24} {'CPU/pass':>10} {'share of a core':>16} {'commands/pass':>14}")
    print(f"{'hpcui relay':24} {a * 1000:8.1f}ms {a / INTERVAL_S * 100:15.3f}% {per:>14g}")
    print(f"{'rsync -a loop (server)':24} {b * 1000:8.1f}ms {b / INTERVAL_S * 100:15.3f}% "
          f"{rsyncs / PASSES:>14g}")  # fmt: skip
    print(f"hpcui listed {COUNTS['listed'] / PASSES:g} job folders per pass, in those commands")
    print(f"hpcui sent {sum(sent) / len(sent) / 1024:.1f} KiB per pass (only what grew)")


if __name__ == "__main__":
    main()
