"""A user profile on the dev cluster: `[profiles.NAME]` with `base = "dev"` gives the
Python and setup lines to a cluster config that sets neither, and a submit works."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.devcluster


def env_and_executable(name):
    import os
    import sys

    return os.environ.get(name), sys.executable


def test_user_profile_python_and_setup_reach_the_job(devcluster, tmp_path, monkeypatch):
    import hpcui.clusters.api
    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config

    dev = load_config(devcluster).cluster("dev")
    cfg = tmp_path / "hpcui.toml"
    cfg.write_text(
        f"""
[profiles.mydev]
base = "dev"
description = "the dev cluster, with our Python"
python = "/usr/bin/python3"
setup = ["export HPCUI_FROM_PROFILE=yes"]

[clusters.mine]
host = "{dev.host}"
ssh_config = "{dev.ssh_config}"
profile = "mydev"
remote_base = "{dev.remote_base}"
""",
        encoding="utf-8",
    )
    monkeypatch.setenv("HPCUI_CONFIG", str(cfg))
    monkeypatch.setattr(hpcui.clusters.api, "_clusters", {})
    mine = load_config().cluster("mine")
    assert mine.python is None and mine.setup is None  # the cluster sets neither
    with Cluster(mine) as c:
        assert c.profile.name == "mydev" and c.profile.gpus_per_node == 4  # from `dev`
        assert (c.python, c.setup) == ("/usr/bin/python3", ["export HPCUI_FROM_PROFILE=yes"])
        assert c.remote_info().python_version is not None
        job = c.submit(env_and_executable, "HPCUI_FROM_PROFILE", time="5m")
        assert job.result(timeout=120) == ("yes", "/usr/bin/python3")
