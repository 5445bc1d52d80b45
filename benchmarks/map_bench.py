"""Many small calls: calls per second from the first submit to the last value back, and the
scheduler jobs used, for hpcui's packed map beside one call per array task and beside
submitit's `map_array` run on the login node, in the same run (issue 59, item 3).

    HPCUI_CONFIG=.devcluster/hpcui.toml python -m benchmarks.map_bench \
        [--calls 10000] [--reference-calls 10000] [--call-ms 10] [--quick]

(a) `cluster.map(fn, xs, call_s=...)` from this machine: calls packed per array task;
(b) `cluster.map(fn, xs)` from this machine: one call per task (several arrays past the
site's MaxArraySize, 1001 on the dev cluster); (c) submitit's `AutoExecutor.map_array` in
a Python on the login node (what users do there today: one call per task). The function
sleeps `--call-ms` (a tiny evaluation). (b) and (c) start a Python per call: with
`--reference-calls` below `--calls` they run fewer calls, and the figure says so.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from typing import Any

GOAL = 100.0  # calls per second (issue 59)


def evaluate(x: int, ms: float) -> int:
    import time as _time

    _time.sleep(ms / 1000)
    return x * x


SUBMITIT_MAIN = """\
import sys, time, submitit
n, ms, folder = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
def evaluate(x, ms):
    time.sleep(ms / 1000)
    return x * x
ex = submitit.AutoExecutor(folder=folder)
ex.update_parameters(timeout_min=10, cpus_per_task=1, mem_gb=0.3, slurm_array_parallelism=1000)
t0 = time.monotonic()
jobs = []
for start in range(0, n, 1000):  # MaxArraySize 1001: submitit does not split by itself
    xs = list(range(start, min(n, start + 1000)))
    jobs += ex.map_array(evaluate, xs, [ms] * len(xs))
values = [j.result() for j in jobs]
assert values == [x * x for x in range(n)]
print(f"took={time.monotonic() - t0:.2f} arrays={-(-n // 1000)}")
"""


def _hpcui(cluster: Any, n: int, ms: float, packed: bool) -> tuple[float, int, int]:
    start = time.monotonic()
    kw: dict[str, Any] = {"call_s": ms / 1000} if packed else {}
    got = cluster.map(evaluate, range(n), [ms] * n, time="10m", cpus_per_task=1, mem="300M",
                      name="map-bench", **kw)  # fmt: skip
    values = got.results() if packed else [j.result() for j in got]
    took = time.monotonic() - start
    assert values == [x * x for x in range(n)], "values out of order or missing"
    jobs = got.jobs if packed else list(got)
    return took, len(jobs), len({j.job_id.split("_")[0] for j in jobs})


def _submitit(cluster: Any, n: int, ms: float) -> tuple[float, int]:
    info = cluster.remote_info()
    folder = f"{info.base}/bench-submitit-{int(time.time())}"
    bundle = cluster.submitter.ensure_bundle(info)[0]
    script = f"{folder}/main.py"
    cluster.run(["mkdir", "-p", folder]).check("mkdir")
    cluster.transport.put_files(folder, {"main.py": SUBMITIT_MAIN.encode()})
    cmd = (f"PYTHONPATH={shlex.quote(bundle)} {shlex.quote(cluster.python)} "
           f"{shlex.quote(script)} {n} {ms} {shlex.quote(folder + '/%j')}")  # fmt: skip
    res = cluster.run(["bash", "-lc", cmd], timeout=3600)
    res.check("submitit map_array on the login node")
    said = dict(kv.split("=") for kv in res.stdout.split())
    cluster.run(["rm", "-rf", folder])
    return float(said["took"]), int(said["arrays"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cluster", default="dev")
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--reference-calls", type=int, default=10_000)
    ap.add_argument("--call-ms", type=float, default=10.0)
    ap.add_argument("--quick", action="store_true", help="200 packed, 20 reference (the suite)")
    args = ap.parse_args(argv)
    if args.quick:
        args.calls, args.reference_calls = 200, 20
    import hpcui

    cluster = hpcui.connect(args.cluster)
    n, ref, ms = args.calls, args.reference_calls, args.call_ms
    print(f"{cluster.name}: MaxArraySize {cluster.submitter.array_limit(max(n, ref))}, "
          f"a call sleeps {ms:g} ms", flush=True)  # fmt: skip
    rows = []
    took, tasks, arrays = _hpcui(cluster, n, ms, packed=True)
    rows.append(("hpcui map, packed (call_s=)", n, took, f"{tasks} tasks in {arrays} array(s)"))
    took, tasks, arrays = _hpcui(cluster, ref, ms, packed=False)
    rows.append(("hpcui map, a call per task", ref, took, f"{tasks} tasks in {arrays} arrays"))
    took, arrays = _submitit(cluster, ref, ms)
    rows.append(("submitit map_array, login node", ref, took, f"{ref} tasks in {arrays} arrays"))
    print(f"{'':34} {'calls':>6} {'s':>8} {'calls/s':>8}  scheduler jobs")
    for what, calls, secs, jobs in rows:
        print(f"{what:34} {calls:6d} {secs:8.1f} {calls / secs:8.1f}  {jobs}")
    print(f"goal: at least {GOAL:.0f} calls/s for the packed map "
          f"({'met' if rows[0][1] / rows[0][2] >= GOAL else 'NOT met'})")  # fmt: skip
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
