"""The course's scaling ladder on the dev cluster: 1, 4 and 8 ranks (8 = 2 nodes x 4 GPUs),
DDP and FSDP, through `cluster.submit(examples.ddp_or_fsdp.experiment, gpus=N)`.

    HPCUI_CONFIG=.devcluster/hpcui.toml python -m benchmarks.scaling_bench
    HPCUI_CONFIG=.devcluster/hpcui.toml python -m benchmarks.scaling_bench --width 1024 --steps 6

Prints, side by side per rank count: nodes, hosts, seconds per step (mean of the timed
steps, between barriers) and per-rank memory (parameters+grads+Adam state this rank
holds, and peak). The reference is the JSC course's wall time on A100s (1 -> 4 -> 8 GPUs:
92, 25, 14 min). Here the "GPUs" are count-only and the ranks share 2 CPU cores through
gloo: the figures show the mechanism (every rank on its node, state divided by FSDP),
not a speedup.
"""

from __future__ import annotations

import argparse
import sys

from examples.ddp_or_fsdp import MIB, experiment

REFERENCE_MIN = {1: 92, 4: 25, 8: 14}  # JSC course, A100: minutes per training run
VENV_PYTHON = "/opt/hpcui-devcluster/venv/bin/python"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cluster", default="dev")
    p.add_argument("--python", default=VENV_PYTHON, help="remote interpreter with torch")
    p.add_argument("--ranks", default="1,4,8", help="comma-separated rank counts")
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--batch", type=int, default=64, help="global batch (strong scaling)")
    p.add_argument("--steps", type=int, default=6, help="steps per job; the first warms up")
    p.add_argument("--timeout", type=float, default=1200)
    p.add_argument("--quick", action="store_true", help="small sizes, seconds (the suite)")
    ns = p.parse_args(argv)
    if ns.quick:
        ns.ranks, ns.width, ns.batch, ns.steps = "1,2", 64, 8, 2

    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config

    cfg = load_config().cluster(ns.cluster).model_copy(update={"python": ns.python})
    ranks = [int(r) for r in ns.ranks.split(",")]
    rows = []
    with Cluster(cfg) as cluster:
        for n in ranks:  # one job at a time: the 2 cores are not shared with another job
            for mode in ("ddp", "fsdp"):
                job = cluster.submit(
                    experiment,
                    mode,
                    ns.width,
                    max(1, ns.batch // n),  # the global batch, split: strong scaling
                    1000,
                    ns.steps,
                    gpus=n,
                    cpus_per_task=1,
                    mem="2G",
                    time="15m",
                    name=f"scale-{mode}-{n}",
                )
                print(f"{mode} x{n}: job {job.job_id}", file=sys.stderr, flush=True)
                res = job.results(timeout=ns.timeout)
                hosts = sorted({r["host"] for r in res})
                rows.append(
                    (
                        n,
                        len(hosts),
                        mode.upper(),
                        res[0]["sec_per_step"],
                        max(r["state_bytes"] for r in res) / MIB,
                        max(r["peak_bytes"] for r in res) / MIB,
                        ",".join(hosts),
                    )
                )
    print(
        f"model width {ns.width}, global batch {ns.batch}, {ns.steps - 1} timed steps per job; "
        "CPU ranks over gloo on 2 shared cores: the mechanism, not a speedup"
    )
    print(
        f"{'ranks':>5} {'nodes':>5} {'mode':>4} {'s/step':>8} {'state/rank':>11} "
        f"{'peak/rank':>10}  {'reference (JSC, A100)':>22}  hosts"
    )
    for n, nodes, mode, sps, state, peak, hosts in sorted(rows, key=lambda r: (r[2], r[0])):
        ref = f"{REFERENCE_MIN.get(n, '-')} min/run"
        print(
            f"{n:>5} {nodes:>5} {mode:>4} {sps:>8.3f} {state:>8.1f} MiB {peak:>6.0f} MiB  "
            f"{ref:>22}  {hosts}"
        )


if __name__ == "__main__":
    main()
