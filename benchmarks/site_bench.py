"""Site-state figures (issue 6): live log latency, idle follower CPU, scheduler calls per
queue refresh. Prints figures; asserts nothing about timings. (squeue/sacct parsing:
benchmarks/parse_bench.py, no cluster needed.)

    HPCUI_CONFIG=.devcluster/hpcui.toml python -m benchmarks.site_bench [any-job]

Runs against the dev cluster (``scripts/devcluster status``), cluster ``dev``. The job
registry goes to a temporary HPCUI_DATA_DIR, never the user's. The jobs run on the dev
cluster's node, which is this machine: the timestamps a job writes and the times the
follower receives them come from the same clock.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time

os.environ["HPCUI_DATA_DIR"] = tempfile.mkdtemp(prefix="hpcui-site-bench-")

from benchmarks import sized
from hpcui.clusters.api import connect
from hpcui.sitestate import QueueSnapshot

HELD = ("--hold",)
#: lines a log job prints (one per 0.1 s), an idle job's silence, a held array's size
LINES, SILENT_S, ARRAY = sized((60, 5.0, 1000), (12, 1.0, 20))


# -- job functions (pickled by value: this module runs as __main__) ----------------------


def stamper(n: int, every: float) -> int:
    """One line per `every` s, each the wall-clock time it was written."""
    import time as _t

    for _ in range(n):
        print(f"{_t.time():.6f}", flush=True)
        _t.sleep(every)
    return n


def silent(seconds: float) -> float:
    """A line when it starts, nothing for `seconds`, a line when it ends."""
    import time as _t

    print("start", flush=True)
    _t.sleep(seconds)
    print("end", flush=True)
    return seconds


def add(a, b):  # type: ignore[no-untyped-def]
    return a + b


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# -- (1) logs ---------------------------------------------------------------------------


def log_latency(dev, mode: str) -> None:  # type: ignore[no-untyped-def]
    dev.config.log_follow = mode
    job = dev.submit(stamper, LINES, 0.1, time="5m")
    lags: list[float] = []
    buf, nbytes = "", 0
    t0 = time.monotonic()
    for chunk in dev.logs(job, follow=True, timeout=120):
        now = time.time()
        nbytes += len(chunk.text.encode())
        buf += chunk.text
        *lines, buf = buf.split("\n")
        for line in lines:
            try:
                lags.append(now - float(line))
            except ValueError:
                pass
    took = time.monotonic() - t0
    ms = [x * 1000 for x in lags]
    # The first line may wait out the follower's backoff from the pending phase (up to 2 s).
    steady = ms[1:]
    print(f"[logs {mode}] job {job.job_id}: {len(ms)} lines, {nbytes} bytes, followed {took:.1f} s")
    print(
        f"[logs {mode}] latency (delivery - write), all lines: p50 {pct(ms, 0.5):.0f} ms, "
        f"p95 {pct(ms, 0.95):.0f} ms, max {max(ms):.0f} ms"
    )
    print(
        f"[logs {mode}] latency without the first line: p50 {pct(steady, 0.5):.1f} ms, "
        f"p95 {pct(steady, 0.95):.1f} ms (first line: {ms[0]:.0f} ms)"
    )


STAMPS = """#!/bin/bash
#SBATCH --job-name=bench-plain
#SBATCH --output=bench-plain-%j.out
#SBATCH --time=5
for i in $(seq {lines}); do date +%s.%N; sleep 0.1; done
"""


def foreign_log_latency(dev, mode: str) -> None:  # type: ignore[no-untyped-def]
    """The same figure for a plain sbatch job hpcui did not submit (issue 23: any job's
    log, followed from the path its script names)."""
    dev.config.log_follow = mode
    res = dev.transport.run("mkdir -p ~/bench-any && cd ~/bench-any && sbatch --parsable",
                            stdin=STAMPS.format(lines=LINES).encode()).check("sbatch")  # fmt: skip
    job_id = res.stdout.strip().split(";")[0]
    lags: list[float] = []
    buf = ""
    for chunk in dev.logs(job_id, follow=True, timeout=120):
        now = time.time()
        buf += chunk.text
        *lines, buf = buf.split("\n")
        lags += [now - float(line) for line in lines if line.strip()]
    ms = [x * 1000 for x in lags]
    steady = ms[10:] or ms  # after its first second: the reader starts once the file exists
    print(
        f"[any-job logs {mode}] job {job_id}: {len(ms)} lines; first line {ms[0]:.0f} ms, "
        f"first second p95 {pct(ms[:10], 0.95):.0f} ms; after it: p50 {pct(steady, 0.5):.1f} "
        f"ms, p95 {pct(steady, 0.95):.1f} ms, max {max(steady):.0f} ms"
    )


def idle_follower_cpu(dev, mode: str) -> None:  # type: ignore[no-untyped-def]
    dev.config.log_follow = mode
    job = dev.submit(silent, SILENT_S, time="5m")
    cpu0 = wall0 = None
    cpu = wall = 0.0
    for chunk in dev.logs(job, follow=True, timeout=120):
        if "start" in chunk.text and cpu0 is None:
            cpu0, wall0 = time.process_time(), time.monotonic()
        if "end" in chunk.text and cpu0 is not None and wall0 is not None:
            cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    if wall:
        print(
            f"[logs {mode}] idle follower (job {job.job_id} silent {SILENT_S:.0f} s): {cpu * 1000:.0f} ms CPU in "
            f"{wall:.1f} s = {100 * cpu / wall:.2f} % of one core (whole process: follower "
            "+ job-state poller)"
        )
    else:
        print(f"[logs] idle follower: job {job.job_id} never printed both markers")


# -- (3) scheduler calls per refresh ----------------------------------------------------


def calls_per_refresh(dev, label: str, subscribers: int = 10, rounds: int = 5) -> None:  # type: ignore[no-untyped-def]
    watcher = dev.site.queue_watcher
    seen: list[list[QueueSnapshot]] = [[] for _ in range(subscribers)]
    with dev.status.paused():  # job-state polls would also count as scheduler calls
        subs = [watcher.subscribe(seen[i].append) for i in range(subscribers)]
        try:
            deadline = time.monotonic() + 30
            while not all(seen) and time.monotonic() < deadline:  # the loop's first refresh
                time.sleep(0.02)
            calls0, fetches0 = dev.scheduler.calls, watcher.fetches
            n0 = [len(s) for s in seen]
            t0 = time.monotonic()
            for _ in range(rounds):  # 5 callers at once per round share one squeue
                threads = [threading.Thread(target=dev.site.queue) for _ in range(5)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            # (+ any refresh of the loop's own); wait until every snapshot reached everyone
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                fetches = watcher.fetches - fetches0
                got = [len(s) - n for s, n in zip(seen, n0)]
                if fetches >= rounds and min(got) == fetches:
                    break
                time.sleep(0.02)
            wall = time.monotonic() - t0
            fetches = watcher.fetches - fetches0
            calls = dev.scheduler.calls - calls0
            got = [len(s) - n for s, n in zip(seen, n0)]
            snap = watcher.latest
        finally:
            for s in subs:
                s.cancel()
    listed = len(snap.jobs) if snap else 0
    active = len(snap.active) if snap else 0
    print(
        f"[queue] {label}: {listed} jobs listed ({active} not ended), {subscribers} subscribers, "
        f"{rounds}x5 concurrent queue() (+ loop) in {wall:.1f} s: {fetches} refreshes, "
        f"{calls} scheduler calls = {calls / max(fetches, 1):.2f} per refresh; "
        f"each subscriber got {min(got)}-{max(got)} snapshots; last squeue "
        f"{snap.took_s * 1000 if snap else 0:.0f} ms"
    )


def main() -> None:
    import sys

    t_start = time.monotonic()
    dev = connect("dev")
    if "any-job" in sys.argv[1:]:  # only the any-job log figure, push beside poll
        try:
            for mode in ("push", "poll"):
                foreign_log_latency(dev, mode)
        finally:
            dev.close()
        return
    try:
        dev.submit(add, 0, 0, time="5m", extra=HELD).cancel()  # probe + bundle check once
        for mode in ("push", "poll"):  # poll: the reference, same run
            log_latency(dev, mode)
            idle_follower_cpu(dev, mode)
            foreign_log_latency(dev, mode)
        print("[logs] goal (issue 21): push p95 < 20 ms, idle CPU near 0")

        one = dev.submit(add, 1, 2, time="5m", extra=HELD)
        try:
            calls_per_refresh(dev, "1 held job of ours")
        finally:
            one.cancel()

        t = time.perf_counter()
        jobs = dev.map(add, range(ARRAY), range(ARRAY), time="5m", extra=HELD)
        submit_s = time.perf_counter() - t
        array_id = jobs[0].job_id.split("_")[0]
        try:
            print(f"[queue] submitted held array {array_id} of {ARRAY:,} in {submit_s:.1f} s")
            calls_per_refresh(dev, f"held array of {ARRAY:,}")
        finally:
            dev.scheduler.cancel([array_id])
    finally:
        dev.close()
    print(f"[bench] total {time.monotonic() - t_start:.1f} s")


if __name__ == "__main__":
    main()
