"""Remote submission to the dev cluster's real Slurm, over SSH, client isolated from its files."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from hpcui.backends.states import JobState
from hpcui.errors import (
    JobCancelledError,
    JobFailedError,
    JobLostError,
    RemotePythonError,
    ResultIntegrityError,
    SchedulerError,
    UsageError,
)
from tests.conftest import ROOT
from tests.integration import stand_ins
from tests.support.jobs import wait_job_state

pytestmark = pytest.mark.devcluster


def add(a, b):
    return a + b


def boom(x):
    raise ValueError(f"remote boom {x}")


def slow(seconds):
    import time as _t

    _t.sleep(seconds)
    return seconds


def suicide():
    import os as _os
    import signal as _signal
    import sys as _sys

    print("about to die", file=_sys.stderr, flush=True)
    _os.kill(_os.getpid(), _signal.SIGKILL)


def whoami_and_env():
    import os as _os
    import socket

    return {
        "user": _os.environ.get("USER"),
        "host": socket.gethostname(),
        "gpus": _os.environ.get("SLURM_GPUS_ON_NODE") or _os.environ.get("CUDA_VISIBLE_DEVICES"),
        "qos": _os.environ.get("SLURM_JOB_QOS"),
        "partition": _os.environ.get("SLURM_JOB_PARTITION"),
        "ntasks": _os.environ.get("SLURM_NTASKS"),
        "rank": _os.environ.get("SLURM_PROCID"),
    }


def test_add_round_trip(site):
    job = site.submit(add, 1, 2, time="5m")
    assert job.result(timeout=120) == 3
    assert job.state is JobState.COMPLETED
    assert job.job_id.isdigit()


def test_function_keyword_arguments_do_not_collide_with_resources(site):
    def f(gpus, name):
        return (gpus, name)

    job = site.submit(f, kwargs={"gpus": 7, "name": "x"}, gpus=1, name="kwtest")
    assert job.result(timeout=120) == (7, "x")
    with pytest.raises(UsageError, match="kwargs="):
        site.submit(f, gpus=1, learning_rate=0.1)


def test_resources_reach_slurm(site):
    job = site.submit(whoami_and_env, gpus=2, qos="debug", account="hpcacct", time="10m")
    env = job.result(timeout=120)
    assert env["user"] == "hpcuser"
    assert env["partition"] == "gpu"
    # slurmctld's own record (sacct can lag and show QOS "Unknown" for a moment)
    shown = site.run(["scontrol", "show", "job", "-o", job.job_id]).check().stdout
    assert "QOS=debug" in shown and "Account=hpcacct" in shown
    assert "gres/gpu=2" in shown and "Partition=gpu" in shown
    assert env["ntasks"] == "2"  # one task per GPU
    assert len(job.results()) == 2  # one result per rank


def test_scheduler_rejection_is_clear(site):
    with pytest.raises(SchedulerError, match="rejected the job"):
        site.submit(add, 1, 2, qos="no-such-qos")


def test_bad_request_fails_before_network(dev):
    with pytest.raises(UsageError, match="Ask for 4 or 8 GPUs"):
        dev.submit(add, 1, 2, gpus=6)
    with pytest.raises(UsageError, match="time"):
        dev.submit(add, 1, 2, time="soon")
    assert dev._transport is None or dev.transport.connects <= 1


def test_raising_function_surfaces_remote_traceback(site):
    job = site.submit(boom, 41)
    with pytest.raises(JobFailedError) as err:
        job.result(timeout=120)
    assert "ValueError: remote boom 41" in str(err.value)
    assert "in boom" in err.value.remote_traceback
    assert job.state is JobState.FAILED
    assert isinstance(job.exception(), JobFailedError)


def test_map_100_in_order_one_sbatch(site):
    sched = site.scheduler
    job_ids_before = site.run("squeue -h --me -o %F | sort -u | wc -l").stdout
    jobs = site.map(add, range(100), range(100, 200), time="5m")
    assert len({j.job_id.split("_")[0] for j in jobs}) == 1  # one array: one sbatch
    assert [j.job_id.split("_")[1] for j in jobs] == [str(i) for i in range(100)]
    site.status.poll_once()
    assert site.status.last_poll_calls == 1  # 100 tracked jobs, one scheduler call
    results = [j.result(timeout=300) for j in jobs]
    assert results == [a + b for a, b in zip(range(100), range(100, 200))]
    assert sched.calls < 400  # polling is batched, not per job
    assert job_ids_before is not None


def test_cancel_gives_cancelled_and_result_raises(site):
    job = site.submit(slow, 300)
    wait_job_state(job, {JobState.RUNNING}, 60)
    job.cancel()
    assert job.wait(timeout=60) is JobState.CANCELLED
    with pytest.raises(JobCancelledError):
        job.result()


def test_sigkilled_job_reports_failed_with_stderr_tail(site):
    job = site.submit(suicide)
    with pytest.raises(JobLostError) as err:
        job.result(timeout=120)
    assert job.state in (JobState.FAILED, JobState.CANCELLED)
    assert job.state is JobState.FAILED
    assert "about to die" in err.value.stderr_tail


def test_a_job_its_node_could_not_launch_says_the_schedulers_reason(site):
    """Slurm cannot create the job's log in a folder the user may not write: the job ends
    FAILED with Reason=JobLaunchFailure before any of it ran, and an empty stderr. The
    error says what Slurm said (before: "killed, out of memory, time limit or node
    failure ... (empty)")."""
    job = site.submit(add, 1, 2, time="5m", extra=["--hold"])
    site.transport.run(["chmod", "500", job.folder])  # its output file cannot be created
    try:
        site.control.release([job.job_id])
        with pytest.raises(JobLostError) as err:
            job.result(timeout=120)
    finally:
        site.transport.run(["chmod", "700", job.folder])
    message = str(err.value)
    assert job.state is JobState.FAILED
    # Slurm 22.05 names it; 24.11 gives only the signal of its exit code 0:53
    reason = "JobLaunchFailure" if site.name == "dev" else "RaisedSignal:53"
    assert f"Slurm ended it with reason {reason}" in message, message
    assert "exit code 0:53: its node could not launch it" in message, message
    assert "its node could not launch it" in message
    assert err.value.stderr_tail == ""


def test_get_job_from_a_fresh_process(site, tmp_path):
    job = site.submit(add, 20, 22)
    job.wait(timeout=120)
    code = textwrap.dedent(f"""
        import hpcui
        job = hpcui.get_job({site.name!r}, {job.job_id!r})
        print(job.result(timeout=60))
    """)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=os.environ,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "42"


def test_python_version_mismatch_refused_before_submitting(dev_env):
    """Nothing reaches the cluster's job folders: a remote_base of this test's own (other
    tests on the other worker submit into ~/.hpcui meanwhile; counting that folder raced)."""
    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config

    base = f"~/.hpcui-mismatch-{uuid.uuid4().hex[:8]}"
    cfg = load_config().cluster("dev").model_copy(update={"remote_base": base})
    with Cluster(cfg) as dev:
        try:
            with pytest.raises(RemotePythonError, match="cloudpickle cannot carry"):
                dev.remote_info(local_version=(3, 9))
            assert dev.run(f"ls {base}/jobs 2>/dev/null | wc -l").stdout.strip() == "0"
        finally:
            dev.run(f"rm -rf {base}")


def test_site_python_313_refused_with_the_module_to_load(dev_env):
    """dev24's system python3 is a real 3.13 (Debian trixie); without its `module load
    python/3.11` setup, submitting from this 3.11 is refused before anything is sent."""
    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config

    cfg = load_config().cluster("dev24")
    assert cfg.setup == ["module load python/3.11"] and cfg.python == "python3"
    bare = cfg.model_copy(update={"setup": [], "remote_base": "~/.hpcui-py313"})
    with Cluster(bare) as c:
        with pytest.raises(RemotePythonError) as err:
            c.submit(add, 1, 2)
        msg = str(err.value)
        assert "dev24's Python is 3.13 (`python3`)" in msg, msg
        assert 'setup = ["module load python/3.11"]' in msg, msg
        assert c.run("ls ~/.hpcui-py313/jobs 2>/dev/null | wc -l").stdout.strip() == "0"
    with Cluster(cfg) as c:  # with the module: 3.11, and the job runs
        assert c.remote_info().python_version[:2] == (3, 11)
        assert c.submit(add, 1, 2, time="5m").result(timeout=120) == 3


def test_missing_remote_python_refused(dev_env):
    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config

    cfg = load_config().cluster("dev").model_copy(update={"python": "/nonexistent/python9"})
    with Cluster(cfg) as c, pytest.raises(RemotePythonError, match="No usable Python"):
        c.submit(add, 1, 2)


def test_submitit_logging_stays_off_the_terminal(dev, capfd):
    dev.submit(add, 2, 3).result(timeout=120)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def _kill_session_sshd(cluster) -> None:
    session = int(cluster.run("echo $PPID").stdout.strip())
    subprocess.run(["kill", "-9", str(session)], check=False)


@contextlib.contextmanager
def link_cut_after(dev, seconds: float = 1.0) -> Iterator[None]:
    """The session's sshd is SIGKILLed `seconds` into the block (the runtime bundle is
    uploaded before); afterwards the link must have been lost and regained once."""
    dev.submitter.ensure_bundle(dev.remote_info())
    connects = dev.transport.connects
    session = int(dev.run("echo $PPID").stdout.strip())
    killer = threading.Timer(seconds, lambda: subprocess.run(["kill", "-9", str(session)]))
    killer.start()
    yield
    killer.join()
    assert dev.transport.connects == connects + 1  # it really lost and regained the link


def test_connection_killed_during_submit_yields_exactly_one_job(dev_env):
    dev = stand_ins.install("sbatch")
    name = f"slowsubmit{int(time.time() * 1000)}"
    with link_cut_after(dev):
        job = dev.submit(add, 5, 6, name=name)
    assert job.result(timeout=120) == 11
    squeued = dev.run(["squeue", "-h", "--states=all", "-o", "%i", "--name", name]).stdout.split()
    assert squeued == [job.job_id]


def test_tracks_state_with_accounting_disabled(site, exclusive_cluster):
    devcluster = str(ROOT / "scripts" / "devcluster")
    subprocess.run([devcluster, "dbd-stop", site.name], check=True, timeout=60)
    try:
        assert not site.run(["sacct", "-X", "-n"]).ok
        ok = site.submit(add, 1, 1)
        bad = site.submit(boom, 1)
        assert ok.result(timeout=120) == 2
        assert ok.state is JobState.COMPLETED
        with pytest.raises(JobFailedError):
            bad.result(timeout=120)
        assert bad.state is JobState.FAILED
        assert site.scheduler.accounting_off
    finally:
        subprocess.run([devcluster, "dbd-start", site.name], check=True, timeout=120)


def test_round_trips_per_submit_are_counted(dev_env):
    """Steady state: one shell command per submit (sbatch rides with the unpack); the
    runtime bundle is uploaded once per version, not per process."""
    from hpcui.clusters.api import connect

    first = connect("dev")
    first.submit(add, 0, 1).result(timeout=120)  # probe + bundle (if missing) paid here
    first.close()

    import hpcui.clusters.api

    hpcui.clusters.api._clusters.clear()
    dev = connect("dev")
    calls: dict[str, list] = {"run": [], "write": []}
    run, write = dev.transport.run, dev.transport.write_file
    dev.transport.run = lambda cmd, **kw: calls["run"].append(cmd) or run(cmd, **kw)
    dev.transport.write_file = lambda p, d, **kw: calls["write"].append(p) or write(p, d, **kw)
    with dev.status.paused():
        dev.submit(add, 1, 1)  # new process: probe (1 command), bundle already there
        assert len(calls["run"]) == 2
        assert not any("/runtime/" in p for p in calls["write"])
        calls["run"].clear()
        calls["write"].clear()
        job = dev.submit(add, 2, 2)
        assert len(calls["run"]) == 1  # upload + sbatch in one command
        written = [p.rsplit("/", 1)[1] for p in calls["write"]]
        assert written == ["submission.sh", ".hpcui-result-key", "task.pkl"]
    assert job.result(timeout=120) == 4


def test_the_job_base_is_made_private_but_an_existing_one_is_left_alone(dev_env):
    """A new remote_base is created 0700; a shared project directory (2775) keeps its mode
    (tests/integration/test_shared_base.py: what goes in it)."""
    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config

    tag = uuid.uuid4().hex[:8]
    cfg = load_config().cluster("dev")
    with Cluster(cfg.model_copy(update={"remote_base": f"~/base-new-{tag}"})) as fresh:
        fresh.remote_info()
        assert fresh.run(f"stat -c %a ~/base-new-{tag}").stdout.strip() == "700"
        fresh.run(f"mkdir -p ~/base-shared-{tag} && chmod 2775 ~/base-shared-{tag}").check()
        fresh.run(f"rm -rf ~/base-new-{tag}").check()
    with Cluster(cfg.model_copy(update={"remote_base": f"~/base-shared-{tag}"})) as shared:
        info = shared.remote_info()
        # others may write it: the jobs go into a private folder of the user's own in it
        assert info.shared_base.endswith(f"base-shared-{tag}")
        assert info.base == f"{info.shared_base}/hpcuser"
        assert shared.run(f"stat -c %a ~/base-shared-{tag}").stdout.strip() == "2775"
        shared.run(f"rm -rf ~/base-shared-{tag}").check()


def test_a_tampered_result_is_refused_before_unpickling(dev, tmp_path):
    """A group member of a shared remote_base swaps the result for a crafted pickle: the
    client refuses it (signature check) and never runs the pickle's code here."""
    job = dev.submit(add, 40, 2, time="5m")
    assert job.wait(timeout=120) is JobState.COMPLETED  # not fetched: no local copy yet
    result = job.paths.result(0)
    signed = dev.run(["tail", "-c", "86", result]).stdout
    assert "#hpcui-hmac-sha256:" in signed  # the job signed it, at the end of the file
    marker = tmp_path / f"pwned-{uuid.uuid4().hex}"
    # what unpickling this would do on the laptop: create `marker`
    evil = (
        "import pickle, sys\n"
        "class E:\n"
        "    def __reduce__(self):\n"
        f"        return (open, ({str(marker)!r}, 'w'))\n"
        "sys.stdout.buffer.write(pickle.dumps(('success', E())))\n"
    )
    # the crafted pickle, followed by the job's own (now wrong) signature trailer
    swap = f'python3 -c "$1" > {result}.new && tail -c 85 {result} >> {result}.new && mv {result}.new {result}'
    dev.run(["sh", "-c", swap, "sh", evil]).check("tamper")
    fresh = dev.get_job(job.job_id)
    with pytest.raises(ResultIntegrityError, match="does not match its signature"):
        fresh.result(timeout=60)
    assert not marker.exists()
    dev.run(["sh", "-c", f'python3 -c "$1" > {result}', "sh", evil]).check("unsigned")
    with pytest.raises(ResultIntegrityError, match="has no signature"):
        fresh.result(timeout=60)
    assert not marker.exists()
    # the CLI says so too, with the job-failed exit status
    out = subprocess.run(
        [sys.executable, "-m", "hpcui.cli", "result", job.job_id],
        capture_output=True, text=True, env=os.environ, timeout=120,
    )  # fmt: skip
    assert out.returncode == 5 and "has no signature" in out.stderr, out.stderr
    assert not marker.exists()
