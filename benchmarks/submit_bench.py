"""Submit latency: hpcui over SSH vs stock submitit on the login node; calls per poll.

    HPCUI_CONFIG=.devcluster/hpcui.toml python -m benchmarks.submit_bench

"Stock submitit on the login node" runs as the same cluster user, on the dev cluster's
login node (this machine), with the same submitit version (from hpcui's runtime
bundle), timed inside that process.
"""

from __future__ import annotations

import statistics
import time

from hpcui.api import connect

SUBMITIT_SIDE = r"""
import statistics, sys, time, os, shutil
import submitit

def add(a, b):
    return a + b

folder = os.path.expanduser("~/.hpcui/bench-submitit/%j")
ex = submitit.AutoExecutor(folder=folder, cluster="slurm")
ex.update_parameters(timeout_min=5, slurm_partition="cpu")
ones = []
for _ in range(5):
    t = time.perf_counter(); job = ex.submit(add, 1, 2); ones.append(time.perf_counter() - t)
t = time.perf_counter()
jobs = ex.map_array(add, range(100), range(100))
arr = time.perf_counter() - t
for j in [job, *jobs]:
    j.cancel(check=False)
print(f"{statistics.median(ones) * 1000:.1f} {arr * 1000:.1f}")
"""


def add(a, b):
    return a + b


def main() -> None:
    dev = connect("dev")
    info = dev.remote_info()
    bundle = dev._ensure_bundle(info)
    dev.submit(add, 0, 0).cancel()  # first submit pays for the probe and bundle check

    ones = []
    for _ in range(5):
        t = time.perf_counter()
        job = dev.submit(add, 1, 2, time="5m")
        ones.append(time.perf_counter() - t)
        job.cancel()
    t = time.perf_counter()
    jobs = dev.map(add, range(100), range(100), time="5m")
    arr = time.perf_counter() - t
    dev.scheduler.cancel([jobs[0].job_id.split("_")[0]])

    res = dev.transport.run(
        ["env", f"PYTHONPATH={bundle}", "python3", "-c", SUBMITIT_SIDE], timeout=300
    ).check("stock submitit on the login node")
    s_one, s_arr = (float(x) for x in res.stdout.split())
    h_one, h_arr = statistics.median(ones) * 1000, arr * 1000
    print("submit latency (median of 5 single submits; one 100-element array):")
    print(
        f"  one submit      hpcui over SSH {h_one:7.1f} ms   submitit on login node {s_one:7.1f} ms"
        f"   ratio {h_one / s_one:4.2f}"
    )
    print(
        f"  100-element map hpcui over SSH {h_arr:7.1f} ms   submitit on login node {s_arr:7.1f} ms"
        f"   ratio {h_arr / s_arr:4.2f}"
    )

    print("scheduler calls per poll:")
    for n in (1, 100, 1000):
        jobs = (
            dev.map(add, range(n), range(n), time="5m", array_parallelism=1)
            if n > 1
            else [dev.submit(add, 1, 1, time="5m")]
        )
        before = dev.scheduler.calls
        dev.status.poll_once()
        calls = dev.scheduler.calls - before
        print(
            f"  {n:5d} tracked jobs: {calls} call(s) per poll ({len(dev.status._states)} tracked in all)"
        )
        dev.scheduler.cancel([jobs[0].job_id.split("_")[0]])
    dev.close()


if __name__ == "__main__":
    main()
