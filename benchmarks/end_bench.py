"""From a job writing its result to `result()` returning: pushed end vs today's poll.

    HPCUI_CONFIG=.devcluster/hpcui.toml python -m benchmarks.end_bench

20 jobs of different lengths (5 to 176 s, one ending every 9 s) run at once on the dev cluster; for each, the
latency is the moment `result()` returned on the client minus the result file's mtime on
the cluster (both read on this machine's clock: the dev cluster is on loopback). The
same 20 jobs run twice in the same run: with the end pushed (hpcui.jobs.end_push) and with the
status poll alone (the reference: it backs off to 30 s while jobs run). Goal: p95 <= 1 s.
"""

from __future__ import annotations

import statistics
import threading
import time

from benchmarks import sized
from hpcui.clusters.cluster import Cluster
from hpcui.config import load_config

JOBS = sized(20, 2)
#: one ends every STEP s, the first after FIRST s: the poll backs off meanwhile
FIRST, STEP = sized((5, 9), (2, 2))


def sleeps(seconds: float) -> None:
    import time as _t

    _t.sleep(seconds)


def _run(pushed: bool) -> list[float]:
    with Cluster(load_config().cluster("dev")) as dev:
        if not pushed:
            dev.status.end_push.close()
            dev.status.end_push = None
        lengths = [FIRST + STEP * i for i in range(JOBS)]  # one ends every 9 s: the poll backs off
        jobs = [
            dev.submit(sleeps, s, cpus_per_task=1, mem="200M", name=f"end-{i}")
            for i, s in enumerate(lengths)
        ]
        returned: dict[int, float] = {}

        def wait(i: int) -> None:
            jobs[i].result(timeout=300)
            returned[i] = time.time()

        threads = [threading.Thread(target=wait, args=(i,)) for i in range(JOBS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        paths = [jobs[i].paths.result(0) for i in range(JOBS)]
        out = dev.run(["stat", "-c", "%.9Y", *paths]).stdout.split()
        return sorted(returned[i] - float(out[i]) for i in range(JOBS))


def _p(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def main() -> None:
    print(
        f"{JOBS} jobs of {FIRST}-{FIRST + STEP * (JOBS - 1)} s on the dev cluster; "
        "result written -> result() returned"
    )
    for label, pushed in (("pushed (hpcui.jobs.end_push)", True), ("poll only (reference)", False)):
        lat = _run(pushed)
        print(
            f"  {label:26s} p50 {statistics.median(lat):6.2f} s  p95 {_p(lat, 0.95):6.2f} s  "
            f"max {lat[-1]:6.2f} s"
        )
    print("goal: p95 <= 1 s with the push")


if __name__ == "__main__":
    main()
