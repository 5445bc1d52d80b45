"""A sweep on the dev cluster's real Slurm and real OpenPBS: 12 configurations as one
sweep, three of them made to end without a result (one raises, one is cancelled, one is
killed by a signal as the kernel's OOM killer kills), the client that started it killed;
a new process resumes exactly those three (counted in the scheduler's own accounting),
the cancelled one with a longer time limit, and the table then holds 12 results."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid

import pytest

from hpcui.backends.states import JobState
from tests.conftest import ROOT
from tests.support.jobs import wait_job_state

pytestmark = [pytest.mark.devcluster, pytest.mark.timeout(600)]


def work(fixed: str, x: int, y: int) -> dict:
    """Configurations (1,1), (2,1) and (3,1) misbehave until the file `fixed` exists."""
    import os as _os
    import signal as _signal
    import time as _time

    if not _os.path.exists(fixed):
        if (x, y) == (1, 1):
            raise ValueError("diverged")
        if (x, y) == (2, 1):
            _time.sleep(600)  # cancelled by the test
        if (x, y) == (3, 1):
            _os.kill(_os.getpid(), _signal.SIGKILL)  # as the OOM killer ends a task
    print(f"epoch 1 loss {x * y / 10:.3f}", flush=True)
    return {"product": x * y}


@pytest.fixture(params=["dev", pytest.param("pbs", marks=pytest.mark.xdist_group("pbs"))])
def sweep_site(request, dev_env):
    from hpcui.clusters.api import connect

    cluster = connect(request.param)
    yield cluster
    cluster.close()


def _scheduler_count(cluster, name: str, expect: int | None = None) -> int:
    """Array elements named `name` in the scheduler's own records (ended ones included).
    slurmdbd records a busy cluster's ended tasks with a lag (seconds): with `expect`, the
    count is asked again (at most SETTLE_S) until it is that or more."""
    import time

    deadline = time.monotonic() + SETTLE_S
    count = _count_once(cluster, name)
    while expect is not None and count < expect and time.monotonic() < deadline:
        time.sleep(1)
        count = _count_once(cluster, name)
    return count


#: how long a count of the scheduler's records may take to catch up
SETTLE_S = 30.0


def _count_once(cluster, name: str) -> int:
    if cluster.name == "pbs":
        said = cluster.run(["qstat", "-x", "-t", "-f", "-F", "json"]).stdout
        jobs = json.loads(said or "{}").get("Jobs", {})
        return sum(1 for jid, j in jobs.items() if j.get("Job_Name") == name and "[]" not in jid)
    said = cluster.run(["sacct", "-X", "-n", "-P", f"--name={name}", "-S", "now-2hours",
                        "-o", "JobID"]).stdout  # fmt: skip
    return len([line for line in said.splitlines() if line.strip()])


def _python(code: str, **kw):
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                            env=os.environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)  # fmt: skip


def test_a_sweep_survives_its_client_and_resumes_exactly_what_failed(sweep_site):
    import hpcui

    cluster = sweep_site
    name = f"grid-{uuid.uuid4().hex[:6]}"
    fixed = f"{cluster.remote_info().base}/{name}.fixed"
    starter = _python(f"""
        import sys, time, hpcui
        from tests.integration.test_sweeps import work
        s = hpcui.sweep(work, grid={{"x": [1, 2, 3, 4, 5, 6], "y": [1, 2]}}, name={name!r},
                        args=[{fixed!r}], cluster={cluster.name!r}, time="5m")
        print("submitted", len(s.last_submitted), flush=True)
        time.sleep(600)  # killed here by the test
    """)
    line = starter.stdout.readline() if starter.stdout else ""
    assert line.strip() == "submitted 12", (line, starter.stderr.read() if starter.stderr else "")
    starter.send_signal(signal.SIGKILL)
    starter.wait(timeout=30)

    sweep = hpcui.get_sweep(cluster, name)
    sleeper = next(e for e in sweep.elements() if e.config == {"x": 2, "y": 1})
    wait_job_state(cluster.get_job(sleeper.job_id or ""), {JobState.RUNNING}, timeout=240)
    cluster.control.cancel([sleeper.job_id or ""])
    counts = sweep.wait(timeout=300)
    assert counts["COMPLETED"] == 9, counts
    ended = {tuple(e.config.values()): e.state for e in sweep.elements()}
    assert ended[(2, 1)] is JobState.CANCELLED
    assert ended[(1, 1)] is JobState.FAILED
    assert ended[(3, 1)] is not JobState.COMPLETED
    assert _scheduler_count(cluster, name, expect=12) == 12

    cluster.run(["touch", fixed])  # the bug fixed; a new process resumes
    resumer = _python(f"""
        import json, hpcui
        s = hpcui.get_sweep({cluster.name!r}, {name!r})
        jobs = s.resume(by_state={{"CANCELLED": {{"time": "10m"}}}})
        print(json.dumps([j.job_id for j in jobs]), flush=True)
        s.wait(timeout=300)
        from tests.integration.test_sweeps import work
        again = hpcui.sweep(work, grid={{"x": [1, 2, 3, 4, 5, 6], "y": [1, 2]}}, name={name!r},
                            args=[{fixed!r}], cluster={cluster.name!r}, time="5m")
        print(json.dumps(again.last_submitted), flush=True)
    """)
    out, err = resumer.communicate(timeout=420)
    assert resumer.returncode == 0, err
    resubmitted, started_again = (json.loads(x) for x in out.strip().splitlines()[-2:])
    assert len(resubmitted) == 3
    assert started_again == []  # the same name again: nothing doubled
    assert _scheduler_count(cluster, name, expect=15) == 15

    rows = hpcui.get_sweep(cluster, name).results()
    assert [r["state"] for r in rows] == ["COMPLETED"] * 12
    assert sorted(r["result.product"] for r in rows) == sorted(
        x * y for x in range(1, 7) for y in (1, 2)
    )
    by_config = {(r["x"], r["y"]): r for r in rows}
    assert by_config[(2, 1)]["attempts"] == 2 and by_config[(4, 2)]["attempts"] == 1
    assert by_config[(3, 2)]["metric.loss"] == pytest.approx(0.6)
    asked = [by_config[(2, 1)]["job_id"], by_config[(1, 1)]["job_id"]]
    # PBS answers for the whole array of an element asked: only the two asked are compared
    limits = {h.job_id: h.time_limit_s for h in cluster.site.history(None, job_ids=asked)}
    assert {j: limits.get(j) for j in asked} == {asked[0]: 600, asked[1]: 300}


def test_a_packed_sweep_is_few_array_tasks_with_each_elements_outcome(sweep_site, tmp_path):
    """12 elements, 4 to a task: 3 array tasks in the scheduler's own records; the element
    that raises fails alone, its neighbours in the task have their results."""
    import hpcui

    cluster = sweep_site
    name = f"packed-{uuid.uuid4().hex[:6]}"
    missing = f"{cluster.remote_info().base}/{name}.never"  # (1, 1) raises, as it is not there
    sweep = hpcui.sweep(work, grid={"x": [4, 5, 6, 1, 7, 8], "y": [1, 2]}, name=name,
                        args=[missing], cluster=cluster, time="5m", calls_per_task=4)  # fmt: skip
    assert len(sweep.last_submitted) == 3
    counts = sweep.wait(timeout=300)
    assert counts == {"COMPLETED": 11, "FAILED": 1}, counts
    assert _scheduler_count(cluster, name, expect=3) == 3
    rows = {(r["x"], r["y"]): r for r in sweep.results(metrics=False)}
    assert rows[(1, 1)]["error"] == "ValueError: diverged"
    assert rows[(1, 2)]["result.product"] == 2 and rows[(8, 2)]["result.product"] == 16
    assert len({r["job_id"] for r in rows.values()}) == 3


def on_a_gpu(x: int) -> dict:
    import os as _os
    import time as _time

    began = _time.time()
    _time.sleep(1.0)
    return {"gpu": _os.environ.get("CUDA_VISIBLE_DEVICES", ""), "pid": _os.getpid(),
            "began": began, "ended": _time.time()}  # fmt: skip


def test_a_sweep_shares_each_gpu_of_its_tasks(dev):
    """8 elements, gpus=2, tasks_per_gpu=2: 2 array tasks, each running its four elements
    at once, two on each GPU Slurm gave it."""
    import hpcui

    name = f"pergpu-{uuid.uuid4().hex[:6]}"
    sweep = hpcui.sweep(on_a_gpu, grid={"x": list(range(8))}, name=name, cluster=dev,
                        gpus=2, tasks_per_gpu=2, partition="gpu", time="5m", mem="1G")  # fmt: skip
    assert len(sweep.last_submitted) == 2
    assert sweep.wait(timeout=240) == {"COMPLETED": 8}
    rows = sweep.results(metrics=False)
    for task in {r["job_id"] for r in rows}:
        mine = [r for r in rows if r["job_id"] == task]
        gpus = sorted(r["result.gpu"] for r in mine)
        assert len(mine) == 4 and len({r["result.pid"] for r in mine}) == 4
        assert len(set(gpus)) == 2 and gpus[0] == gpus[1] and "," not in "".join(gpus), gpus
        assert max(r["result.began"] for r in mine) < min(r["result.ended"] for r in mine)
