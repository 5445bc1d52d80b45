"""Thousands of small calls on the dev cluster's real Slurm and OpenPBS (issue 59, item 3):
10,000 calls of a 10 ms function packed into a few array tasks, every value back in order
and one failing call failing alone; a map past the site's array limit split into several
arrays (one sbatch each), in order; the limit read from each scheduler itself."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from hpcui.errors import JobFailedError, UsageError

pytestmark = [pytest.mark.devcluster, pytest.mark.timeout(600)]


def tiny(x: int, name: str) -> int:
    """10 ms of 'work'; the call with x == 4321 raises (only it may fail)."""
    import time as _time

    _time.sleep(0.01)
    if x == 4321:
        raise ValueError(f"call {x} of {name} failed on purpose")
    return x * x


def _connect(name: str):
    from hpcui.clusters.api import connect

    return connect(name)


@pytest.mark.parametrize(
    ("site", "want"),
    [
        ("dev", 1001),
        ("dev24", 10001),
        pytest.param("pbs", 10000, marks=pytest.mark.xdist_group("pbs")),
    ],
)
def test_the_array_limit_is_the_schedulers_own(dev_env, site, want):
    """dev's slurm.conf has Slurm's default (1001), dev24's 10001; PBS's server 10000."""
    cluster = _connect(site)
    before = cluster.scheduler.calls
    assert cluster.submitter.array_limit(5000) == want  # a map of 5000 tasks asks
    assert cluster.submitter.array_limit(5000) == want  # asked once per cluster
    assert cluster.scheduler.calls == before + 1


def test_ten_thousand_small_calls_in_a_few_tasks_back_in_order(dev_env):
    cluster = _connect("dev")
    name = f"pack-{uuid.uuid4().hex[:6]}"
    n = 10_000
    started = time.monotonic()
    calls = cluster.map(tiny, range(n), [name] * n, call_s=0.01, name=name, time="10m",
                        cpus_per_task=1, mem="300M")  # fmt: skip
    values = {c.index: c.exception() or c.result() for c in calls}
    took = time.monotonic() - started
    assert len(calls) == n and len({c.job_id.split("_")[0] for c in calls}) == 1
    assert len(calls.jobs) == 16  # one array, 625 calls per task
    assert [values[i] for i in range(n) if i != 4321] == [i * i for i in range(n) if i != 4321]
    failed = values[4321]
    assert isinstance(failed, JobFailedError) and f"call 4321 of {name}" in str(failed)
    assert "Call 4321 of the map" in str(failed)
    said = cluster.run(["sacct", "-X", "-n", "-P", f"--name={name}", "-o", "JobID"]).stdout
    assert len([ln for ln in said.splitlines() if ln.strip()]) == 16  # the scheduler's count
    print(f"10,000 calls of 10 ms: {n / took:.0f} calls/s, {len(calls.jobs)} array tasks")


def test_a_map_past_the_array_limit_is_several_arrays_in_order(dev_env):
    """A site allowing 4 tasks per array (profile_overrides): 10 calls are 3 arrays, the
    user's array_parallelism shared out between them (2 each: never more than 6 at once)."""
    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config

    cfg = load_config().cluster("dev")
    small = cfg.model_copy(update={"profile_overrides": {"max_array_size": 4}})
    name = f"split-{uuid.uuid4().hex[:6]}"
    with Cluster(small) as cluster:
        jobs = cluster.map(tiny, range(10), [name] * 10, name=name, time="5m",
                           array_parallelism=6)  # fmt: skip
        assert [j.result(timeout=300) for j in jobs] == [i * i for i in range(10)]
        bases = [j.job_id.split("_")[0] for j in jobs]
        assert len(set(bases)) == 3 and [bases.count(b) for b in dict.fromkeys(bases)] == [4, 4, 2]
        scripts = [r.meta.get("script", "") for r in cluster.registry.list(cluster.name)
                   if r.name == name]  # fmt: skip
        arrays = sorted(line for s in scripts for line in s.splitlines() if "--array" in line)
        assert arrays == ["#SBATCH --array=0-1%2", "#SBATCH --array=0-3%2", "#SBATCH --array=0-3%2"]
        with pytest.raises(UsageError, match="array_parallelism=2 cannot be kept over the 3"):
            cluster.map(tiny, range(10), [name] * 10, array_parallelism=2)


@pytest.mark.xdist_group("pbs")
def test_packed_calls_on_pbs_fail_alone(dev_env):
    cluster = _connect("pbs")
    name = f"pbspack-{uuid.uuid4().hex[:6]}"
    xs = [*range(4316, 4327)]  # 11 calls, 4321 among them: 3 subjobs of 5, 5 and 1
    calls = cluster.map(tiny, xs, [name] * len(xs), calls_per_task=5, name=name, time="5m")
    assert len(calls.jobs) == 3
    got = [c.exception() or c.result(timeout=300) for c in calls]
    assert [g for x, g in zip(xs, got) if x != 4321] == [x * x for x in xs if x != 4321]
    assert isinstance(got[xs.index(4321)], JobFailedError)
    said = json.loads(cluster.run(["qstat", "-x", "-t", "-f", "-F", "json"]).stdout or "{}")
    subjobs = [j for jid, j in said.get("Jobs", {}).items()
               if j.get("Job_Name") == name and "[]" not in jid]  # fmt: skip
    assert len(subjobs) == 3


def gpu_seen(x: int) -> tuple[int, str, str, int, float, float]:
    """The call's GPU as its process sees it, its array task and process, and when."""
    import os
    import time as _time

    began = _time.time()
    _time.sleep(1.0)
    return (x, os.environ.get("CUDA_VISIBLE_DEVICES", ""), os.environ["SLURM_ARRAY_TASK_ID"],
            os.getpid(), began, _time.time())  # fmt: skip


def test_tasks_per_gpu_shares_each_gpu_of_a_task_on_real_slurm(dev_env):
    """8 calls, gpus=2 per task, tasks_per_gpu=2: two array tasks, each running its four
    calls at once, two on each of the two GPUs Slurm gave it (CUDA_VISIBLE_DEVICES)."""
    cluster = _connect("dev")
    calls = cluster.map(gpu_seen, range(8), gpus=2, tasks_per_gpu=2, partition="gpu",
                        time="5m", mem="1G")  # fmt: skip
    got = calls.results()
    assert [g[0] for g in got] == list(range(8))
    assert len({c.job_id for c in calls}) == 2  # 8 calls / (2 GPUs x 2)
    for task in {g[2] for g in got}:
        mine = [g for g in got if g[2] == task]
        assert len(mine) == 4 and len({g[3] for g in mine}) == 4  # four processes
        devices = sorted(g[1] for g in mine)
        assert len(set(devices)) == 2 and devices[0] == devices[1], devices  # 2 per GPU
        assert "," not in "".join(devices)  # each saw one GPU
        assert max(g[4] for g in mine) < min(g[5] for g in mine)  # all four at once
