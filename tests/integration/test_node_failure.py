"""A compute node dies under running jobs (`scripts/devcluster kill-node`: its slurmd and
every process in its namespaces get SIGKILL, and the controller declares it DOWN).

- A 2-node job that may not be requeued ends NODE_FAIL; hpcui shows that state and the
  stderr tail, and `result()` raises at once instead of hanging.
- A Checkpointable job on the dead node is requeued by Slurm and resumes on the other
  node from the progress it saved on the shared /home (its processes were killed, so
  submitit's checkpoint() never ran: what it wrote is what it keeps).

The test takes the cluster alone (`exclusive_cluster`) and brings the node back.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from typing import Any

import pytest
from submitit.helpers import Checkpointable

from hpcui.backends.states import JobState
from hpcui.errors import JobLostError
from tests.conftest import ROOT

# the same worker as the multi-node and distributed modules: their module fixtures keep
# jobs holding both nodes' GPUs between tests, which would starve this test's jobs
pytestmark = [pytest.mark.devcluster, pytest.mark.xdist_group("distributed")]

WAIT = 240
TOTAL = 60  # steps of 0.25 s


def two_node_sleeper() -> str:
    import socket
    import time as _t

    print(f"up on {socket.gethostname()}", flush=True)
    _t.sleep(600)
    return "never"


class Stepper(Checkpointable):
    """Saves its progress to the shared job folder every step; a restart reads it back."""

    def __call__(self, total: int) -> dict[str, Any]:
        import json
        import os
        import socket
        import time as _t

        path = os.path.join(os.environ["HPCUI_JOB_FOLDER"], "stepper.json")
        try:
            with open(path) as fh:
                state = json.load(fh)
        except FileNotFoundError:
            state = {"done": 0, "hosts": []}
        state["hosts"].append(socket.gethostname())
        print(f"start on {state['hosts'][-1]} at step {state['done']}", flush=True)

        def save() -> None:
            with open(path + ".tmp", "w") as fh:
                json.dump(state, fh)
            os.replace(path + ".tmp", path)

        save()
        while state["done"] < total:
            _t.sleep(0.25)
            state["done"] += 1
            save()
        return state


def devcluster(*args: str) -> str:
    done = subprocess.run(
        [str(ROOT / "scripts" / "devcluster"), *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"devcluster {' '.join(args)}:\n{done.stdout}{done.stderr}"
    return done.stdout


def saved_steps(cluster, job) -> int:
    """Steps the Stepper saved on the shared /home (read over SSH, as the user would)."""
    res = cluster.run(["cat", f"{job.folder}/stepper.json"])
    return json.loads(res.stdout)["done"] if res.ok and res.stdout.strip() else 0


def test_a_node_dies_under_running_jobs(dev, exclusive_cluster):
    wide = dev.submit(
        two_node_sleeper, nodes=2, time="10m", cpus_per_task=1, mem="500M",
        name="nf-wide", extra=["--no-requeue"],
    )  # fmt: skip
    stepper = dev.submit(Stepper(), TOTAL, time="10m", cpus_per_task=1, mem="500M", name="nf-step")
    deadline = time.monotonic() + WAIT
    while not ("up on" in wide.stdout(0) and saved_steps(dev, stepper) >= 4):
        assert time.monotonic() < deadline, f"jobs never started: {wide.state} {stepper.state}"
        time.sleep(0.5)
    started = re.search(r"start on (node\d+) at step 0", stepper.stdout())
    assert started, stepper.stdout()
    victim = started.group(1)  # where it runs, in its own words
    try:
        devcluster("kill-node", victim)
        # the 2-node job: NODE_FAIL, shown by hpcui, and no hang when asking for its result
        assert wide.wait(timeout=WAIT) is JobState.NODE_FAIL
        started = time.monotonic()
        with pytest.raises(JobLostError) as lost:
            wide.result(timeout=30)
        assert time.monotonic() - started < 30
        assert "NODE_FAIL" in str(lost.value) and "Last lines of its stderr" in str(lost.value)
        # the Checkpointable one: requeued by Slurm, resumed on the surviving node
        result = stepper.result(timeout=WAIT)
    finally:
        devcluster("revive-node", victim)
    survivor = "node2" if victim == "node1" else "node1"
    assert result["done"] == TOTAL
    assert result["hosts"][0] == victim and result["hosts"][-1] == survivor, result
    out = stepper.stdout()
    assert f"start on {victim} at step 0" in out and f"start on {survivor} at step" in out
    assert f"start on {survivor} at step 0" not in out  # resumed, not started over
    assert stepper.state is JobState.COMPLETED
