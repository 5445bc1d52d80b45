"""Submit latency: hpcui over SSH vs stock submitit on the login node; calls per poll.

    HPCUI_CONFIG=.devcluster/hpcui.toml python -m benchmarks.submit_bench

"Stock submitit on the login node" runs as the same cluster user, on the dev cluster's
login node (this machine), with the same submitit version (from hpcui's runtime
bundle), timed inside that process.
"""

from __future__ import annotations

import statistics
import time

from benchmarks import sized
from hpcui.clusters.api import connect

#: single submits, arrays (one per 3 singles) of MAP elements, result reads, tracked sizes
ROUNDS, MAP, READS, TRACKED = sized((9, 100, 30, (1, 100, 1000)), (1, 5, 2, (1, 10)))

SUBMITIT_SIDE = r"""
import os, sys, time
import submitit

def add(a, b):
    return a + b

# One fresh process per measurement: submitit throttles repeated submits (~200 ms each).
ex = submitit.AutoExecutor(folder=os.path.expanduser("~/.hpcui/bench-submitit/%j"), cluster="slurm")
ex.update_parameters(timeout_min=5, slurm_partition="cpu", slurm_additional_parameters={"hold": True})
t = time.perf_counter()
if sys.argv[1] == "one":
    jobs = [ex.submit(add, 1, 2)]
else:
    jobs = ex.map_array(add, range(int(sys.argv[2])), range(int(sys.argv[2])))
took = time.perf_counter() - t
for j in jobs[:1]:
    j.cancel(check=False)
print(f"{took * 1000:.1f}")
"""


def add(a, b):
    return a + b


#: Jobs are submitted held (both sides) so running jobs do not load the 2-core machine
#: while submit latency is measured.
HELD = ("--hold",)


def _hpcui_one(dev) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    job = dev.submit(add, 1, 2, time="5m", extra=HELD)
    took = time.perf_counter() - t
    job.cancel()
    return took * 1000


def _hpcui_map(dev) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    jobs = dev.map(add, range(MAP), range(MAP), time="5m", extra=HELD)
    took = time.perf_counter() - t
    dev.scheduler.cancel([jobs[0].job_id.split("_")[0]])
    return took * 1000


def _result_reads(dev) -> None:  # type: ignore[no-untyped-def]
    """Reading a finished job's result: signature checked (two reads) against the unsigned
    read before results were signed (one read), alternating on the same finished job."""
    from hpcui.jobs.job import Job

    job = dev.submit(add, 2, 3, time="5m")
    job.result(timeout=120)
    signed = Job(dev, job.job_id, job.folder, result_key=job.result_key)
    unsigned = Job(dev, job.job_id, job.folder)
    times: dict[str, list[float]] = {"signed": [], "unsigned": []}
    for _ in range(READS):
        for name, j in (("signed", signed), ("unsigned", unsigned)):
            t = time.perf_counter()
            assert j.result(timeout=60) == 5
            times[name].append((time.perf_counter() - t) * 1000)
    s, u = (statistics.median(times[k]) for k in ("signed", "unsigned"))
    print(f"result() of a finished job, medians of {READS} alternating reads:")
    print(f"  signature checked {s:6.2f} ms   unsigned read {u:6.2f} ms   ratio {s / u:4.2f}")


def main() -> None:
    dev = connect("dev")
    info = dev.remote_info()
    bundle, _sha = dev.submitter.ensure_bundle(info)
    dev.submit(add, 0, 0).cancel()  # first submit pays for the probe and bundle check

    def stock(kind: str) -> float:
        cmd = ["env", f"PYTHONPATH={bundle}", "python3", "-c", SUBMITIT_SIDE, kind, str(MAP)]
        return float(dev.run(cmd, timeout=300).check("stock submitit on the login node").stdout)

    # Alternate the two so both see the same load; background status polls (sacct for every
    # job submitted so far) pause meanwhile: stock submitit has no such poller.
    rounds: dict[str, list[float]] = {"h1": [], "s1": [], "hm": [], "sm": []}
    with dev.status.paused():
        for i in range(ROUNDS):
            rounds["h1"].append(_hpcui_one(dev))
            rounds["s1"].append(stock("one"))
            if i % 3 == 0:
                rounds["hm"].append(_hpcui_map(dev))
                rounds["sm"].append(stock("array"))
    h_one, s_one, h_arr, s_arr = (statistics.median(rounds[k]) for k in ("h1", "s1", "hm", "sm"))
    print(
        f"submit latency, medians of alternating rounds ({ROUNDS} single submits, "
        f"{len(rounds['hm'])} arrays of {MAP}):"
    )
    print(
        f"  one submit      hpcui over SSH {h_one:7.1f} ms   submitit on login node {s_one:7.1f} ms"
        f"   ratio {h_one / s_one:4.2f}"
    )
    print(
        f"  {MAP:3d}-element map hpcui over SSH {h_arr:7.1f} ms   submitit on login node {s_arr:7.1f} ms"
        f"   ratio {h_arr / s_arr:4.2f}"
    )

    _result_reads(dev)

    print("scheduler calls per poll:")
    for n in TRACKED:
        jobs = (
            dev.map(add, range(n), range(n), time="5m", array_parallelism=1)
            if n > 1
            else [dev.submit(add, 1, 1, time="5m")]
        )
        dev.status.poll_once()
        calls = dev.status.last_poll_calls
        print(
            f"  {n:5d} tracked jobs: {calls} call(s) per poll ({len(dev.status._states)} tracked in all)"
        )
        dev.scheduler.cancel([jobs[0].job_id.split("_")[0]])
    dev.close()


if __name__ == "__main__":
    main()
