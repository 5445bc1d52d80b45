"""The local cluster when pids repeat (a reboot, a pid namespace), made on purpose.

The local scheduler names a job by its launcher's pid. Pids are handed out again, so
nothing an old job of the same pid left may count for a new one, and no signal may reach
a process that merely holds an old job's pid now. The reuse is forced by writing
/proc/sys/kernel/ns_last_pid (root, as in CI), and a job's processes are SIGKILLed as the
OOM killer or a reboot would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hpcui.backends.states import JobState
from hpcui.clusters.cluster import Cluster
from hpcui.config import ClusterConfig
from hpcui.errors import JobLostError

NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")

_NEEDS_ROOT = pytest.mark.skipif(
    os.geteuid() != 0 or not NS_LAST_PID.exists(),
    reason="forcing a pid needs root and /proc/sys/kernel/ns_last_pid (CI has both)",
)


def naps(seconds: float) -> str:
    import time as _t

    _t.sleep(seconds)
    return "slept"


@pytest.fixture
def local(tmp_path):
    cfg = ClusterConfig(name="loc", scheduler="local", remote_base=str(tmp_path / "base"))
    with Cluster(cfg) as c:
        yield c


def _state_dir(cluster: Cluster) -> Path:
    return Path(cluster.scheduler._state_dir())


def _spawn_with_pid(pid: int, argv: list[str]) -> subprocess.Popen:
    """A process that gets exactly `pid` (bounded tries: another fork may take it first)."""
    for _ in range(50):
        NS_LAST_PID.write_text(str(pid - 1))
        proc = subprocess.Popen(argv, start_new_session=True)
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    raise AssertionError(f"could not get pid {pid} again")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@_NEEDS_ROOT
@pytest.mark.timeout(60)
def test_cancel_of_an_ended_job_never_signals_the_process_that_has_its_pid_now(local):
    job = local.submit(naps, 0)
    assert job.result(timeout=30) == "slept"
    pid = int(job.job_id)
    deadline = time.monotonic() + 10
    while not _gone(pid):  # the launcher's last lines
        assert time.monotonic() < deadline
        time.sleep(0.05)
    bystander = _spawn_with_pid(pid, ["sleep", "30"])  # someone's editor, a training run
    try:
        local.control.cancel([job.job_id])  # before: kill -KILL -<pid> took the bystander's group
        time.sleep(0.3)
        assert bystander.poll() is None, "cancel of an ended job killed another process"
    finally:
        bystander.kill()
        bystander.wait()


@_NEEDS_ROOT
@pytest.mark.timeout(90)
def test_a_new_job_never_takes_an_old_jobs_outcome_or_gpu_hold_of_the_same_pid(local):
    state = _state_dir(local)
    (state / "gpus" / "held").mkdir(parents=True, exist_ok=True)
    base = min(int(NS_LAST_PID.read_text()) + 5000, 30000)
    for pid in range(base + 1, base + 400):  # what old jobs of these pids left behind
        (state / f"{pid}.rc").write_text("0\n")
        (state / "gpus" / "held" / str(pid)).write_text(f"{pid} 0,1\n")
    NS_LAST_PID.write_text(str(base))
    job = local.submit(naps, 3)
    assert base < int(job.job_id) < base + 400, job.job_id  # it did get a planted pid
    # before: "ended COMPLETED without a result" after 0.4 s while it kept running
    assert job.result(timeout=60) == "slept"
    assert not (state / "gpus" / "held" / job.job_id).exists()


@pytest.mark.timeout(60)
def test_a_job_whose_processes_were_killed_ends_failed_and_says_so(local):
    job = local.submit(naps, 120)
    deadline = time.monotonic() + 30
    while job.state is not JobState.RUNNING:
        assert time.monotonic() < deadline, job.state
        time.sleep(0.1)
    os.killpg(int(job.job_id), signal.SIGKILL)  # the OOM killer, a reboot
    # before: the status said GONE, which nobody read, and the job stayed RUNNING
    assert job.wait(timeout=20) is JobState.FAILED
    with pytest.raises(JobLostError, match="ended FAILED without a result"):
        job.result(timeout=10)


@pytest.mark.timeout(60)
def test_cancel_right_after_submit_with_a_narrow_terminal(local, monkeypatch):
    """`ps` cuts its lines to $COLUMNS when it is set (CI's xdist workers had it at 80):
    the launcher's script path must still be seen whole, or cancel signals nothing."""
    monkeypatch.setenv("COLUMNS", "40")
    job = local.submit(naps, 60)
    job.cancel()
    assert job.wait(timeout=30) is JobState.CANCELLED
