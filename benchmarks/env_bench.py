"""What env= costs: the first build of a 10-package environment on the login node with uv
beside pip (the same requirements, the same index, the same node), and a warm submit with
env= (the environment ready, named by the probe) beside one without.

    HPCUI_CONFIG=.devcluster/hpcui.toml python -m benchmarks.env_bench [--quick]

Runs on the dev cluster's PBS site, whose login host has the site's index (pypiserver with
the wheels scripts/install-deps put there); this machine's pip reads the same wheel folder
for uv's own wheel (PIP_FIND_LINKS). Each build goes into a fresh folder (no installer
cache: both run with theirs off), alternating uv and pip; medians of 3 rounds (1 quick).
"""

from __future__ import annotations

import os
import statistics
import time
import uuid

from benchmarks import sized
from hpcui.clusters.api import connect
from hpcui.submission.environments import build_script, remote_uv, spec_of, wheel_cache

#: ten distributions and what they need, all in the dev index (two compiled: pydantic-core,
#: charset-normalizer)
TEN = ["humanize", "pydantic", "attrs", "packaging", "idna", "six", "tomli", "certifi",
       "charset-normalizer", "platformdirs"]  # fmt: skip
WHEELS = "/var/lib/hpcui-devcluster/index"


def nothing() -> int:
    return 0


def main() -> None:
    os.environ.setdefault("PIP_NO_INDEX", "1")  # uv's own wheel, from the dev wheel folder
    os.environ.setdefault("PIP_FIND_LINKS", WHEELS)
    cluster = connect("pbs")
    info = cluster.remote_info()
    index = cluster.profile.env_index_url
    uv, uv_sha = remote_uv(cluster.transport, info, wheel_cache(), lambda line: None)
    spec = spec_of(TEN, [])
    times: dict[str, list[float]] = {"uv": [], "pip": []}
    made: list[str] = []
    try:
        for _ in range(sized(3, 1)):
            for installer in ("uv", "pip"):
                folder = f"{info.base}/envs/bench-{uuid.uuid4().hex[:8]}"
                made.append(folder)
                script = build_script(
                    folder=folder, python=cluster.python, setup=cluster.setup, spec=spec,
                    index_url=index, uv=uv if installer == "uv" else "",
                    uv_sha=uv_sha if installer == "uv" else "", log=f"{folder}.log",
                )  # fmt: skip
                t = time.perf_counter()
                res = cluster.run(["bash", "-c", script], timeout=900)
                took = time.perf_counter() - t
                if "HPCUI_ENV=built" not in res.stdout:
                    raise SystemExit(f"{installer} build failed: {res.stdout[-2000:]}")
                times[installer].append(took)
    finally:
        for folder in made:
            cluster.run(["sh", "-c", f"rm -rf {folder} {folder}.*"])
    print(f"first build of a {len(TEN)}-package environment on the PBS site's login node "
          f"(its index on loopback), median of {len(times['uv'])}:")  # fmt: skip
    for installer in ("uv", "pip"):
        print(f"  {installer:4s} {statistics.median(times[installer]):7.2f} s   "
              f"(each: {', '.join(f'{t:.2f}' for t in times[installer])})")  # fmt: skip

    # a warm submit: the environment ready (built once here), the probe already made
    ready = cluster.environments.build(["humanize==4.15.0"])
    key = ready.split("/envs/")[1].split("/")[0]
    assert key in info.envs
    warm: dict[str, list[float]] = {"with env=": [], "without": []}
    jobs = [cluster.submit(nothing, time="1m", name="envbench", **extra)
            for extra in ({"env": ["humanize==4.15.0"]}, {})]  # fmt: skip  # warm both paths
    for _ in range(sized(5, 2)):
        for label, extra in (("with env=", {"env": ["humanize==4.15.0"]}), ("without", {})):
            t = time.perf_counter()
            jobs.append(cluster.submit(nothing, time="1m", name="envbench", **extra))
            warm[label].append((time.perf_counter() - t) * 1e3)
    for job in jobs:
        job.cancel()
    print(f"a warm submit (the environment ready), median of {len(warm['without'])}:")
    for label, values in warm.items():
        print(f"  {label:10s} {statistics.median(values):7.1f} ms")
    cluster.close()


if __name__ == "__main__":
    main()
