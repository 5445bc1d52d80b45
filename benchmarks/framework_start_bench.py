"""From submit to the first training step, per framework, hpcui beside the guide's sbatch.

    HPCUI_CONFIG=.devcluster/hpcui.toml python -m benchmarks.framework_start_bench

For Lightning, Accelerate and DeepSpeed (examples/frameworks/*_train.py on 2 nodes x 2
ranks of the dev cluster's Slurm, CPU and gloo), in the same run and over the same warm
login: (a) `cluster.submit(script, launcher=...)`, hpcui's way, and (b) a hand-written
batch script of the CSC guide's form submitted with `sbatch` over the same connection.
Each figure is the script's own `first_step_at=` (the node's clock; the dev cluster's
nodes share this machine's) minus the moment this process asked for the submit. Jobs run
one at a time, so neither waits for the other's nodes. Repeats: `--rounds N` (median).
"""

from __future__ import annotations

import argparse
import re
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "frameworks"
VENV_PYTHON = "/opt/hpcui-devcluster/venv/bin/python"
SCRIPTS = {
    "lightning": ("lightning_train.py", ["--nodes", "2", "--devices", "2", "--accelerator", "cpu"]),
    "accelerate": ("accelerate_train.py", ["--steps", "20"]),
    "deepspeed": ("deepspeed_train.py", ["--backend", "gloo"]),
}
_FIRST = re.compile(r"first_step_at=(\d+\.\d+)")
HEADER = "#!/bin/bash\n#SBATCH --nodes=2 --cpus-per-task=1 --mem=4G --time=5 --partition=cpu\n"


def guide_script(framework: str, python: str, folder: str) -> str:
    """The CSC multi-GPU guide's batch script for the framework, written as a user would."""
    name, args = SCRIPTS[framework]
    script = f"{folder}/{name} {' '.join(args)}"
    out = f"#SBATCH --output={folder}/{framework}-%j.out --error={folder}/{framework}-%j.err\n"
    first = 'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
    port = "export MASTER_PORT=$((20000 + SLURM_JOB_ID % 10000))\n"
    if framework == "lightning":  # Lightning reads Slurm's task variables itself
        return f"{HEADER}#SBATCH --ntasks-per-node=2\n{out}srun {python} {script}\n"
    if framework == "accelerate":  # one launcher per node, the rank escaped for srun
        launch = (
            f"ACCELERATE_USE_CPU=true {python} -m accelerate.commands.launch --multi_gpu "
            "--mixed_precision no --dynamo_backend no --num_machines=$SLURM_NNODES "
            "--num_processes=$((SLURM_NNODES * 2)) --machine_rank=$SLURM_NODEID "
            f"--main_process_ip=$MASTER_ADDR --main_process_port=$MASTER_PORT {script}"
        )
        return (
            f"{HEADER}#SBATCH --ntasks-per-node=1 --gres=gpu:2\n{out}{first}{port}"
            f"srun bash -c {shlex.quote(launch)}\n"
        )
    ranks = (  # DeepSpeed over srun tasks: the rank variables from Slurm's
        "export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS; "
        f"exec {python} {script}"
    )
    return f"{HEADER}#SBATCH --ntasks-per-node=2\n{out}{first}{port}srun bash -c {shlex.quote(ranks)}\n"


def wait_first(what: str, read: Any, running: Any, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = _FIRST.search(read())
        if m:
            return float(m.group(1))
        if not running():
            raise SystemExit(f"{what}: the job ended before its first step (see its log)")
        time.sleep(0.2)
    raise SystemExit(f"{what}: no first step within {timeout:.0f} s")


def through_hpcui(cluster: Any, framework: str, timeout: float) -> float:
    from hpcui.submission.targets import script_call

    name, args = SCRIPTS[framework]
    call = script_call(EXAMPLES / name, args)
    shape: dict[str, Any] = {"nodes": 2, "tasks_per_node": 2}
    if framework == "accelerate":
        shape = {"nodes": 2, "gpus": 4}
    t0 = time.time()
    job = cluster.submit(call.fn, *call.args, launcher=framework, time="5m", cpus_per_task=1,
                         mem="4G", **shape)  # fmt: skip
    first = wait_first(f"{framework} through hpcui", lambda: job.stdout(0),
                       lambda: not job.state.is_final, timeout)  # fmt: skip
    job.results(timeout=timeout)
    return first - t0


def through_sbatch(cluster: Any, framework: str, folder: str, python: str, timeout: float) -> float:
    path = f"{folder}/{framework}.sbatch"
    cluster.transport.run(["sh", "-c", f"cat > {shlex.quote(path)}"],
                          stdin=guide_script(framework, python, folder).encode())  # fmt: skip
    t0 = time.time()
    job_id = cluster.run(["sbatch", "--parsable", path]).stdout.strip().split(";")[0]
    out = f"{folder}/{framework}-{job_id}.out"

    def running() -> bool:
        return bool(cluster.run(["squeue", "-h", "-j", job_id]).stdout.strip())

    read = lambda: cluster.run(["sh", "-c", f"cat {out} 2>/dev/null"]).stdout  # noqa: E731
    first = wait_first(f"{framework} through sbatch ({out})", read, running, timeout)
    while running():
        time.sleep(0.5)
    return first - t0


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cluster", default="dev")
    p.add_argument("--python", default=VENV_PYTHON)
    p.add_argument("--frameworks", default="lightning,accelerate,deepspeed")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--quick", action="store_true", help="Lightning only (the suite)")
    ns = p.parse_args(argv)
    if ns.quick:
        ns.frameworks, ns.rounds = "lightning", 1

    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config

    cfg = load_config().cluster(ns.cluster).model_copy(update={"python": ns.python})
    rows = []
    with Cluster(cfg) as cluster:
        home = cluster.run(["sh", "-c", "echo $HOME"]).stdout.strip()
        folder = f"{home}/.hpcui-bench-frameworks"
        cluster.run(["mkdir", "-p", folder])
        for name, _ in SCRIPTS.values():  # the guide's user copied the scripts there
            cluster.transport.run(["sh", "-c", f"cat > {folder}/{name}"],
                                  stdin=(EXAMPLES / name).read_bytes())  # fmt: skip
        warm = cluster.submit(sum, [1, 2], time="2m", cpus_per_task=1, mem="300M")
        warm.result(timeout=ns.timeout)  # the bundle uploaded, the Python probed: warm
        for fw in ns.frameworks.split(","):
            ours, guide = [], []
            for _ in range(ns.rounds):
                ours.append(through_hpcui(cluster, fw, ns.timeout))
                guide.append(through_sbatch(cluster, fw, folder, ns.python, ns.timeout))
            rows.append((fw, statistics.median(ours), statistics.median(guide)))
        cluster.run(["rm", "-rf", folder])
    print(f"{'framework':<11} {'hpcui submit':>13} {'guide sbatch':>13} {'difference':>11}")
    for fw, ours_s, guide_s in rows:
        print(f"{fw:<11} {ours_s:>12.2f}s {guide_s:>12.2f}s {ours_s - guide_s:>+10.2f}s")
    print("(seconds from asking for the job to its first training step; 2 nodes x 2 ranks, "
          f"CPU/gloo; median of {ns.rounds} round(s))", file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main()
