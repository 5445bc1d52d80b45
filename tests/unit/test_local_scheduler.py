"""The embedded default without Slurm: jobs as local processes, same folder layout."""

import pytest

from hpcui.backends.states import JobState
from hpcui.clusters.cluster import Cluster
from hpcui.config import ClusterConfig
from hpcui.errors import JobCancelledError, JobFailedError


def add(a, b):
    print(f"adding {a} and {b}")
    return a + b


def boom():
    raise KeyError("local boom")


def nap():
    import time

    time.sleep(60)


@pytest.fixture
def local(tmp_path):
    cfg = ClusterConfig(name="loc", scheduler="local", remote_base=str(tmp_path / "base"))
    with Cluster(cfg) as c:
        yield c


def test_submit_result_and_logs(local):
    job = local.submit(add, 2, 3)
    assert job.result(timeout=60) == 5
    assert job.state is JobState.COMPLETED
    assert "adding 2 and 3" in job.stdout()
    assert "Job completed successfully" in job.stdout()  # submitit runner log (stdout)
    assert job.stderr() == ""


def test_failure_carries_traceback(local):
    with pytest.raises(JobFailedError, match="KeyError: 'local boom'"):
        local.submit(boom).result(timeout=60)


def test_map_in_order(local):
    jobs = local.map(add, range(6), range(6))
    assert [j.result(timeout=60) for j in jobs] == [0, 2, 4, 6, 8, 10]


def test_cancel(local):
    job = local.submit(nap)
    job.cancel()
    assert job.wait(timeout=30) is JobState.CANCELLED
    with pytest.raises(JobCancelledError):
        job.result()


# -- the launcher script (rendered, checked by bash -n; run by tests/integration/test_local_gpus)


def _spec(**kw):
    from hpcui.backends.batch import BatchSpec

    return BatchSpec(folder="/w/job dir", token="t", name="n", **kw)


def _bash_ok(script: str) -> None:
    import subprocess

    res = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr


def test_launcher_waits_for_its_gpus_and_shows_only_those():
    from hpcui.backends import local_script

    s = local_script.render_script(
        _spec(gpus_per_node=2, tasks_per_node=2, env={"NCCL_DEBUG": "WARN x"}),
        "/w/state",
        "CUDA_VISIBLE_DEVICES",
        ["GPU-a", "GPU-b", "GPU-c"],
        ticket=1234,
    )
    _bash_ok(s)
    assert (
        'gpus=$(python3 -m hpcui.node.gpu_slots acquire /w/state "$1" $pid 2 GPU-a,GPU-b,GPU-c 1234 '
        in s
    )
    assert 'export CUDA_VISIBLE_DEVICES="$gpus"' in s
    assert 'rm -f /w/state/gpus/held/"$1"' in s
    assert "export NCCL_DEBUG='WARN x'" in s  # the profile's env, quoted


def test_launcher_without_gpus_hides_them_and_never_waits():
    from hpcui.backends import local_script

    s = local_script.render_script(_spec(), "/w/state", "CUDA_VISIBLE_DEVICES", ["GPU-a"])
    _bash_ok(s)
    assert "export CUDA_VISIBLE_DEVICES=\n" in s and "gpu_slots" not in s
    plain = local_script.render_script(_spec(array_size=3), "/w/state")
    _bash_ok(plain)
    assert "VISIBLE_DEVICES" not in plain


def test_waiting_jobs_read_as_pending_with_their_reason():
    from hpcui.backends import local_script

    got = local_script.parse_status(
        "7 PENDING Resources: waiting for 1 GPU(s); 0 of 1 free (held by job(s) 6)\n"
        "6 RUNNING\n8 DONE 0\n9 GONE\n"
    )
    assert got["7"] == (
        JobState.PENDING,
        "Resources: waiting for 1 GPU(s); 0 of 1 free (held by job(s) 6)",
        None,
    )
    assert got["6"][0] is JobState.RUNNING and got["8"][0] is JobState.COMPLETED
    assert "9" not in got
