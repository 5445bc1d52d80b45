"""Issue 59's must-show for Hydra on the dev cluster's real Slurm: `python train.py -m
lr=0.1,0.01 seed=1,2 hydra/launcher=hpcui` from this side (the laptop's) runs the multirun
as one hpcui sweep of 4 array tasks (counted in sacct), the 4 results come back, and
Hydra's output folders - `.hydra/`, the job's log, what the task wrote - are here, each
with the overrides it ran. Hydra runs for real on both sides (the jobs' venv has it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid

import pytest
import yaml

from tests.conftest import ROOT
from tests.integration.ranks import VENV_PYTHON
from tests.integration.test_sweeps import _scheduler_count

pytestmark = [pytest.mark.devcluster, pytest.mark.timeout(300)]


def test_a_hydra_multirun_from_the_laptop_is_one_sweep_with_its_folders_here(dev, tmp_path):
    import hpcui

    app = tmp_path / "app"
    shutil.copytree(ROOT / "examples" / "hydra_sweep", app)
    name = f"hydra-{uuid.uuid4().hex[:8]}"
    argv = [sys.executable, str(app / "train.py"), "-m", "lr=0.1,0.01", "seed=1,2",
            "hydra/launcher=hpcui", "hydra.launcher.cluster=dev", f"hydra.launcher.name={name}",
            "hydra.launcher.time=5m", "hydra.launcher.mem=1G",
            f"hydra.launcher.python={VENV_PYTHON}", "hydra.sweep.dir=multirun"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # hydra_plugins/ of this checkout
    res = subprocess.run(argv, cwd=app, env=env, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"sweep {name!r} on dev: 4 configurations, 4 submitted now" in res.stdout + res.stderr

    assert _scheduler_count(dev, name, expect=4) == 4
    rows = {(r["lr"], r["seed"]): r for r in hpcui.get_sweep(dev, name).results()}
    assert set(rows) == {(0.1, 1), (0.1, 2), (0.01, 1), (0.01, 2)}
    assert {r["state"] for r in rows.values()} == {"COMPLETED"}

    subs = sorted(p for p in (app / "multirun").iterdir() if p.is_dir())
    assert [p.name for p in subs] == ["0", "1", "2", "3"]
    home_jobs = []
    for sub in subs:
        overrides = yaml.safe_load((sub / ".hydra" / "overrides.yaml").read_text())
        lr, seed = (float(overrides[0].split("=")[1]), int(overrides[1].split("=")[1]))
        config = yaml.safe_load((sub / ".hydra" / "config.yaml").read_text())
        assert (config["lr"], config["seed"]) == (lr, seed)
        loss = float((sub / "loss.txt").read_text())
        assert rows[(lr, seed)]["result.loss"] == pytest.approx(loss, abs=1e-6)
        assert "final loss" in (sub / "train.log").read_text()
        hydra_cfg = yaml.safe_load((sub / ".hydra" / "hydra.yaml").read_text())["hydra"]
        assert hydra_cfg["job"]["num"] == int(sub.name)
        home_jobs.append(hydra_cfg["runtime"]["output_dir"])
    # each ran in its job's folder on the cluster, not on this machine
    assert all(d.startswith("/home/hpcuser/.hpcui/") and "/hydra/" in d for d in home_jobs)
    assert not any(os.path.exists(d) for d in home_jobs)
