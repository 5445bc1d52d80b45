"""What running in a container image costs (issue 32).

    python -m benchmarks.container_bench              # the dev cluster up (scripts/devcluster up)
    python -m benchmarks.container_bench --site dev24 # the second site (Slurm 24.11)

Time from `submit` to the result of a trivial function on an idle dev cluster, medians of
N, beside the reference from the same run: the same function with the cluster's own Python
(no image). For each runtime: the first submit of the process (the login-node prepare: the
image's Python read, or its memo) and a warm one; node containers already made (each node
keeps them, as sites with a node-local ENROOT_DATA_PATH do until it is wiped), and once cold
(the node's enroot container removed first: what a job pays where the data path is wiped).
"""

from __future__ import annotations

import statistics
import subprocess
import time

from benchmarks import QUICK, sized
from hpcui.clusters.cluster import Cluster
from hpcui.config import load_config
from tests.conftest import DEVCLUSTER

IMAGE = "/var/lib/hpcui-devcluster/images/pytorch.sqsh"
N = sized(5, 1)


def answer(x: int) -> int:
    return x + 1


def timed(c: Cluster, **kw: object) -> float:
    t0 = time.perf_counter()
    assert c.submit(answer, 1, time="5m", **kw).result(timeout=300) == 2
    return time.perf_counter() - t0


#: where each site's nodes keep their enroot containers, as this machine sees it
DATA = {
    "dev": "/var/tmp/hpcui-enroot-data/node*-*",
    "dev24": "/var/lib/hpcui-devcluster/dev24/rootfs/var/tmp/hpcui-enroot-data/dev24n*-*",
}


def wipe_node_containers(site: str) -> None:
    """The nodes' enroot containers (a folder per node and user: ENROOT_DATA_PATH)."""
    d = DATA[site]
    subprocess.run(
        f"rm -rf {d}/hpcui-* {d}/apptainer-standin-* {d}/pyxis_*", shell=True, check=False
    )


def main() -> None:
    import argparse
    import os

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--site", choices=sorted(DATA), default="dev")
    ap.add_argument("--quick", action="store_true", help="enroot only, once, no wipe (the suite)")
    site = ap.parse_args().site
    os.environ["HPCUI_CONFIG"] = str(DEVCLUSTER / "hpcui.toml")
    cfg = load_config().cluster(site)
    rows = []
    with Cluster(cfg) as c:
        timed(c)  # the runtime bundle installed, the connection warm
        bare = statistics.median(timed(c) for _ in range(N))
        rows.append(("cluster Python (reference)", None, bare))
    for runtime in ("enroot",) if QUICK else ("enroot", "pyxis", "apptainer"):
        with Cluster(cfg) as c:  # a new process's view: the prepare runs once
            first = timed(c, container=IMAGE, container_runtime=runtime)
            warm = statistics.median(
                timed(c, container=IMAGE, container_runtime=runtime) for _ in range(N)
            )
            if not QUICK:  # other jobs of a test run may be using the nodes' containers
                wipe_node_containers(site)
                cold = timed(c, container=IMAGE, container_runtime=runtime)
        rows.append((runtime, first, warm))
        if not QUICK:
            rows.append((f"{runtime}, node container made anew", None, cold))
    print(f"submit -> result of a trivial function, site {site}, median of {N} (s)")
    print(f"{'':40} {'first submit':>13} {'warm':>8}")
    for name, first, warm in rows:
        print(f"{name:40} {'' if first is None else f'{first:.2f}':>13} {warm:8.2f}")


if __name__ == "__main__":
    main()
