"""The embedded default without Slurm: jobs as local processes, same folder layout."""

import pytest

from hpcui.backends.states import JobState
from hpcui.cluster import Cluster
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
