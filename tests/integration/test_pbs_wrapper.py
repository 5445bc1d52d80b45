"""hpcui's PBS path against the dev cluster's real Slurm Torque wrappers (slurm-wlm-torque).

They answer to qsub/qstat/qdel but drop PBS Pro's `select`/`ngpus` and every `-l` but the
last. hpcui recognises them and speaks the one language they translate (a single `-l` in
Torque's `nodes=N:ppn=P:gpus=G` syntax); these tests submit Python callables that way and
check, in Slurm's own records, that no resource was dropped on the way.
"""

from __future__ import annotations

import os
import re
import time

import pytest

from hpcui.backends.pbs import status as pbs
from hpcui.backends.states import JobState
from hpcui.clusters.cluster import Cluster
from hpcui.errors import JobCancelledError, JobFailedError, UsageError
from tests.support.jobs import wait_job_state

pytestmark = pytest.mark.devcluster


def add(a, b):
    return a + b


def rank_layout():
    return (
        int(os.environ["SLURM_PROCID"]),
        int(os.environ["SLURM_NTASKS"]),
        int(os.environ["SLURM_CPUS_PER_TASK"]),
        os.environ.get("SLURM_GPUS_ON_NODE"),
    )


def boom():
    raise ValueError("no luck on the wrapper")


def nap(seconds):
    time.sleep(seconds)
    return seconds


@pytest.fixture
def wrapper_pbs(dev_env):
    from hpcui.config import load_config

    cfg = load_config().cluster("dev").model_copy(update={"scheduler": "pbs"})
    cluster = Cluster(cfg)
    yield cluster
    cluster.close()


def scontrol(cluster: Cluster, job_id: str) -> str:
    return cluster.run(["scontrol", "--oneliner", "show", "job", job_id]).check("scontrol").stdout


def test_probe_detects_the_wrapper(wrapper_pbs):
    assert wrapper_pbs.scheduler.dialect == "slurm-torque-wrapper"
    assert wrapper_pbs.scheduler.submit_command("/x/submission.sh")[0] == "qsub"


def test_callable_through_qsub_keeps_every_resource(wrapper_pbs):
    job = wrapper_pbs.submit(add, 1, 2, gpus=1, time="7m", mem="1500M", name="wrap-add")
    assert job.result(timeout=120) == 3
    assert job.state is JobState.COMPLETED
    info = scontrol(wrapper_pbs, job.job_id)
    # what the wrapper made of `-l nodes=1:ppn=C:gpus=1,walltime=00:07:00,mem=1500mb`
    assert "gres/gpu=1" in info and "TimeLimit=00:07:00" in info and "mem=1500M" in info
    assert "JobName=wrap-add" in info and "Partition=gpu" in info
    out = re.search(r"StdOut=(\S+)", info)[1]
    assert out == f"{job.folder}/pbs-{job.job_id}.log"  # from qsub's -o: it went through qsub
    home = wrapper_pbs.transport.home()
    # (not another test's own wrapper-test.sh.o<id>: a fresh dev cluster numbers jobs from 1
    # again, and the shared home may keep such files from an earlier cluster's job <id>)
    junk = wrapper_pbs.run(
        f"ls {home} | grep -E '\\.(o|e){job.job_id}$' | grep -v '^wrapper-test\\.sh\\.'; true"
    ).stdout
    assert junk == ""  # the wrapper's default -o NAME.o<id> in the cwd was never used


def test_ranks_are_laid_out_by_srun_not_by_ppn(wrapper_pbs):
    plan = wrapper_pbs.plan(gpus=2)
    job = wrapper_pbs.submit(rank_layout, gpus=2)
    results = sorted(job.results(timeout=120))
    tasks = plan.tasks_per_node
    assert tasks == 2
    assert results == [(r, tasks, plan.cpus_per_task, "2") for r in range(tasks)]


def test_remote_failure_reaches_the_caller(wrapper_pbs):
    job = wrapper_pbs.submit(boom)
    with pytest.raises(JobFailedError, match="no luck on the wrapper"):
        job.result(timeout=120)
    assert job.state is JobState.FAILED


def test_qdel_through_cancel(wrapper_pbs):
    job = wrapper_pbs.submit(nap, 300, time="10m")
    wait_job_state(job, {JobState.RUNNING}, 60)  # from the wrapper's qstat: R
    listed = {q.job_id: q for q in wrapper_pbs.site.queue()}
    assert listed[job.job_id].state is JobState.RUNNING
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.result(timeout=60)
    assert job.state is JobState.CANCELLED  # C + sacct's CANCELLED


def torchrun_world():
    import os

    import torch

    from hpcui import distributed as hd

    _, rank, world, _ = hd.setup()
    t = torch.tensor([1.0])
    torch.distributed.all_reduce(t)
    hd.cleanup()
    return rank, world, t.item(), bool(os.environ.get("TORCHELASTIC_RUN_ID"))


def test_torchrun_through_the_wrapper(dev_env):
    from hpcui.config import load_config

    update = {"scheduler": "pbs", "python": "/opt/hpcui-devcluster/venv/bin/python"}
    with Cluster(load_config().cluster("dev").model_copy(update=update)) as cluster:
        job = cluster.submit(torchrun_world, gpus=2, launcher="torchrun", time="5m")
        assert job.results(timeout=300) == [(0, 2, 2.0, True), (1, 2, 2.0, True)]


def test_map_is_refused_before_anything_is_uploaded(wrapper_pbs):
    # other workers submit at the same time: look for this call's own job name, not a count
    name = f"refused-map-{os.getpid()}"
    with pytest.raises(UsageError, match="array elements"):
        wrapper_pbs.map(add, [1, 2], [3, 4], name=name)
    found = wrapper_pbs.run(f"grep -l {name} ~/.hpcui/jobs/*/submission.sh 2>/dev/null | wc -l")
    assert found.stdout.strip() == "0"
    assert wrapper_pbs.registry.list(wrapper_pbs.name) == []


def test_partitions_are_the_wrappers_queues(wrapper_pbs):
    names = {p.partition: p for p in wrapper_pbs.site.partitions()}
    assert set(names) == {"cpu", "gpu"}
    assert names["gpu"].avail == "up" and names["gpu"].kind == "exec"


def test_wrapper_qsub_qstat_qdel_round_trip(wrapper_pbs):
    run = wrapper_pbs.run
    script = "#!/bin/sh\n#PBS -N hpcui-wrapper\n#PBS -l walltime=00:05:00\nsleep 120\n"
    path = f"{wrapper_pbs.transport.home()}/.hpcui/wrapper-test.sh"
    wrapper_pbs.transport.write_file(path, script.encode(), mode=0o644)
    job_id = pbs.parse_qsub_output(run(["qsub", path]).check("qsub").stdout)
    assert job_id.isdigit()  # the wrapper's bare Slurm id
    try:
        (job,) = pbs.parse_torque_qstat_f(run(["qstat", "-f", job_id]).check("qstat").stdout)
        assert job.job_id == job_id and job.name == "hpcui-wrapper"
        assert job.walltime_limit_s == 300
    finally:
        run(["qdel", job_id]).check("qdel")
    deadline = time.monotonic() + 30
    while True:  # qdel -> scancel: COMPLETING for a moment while the step is killed
        state = run(["squeue", "-h", "--states=all", "-j", job_id, "-o", "%T"]).stdout.strip()
        if state != "COMPLETING" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert state in ("CANCELLED", "")


def test_control_and_afterok_through_the_wrapper(wrapper_pbs):
    """Issue 23, feature 3 on the wrapper site: details, hold, release and time limit are
    Slurm's (the wrapper has no qalter for walltime), afterok rides in `#PBS -W depend=`
    which sbatch's PBS reader turns into --dependency."""
    first = wrapper_pbs.submit(nap, 5, time="5m", name="wrap-first")
    second = wrapper_pbs.submit(add, 2, 3, time="5m", name="wrap-second", after_ok=[first])
    try:
        d = wrapper_pbs.control.details(second.job_id)
        assert f"afterok:{first.job_id}" in d.dependency
        wrapper_pbs.control.hold([second.job_id])
        assert wrapper_pbs.control.details(second.job_id).reason == "JobHeldUser"
        wrapper_pbs.control.set_time_limit(second.job_id, "4m")
        assert wrapper_pbs.control.details(second.job_id).time_limit_s == 240
        wrapper_pbs.control.release([second.job_id])
        assert second.result(timeout=180) == 5
        assert first.state.is_final
    finally:
        wrapper_pbs.control.cancel([first.job_id, second.job_id])
