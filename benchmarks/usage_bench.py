"""What a usage look costs: per sample (one job) and per refresh (every watched job).

    HPCUI_CONFIG=.devcluster/hpcui.toml python -m benchmarks.usage_bench

On the dev cluster: a 2-node job (8 GPUs, the nodes' stand-in nvidia-smi) and a 1-node
job run; `cluster.usage.look([job])` is timed N times (one command each: squeue, sstat, one
`srun --overlap` step per node), beside two references from the same run: a bare `squeue
-j ID` round trip on the same connection (the cheapest scheduler question) and the
parse + keep of one sample alone. A refresh of the app or `hpcui top` is one look per
watched job, so its cost is the per-sample figure times the jobs on screen.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from benchmarks import sized
from hpcui.backends.states import JobState
from hpcui.backends.usage import parse_slurm_usage
from hpcui.clusters.api import connect
from hpcui.jobs.usage import to_sample

N = sized(15, 2)


def busy_for(seconds: float) -> None:
    import time as _t

    end = _t.time() + seconds
    while _t.time() < end:
        _t.sleep(0.05)


def timed(fn: Callable[[], object], n: int = N) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def line(label: str, ms: list[float]) -> str:
    ms = sorted(ms)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return f"{label:<44} median {statistics.median(ms):7.1f} ms  p95 {p95:7.1f} ms  (n={len(ms)})"


def main() -> None:
    dev = connect("dev")
    small = {"time": "5m", "cpus_per_task": 1, "mem": "500M"}
    two = dev.submit(busy_for, 120, gpus=4, nodes=2, name="usage-bench-2n", **small)
    one = dev.submit(busy_for, 120, gpus=2, name="usage-bench-1n", **small)
    try:
        end = time.monotonic() + sized(120, 300)  # in a test run other jobs hold GPUs
        while not (two.state is JobState.RUNNING and one.state is JobState.RUNNING):
            if time.monotonic() > end:
                raise SystemExit("the bench jobs did not start in time")
            time.sleep(0.5)
        dev.usage.look([two.job_id, one.job_id])  # warm: the steps exist, the shell is up
        squeue = timed(lambda: dev.run(["squeue", "-h", "-j", two.job_id]))
        look2 = timed(lambda: dev.usage.look([two.job_id]))
        look1 = timed(lambda: dev.usage.look([one.job_id]))
        both = timed(lambda: dev.usage.look([two.job_id, one.job_id]))
        text = dev.run(dev.scheduler.usage_command(two.job_id)).stdout
        parse = timed(
            lambda: to_sample("dev", two.job_id, parse_slurm_usage(text)), n=sized(200, 5)
        )
        print("usage look cost on the dev cluster (loopback SSH, Slurm 22.05)")
        print(line("reference: squeue -j ID round trip", squeue))
        print(line("reference: parse + sample (no network)", parse))
        print(line("one look, 1-node job (2 GPUs)", look1))
        print(line("one look, 2-node job (4 GPUs, 2 srun tasks)", look2))
        print(line("a refresh of both jobs (2 commands)", both))
        ratio = statistics.median(look2) / statistics.median(squeue)
        print(f"one 2-node look = {ratio:.1f}x a bare squeue round trip")
    finally:
        dev.control.cancel([two.job_id, one.job_id])


if __name__ == "__main__":
    main()
