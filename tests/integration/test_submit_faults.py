"""A drop or a client SIGKILL at each step of a submit ends in exactly one job hpcui knows.

The steps of one submit (hpcui.submission.submitter.Submitter.submit): the record, the upload (SFTP), the claim
of the job folder, sbatch, the job id landing in the folder, the client reading it. (A
map's calls go up as one pack file since issue 20, written directly: there is no tar to
unpack after the claim any more, so that step and its faults are gone.) Faults are injected where a real one strikes:
- "drop": the session's sshd is SIGKILLed (link lost) and the client goes on;
- "kill": the client process is SIGKILLed; a later process finishes its submission.
Remote steps are held at a gate by the stand-ins of tests/integration/stand_ins.py; the
upload step by wrapping the client's own write (the fault strikes mid-write).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest

from hpcui.backends.states import JobState
from hpcui.errors import SubmitOutcomeUnknown, UsageError
from hpcui.store.registry import shared_registry
from hpcui.store.signing import job_key
from hpcui.submission.recovery import NOT_SUBMITTED
from tests.integration import stand_ins

pytestmark = pytest.mark.devcluster

RUNS = 3  # per step and fault kind: 3 steps x 2 kinds x 3 = 18 runs
CALLS = ([1, 2, 3], [10, 20, 30])  # a map of 3: script, key and the calls pack


def add(a, b):
    return a + b


@pytest.fixture
def faulty(dev_env):
    dev = stand_ins.install("sbatch")
    ctl = stand_ins.install()  # a second connection: gates and checks, never cut
    ctl.run("mkdir -p ~/faultgates").check()
    dev.submitter.ensure_bundle(dev.remote_info())
    yield dev, ctl
    dev.close()
    ctl.close()


def _name() -> str:
    return f"faultloop{uuid.uuid4().hex[:10]}"


def _hold(ctl, name: str, step: str) -> None:
    if step != "upload":
        ctl.run(f"touch ~/faultgates/{name}.{step}").check()


def _wait_reached(ctl, name: str, step: str) -> None:
    for _ in range(300):  # 15 s
        if ctl.run(f"test -e ~/faultgates/{name}.{step}.reached").ok:
            return
        time.sleep(0.05)
    raise AssertionError(f"the submit never reached {step}")


def _release(ctl, name: str) -> None:
    ctl.run(f"rm -f ~/faultgates/{name}.*").check()


def _session_sshd(cluster) -> int:
    return int(cluster.run("echo $PPID").stdout.strip())


def _arrays(ctl, name: str) -> set[str]:
    res = ctl.run(["squeue", "-h", "--states=all", "-o", "%F", "--name", name]).check()
    return set(res.stdout.split())


def _records(cluster: str, name: str):
    return [r for r in shared_registry().list(cluster, limit=100_000) if r.name == name]


def _assert_one_known_job(ctl, name: str) -> str:
    """Exactly one array for `name` in Slurm, and the registry holds its three elements."""
    arrays = _arrays(ctl, name)
    assert len(arrays) == 1, f"{name}: {arrays or 'no job'} in Slurm"
    (array,) = arrays
    recs = _records("dev", name)
    assert sorted(r.job_id or "" for r in recs) == [f"{array}_{i}" for i in range(3)]
    assert all(r.state is not JobState.SUBMITTING for r in recs)
    ctl.run(["scancel", array])  # its work is not the point: free the node
    return array


# -- drop: the link dies, the same client goes on ----------------------------------------


def _drop_run(dev, ctl, step: str) -> None:
    name = _name()
    _hold(ctl, name, step)
    sshd = _session_sshd(dev)
    connects = dev.transport.connects
    if step == "upload":
        write = dev.transport.write_file

        def cut_then_write(path, data, **kw):  # the link dies as the upload starts
            subprocess.run(["kill", "-9", str(sshd)], check=False)
            del dev.transport.write_file
            return write(path, data, **kw)

        dev.transport.write_file = cut_then_write
        jobs = dev.map(add, *CALLS, name=name)
    else:
        box: dict = {}
        t = threading.Thread(target=lambda: box.update(jobs=dev.map(add, *CALLS, name=name)))
        t.start()
        _wait_reached(ctl, name, step)
        subprocess.run(["kill", "-9", str(sshd)], check=False)
        time.sleep(0.2)  # the client sees the drop while the step is still held
        _release(ctl, name)
        t.join(timeout=90)
        assert not t.is_alive() and "jobs" in box, f"submit did not come back ({step})"
        jobs = box["jobs"]
    assert dev.transport.connects == connects + 1  # the link really was lost and regained
    array = _assert_one_known_job(ctl, name)
    assert {j.job_id.split("_")[0] for j in jobs} == {array}


@pytest.mark.parametrize("step", ["upload", "sbatch", "idwrite"])
def test_a_drop_at_each_submit_step_gives_one_job(faulty, step):
    dev, ctl = faulty
    for _ in range(RUNS):
        _drop_run(dev, ctl, step)


# -- kill: the client dies, the next process finishes its submission ---------------------

CLIENT = textwrap.dedent(
    """
    import operator, os, signal, sys
    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config
    name, step = sys.argv[1:3]
    dev = Cluster(load_config().cluster("dev"))
    dev.submitter.ensure_bundle(dev.remote_info())
    if step == "upload":
        write = dev.transport.write_file
        def half_then_die(path, data, **kw):  # killed with half the upload written
            write(path, data[: len(data) // 2], **kw)
            os.kill(os.getpid(), signal.SIGKILL)
        dev.transport.write_file = half_then_die
    dev.map(operator.add, [1, 2, 3], [10, 20, 30], name=name)
    print("NOT KILLED", flush=True)
    """
)


def _kill_run(ctl, step: str) -> None:
    name = _name()
    _hold(ctl, name, step)
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, name, step],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        if step != "upload":
            _wait_reached(ctl, name, step)
            os.kill(client.pid, signal.SIGKILL)
        client.wait(timeout=60)
    finally:
        if client.poll() is None:
            client.kill()
    assert client.returncode == -signal.SIGKILL, client.stderr.read().decode()
    (rec,) = [r for r in _records("dev", name) if r.array_index == 0]
    assert rec.state is JobState.SUBMITTING and rec.job_id is None  # what the kill left
    if step == "idwrite":  # and the login node lost the submitting shell too (OOM, reboot)
        ctl.run(f"read -r p h < {rec.folder}/.submitting; pkill -9 -P $p; kill -9 $p; true").check()
    _release(ctl, name)
    # the next process: its first queue listing looks for cut-off submissions, and a job
    # id it does not know sends it looking again (the user's `hpcui show ID`)
    fresh = stand_ins.install()
    try:
        fresh.site.queue()
        if step == "upload":  # killed before its claim: nothing was submitted, nothing left
            assert _arrays(ctl, name) == set() and _records("dev", name) == []
            assert not ctl.run(["test", "-e", rec.folder]).ok
            return
        for _ in range(60):  # the released shell submits now (bounded: 30 s)
            if arrays := _arrays(ctl, name):
                break
            time.sleep(0.5)
        (array,) = arrays
        for _ in range(60):
            with contextlib.suppress(UsageError):
                assert fresh.get_job(f"{array}_1").name == name
                break
            time.sleep(0.5)
        assert _assert_one_known_job(ctl, name) == array
    finally:
        fresh.close()


@pytest.mark.parametrize("step", ["upload", "sbatch", "idwrite"])
def test_a_client_killed_at_each_submit_step_is_reconciled(faulty, step):
    _, ctl = faulty
    for _ in range(RUNS):
        _kill_run(ctl, step)


# -- a timeout while sbatch runs ---------------------------------------------------------


def test_a_timeout_during_sbatch_keeps_the_record_and_finds_the_job(faulty):
    dev, ctl = faulty
    name = _name()
    _hold(ctl, name, "sbatch")
    before, dev.transport.command_timeout = dev.transport.command_timeout, 2.0
    try:
        with pytest.raises(SubmitOutcomeUnknown, match="do not submit it again") as err:
            dev.map(add, *CALLS, name=name)
    finally:
        dev.transport.command_timeout = before
    key = job_key(err.value.token).hex()  # never in a message: command text is no place for it
    assert key not in str(err.value) and key not in str(err.value.__cause__)
    recs = _records("dev", name)
    assert len(recs) == 3 and all(r.state is JobState.SUBMITTING for r in recs)  # kept
    assert {r.token for r in recs} == {err.value.token}
    _release(ctl, name)
    for _ in range(60):
        if dev.faces.reconcile_submissions(force=True).found:
            break
        time.sleep(0.5)
    array = _assert_one_known_job(ctl, name)
    assert dev.get_job(f"{array}_2").name == name


def test_a_claimed_submit_that_never_reached_slurm_is_marked_not_submitted(faulty):
    """Claimed, then its shell died before sbatch: no job carries the token, so the
    record says NOT SUBMITTED (kept, FAILED) instead of waiting forever."""
    dev, ctl = faulty
    name = _name()
    _hold(ctl, name, "sbatch")
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, name, "sbatch"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    _wait_reached(ctl, name, "sbatch")
    os.kill(client.pid, signal.SIGKILL)
    client.wait(timeout=30)
    (rec,) = [r for r in _records("dev", name) if r.array_index == 0]
    ctl.run(f"read -r p h < {rec.folder}/.submitting; pkill -9 -P $p; kill -9 $p; true").check()
    _release(ctl, name)
    found = dev.faces.reconcile_submissions(force=True)
    assert found.not_submitted == [rec.token] and not found.found
    recs = _records("dev", name)
    assert {(r.state, r.state_raw) for r in recs} == {(JobState.FAILED, NOT_SUBMITTED)}
    assert _arrays(ctl, name) == set()
