"""The embedded `local` cluster with no config: Slurm on this machine, no SSH."""

import shutil

import pytest

from hpcui.backends.states import JobState
from hpcui.config import load_config
from hpcui.schedulers.slurm import SlurmScheduler
from hpcui.transport.local import LocalTransport

pytestmark = pytest.mark.devcluster


def square(x):
    return x * x


def test_local_uses_slurm_when_sbatch_is_on_path(devcluster, tmp_path, monkeypatch):
    import hpcui
    import hpcui.clusters.api

    monkeypatch.setenv("HPCUI_CONFIG", str(tmp_path / "empty.toml"))
    (tmp_path / "empty.toml").write_text("")
    monkeypatch.setattr(hpcui.clusters.api, "_clusters", {})
    assert shutil.which("sbatch")
    cfg = load_config().cluster(None)
    assert cfg.name == "local" and cfg.is_local
    cluster = hpcui.connect()
    try:
        assert isinstance(cluster.transport, LocalTransport)
        assert isinstance(cluster.scheduler, SlurmScheduler)
        job = hpcui.submit(square, 7, time="5m")
        assert job.result(timeout=120) == 49
        assert job.state is JobState.COMPLETED
        assert job.job_id.isdigit()  # a Slurm id, not a local pid
        shown = cluster.run(["scontrol", "show", "job", "-o", job.job_id]).stdout
        assert "UserId=root" in shown
    finally:
        cluster.close()
