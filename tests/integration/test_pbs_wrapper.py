"""The dev cluster's real Slurm Torque wrappers (slurm-wlm-torque): detected, and refused.

They answer to qsub/qstat/qdel but drop `ngpus` and every `-l` but the last: hpcui must
recognise them and never send them a PBS Pro job. The qsub/qstat/qdel flow itself is
exercised too, read back with hpcui's public parsers.
"""

from __future__ import annotations

import time

import pytest

from backends import pbs
from hpcui.cluster import Cluster
from hpcui.errors import UsageError

pytestmark = pytest.mark.devcluster


def add(a, b):
    return a + b


@pytest.fixture
def wrapper_pbs(dev_env):
    from hpcui.config import load_config

    cfg = load_config().cluster("dev").model_copy(update={"scheduler": "pbs"})
    cluster = Cluster(cfg)
    yield cluster
    cluster.close()


def test_probe_detects_the_wrapper(wrapper_pbs):
    sched = wrapper_pbs.scheduler
    with pytest.raises(UsageError, match='scheduler = "slurm"'):
        sched.dialect  # noqa: B018 - the property probes
    assert sched._dialect == "slurm-torque-wrapper"


def test_pbs_submit_is_refused_before_anything_is_uploaded(wrapper_pbs):
    before = wrapper_pbs.run("ls ~/.hpcui/jobs 2>/dev/null | wc -l").stdout
    with pytest.raises(UsageError, match="drop `ngpus`"):
        wrapper_pbs.submit(add, 1, 2, gpus=1)
    assert wrapper_pbs.run("ls ~/.hpcui/jobs 2>/dev/null | wc -l").stdout == before
    assert wrapper_pbs.registry.list(wrapper_pbs.name) == []


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
