"""Issue 59's Hydra launcher on the `local` box (real processes, real Hydra): a multirun as
one named hpcui sweep whose output folders come back as Hydra's own launcher leaves them;
two jobs that diverge fail Hydra's run as they would with its basic launcher; the config
fixed, the same command runs exactly those two again; once more, nothing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

pytestmark = pytest.mark.timeout(300)

EXAMPLE = ROOT / "examples" / "hydra_sweep"


def multirun(app: Path, where: str, *overrides: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, str(app / "train.py"), "-m", *overrides, "hydra/launcher=hpcui",
            "hydra.launcher.cluster=local", "hydra.launcher.name=scan", "hydra.launcher.time=5m",
            f"hydra.sweep.dir={app / where}"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # hydra_plugins/ of this checkout
    return subprocess.run(argv, cwd=app, env=env, capture_output=True, text=True, timeout=240)


def submitted(res: subprocess.CompletedProcess) -> int:
    said = re.search(r"hpcui: sweep 'scan' on local: 4 configurations, (\d+) submitted now",
                     res.stdout + res.stderr)  # fmt: skip
    assert said, res.stdout + res.stderr
    return int(said.group(1))


def folders(top: Path) -> dict[tuple[str, ...], Path]:
    """Each job folder of a multirun by its overrides (Hydra's .hydra/overrides.yaml)."""
    out = {}
    for sub in sorted(p for p in top.iterdir() if p.is_dir()):
        for name in ("config.yaml", "hydra.yaml", "overrides.yaml"):
            assert (sub / ".hydra" / name).is_file(), f"{sub} lacks .hydra/{name}"
        out[tuple(yaml.safe_load((sub / ".hydra" / "overrides.yaml").read_text()))] = sub
    return out


def test_a_multirun_is_one_sweep_resumed_by_running_it_again(local_box, tmp_path):
    import hpcui

    app = tmp_path / "app"
    shutil.copytree(EXAMPLE, app)
    grid = ("lr=0.1,0.6", "seed=1,2")  # lr=0.6 diverges (loss > max_loss) at step 1
    first = multirun(app, "run1", *grid)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "diverged at step 1" in first.stderr
    assert submitted(first) == 4
    run1 = folders(app / "run1")
    assert len(run1) == 4
    done = {k for k, sub in run1.items() if (sub / "loss.txt").exists()}
    assert done == {("lr=0.1", "seed=1"), ("lr=0.1", "seed=2")}
    config = yaml.safe_load((run1[("lr=0.1", "seed=2")] / ".hydra" / "config.yaml").read_text())
    assert config["lr"] == 0.1 and config["seed"] == 2
    hydra_cfg = yaml.safe_load((run1[("lr=0.1", "seed=2")] / ".hydra" / "hydra.yaml").read_text())
    ran_in = hydra_cfg["hydra"]["runtime"]["output_dir"]
    assert ran_in.startswith(f"{tmp_path}/base/") and "/hydra/" in ran_in  # the job's folder
    assert "final loss" in (run1[("lr=0.1", "seed=2")] / "train.log").read_text()

    sweep = hpcui.get_sweep("local", "scan")
    assert sweep.counts() == {"COMPLETED": 2, "FAILED": 2}

    # the user fixes the config (not an override: the same four configurations) and reruns
    conf = app / "conf" / "config.yaml"
    conf.write_text(conf.read_text().replace("max_loss: 1.0", "max_loss: 100.0"))
    second = multirun(app, "run2", *grid)
    assert second.returncode == 0, second.stdout + second.stderr
    assert submitted(second) == 2
    run2 = folders(app / "run2")
    assert all((sub / "loss.txt").exists() for sub in run2.values()) and len(run2) == 4
    rows = {(r["lr"], r["seed"]): r for r in sweep.results()}
    assert {k: r["state"] for k, r in rows.items()} == {
        (0.1, 1): "COMPLETED", (0.1, 2): "COMPLETED", (0.6, 1): "COMPLETED", (0.6, 2): "COMPLETED"
    }  # fmt: skip
    assert [e.attempts for e in sweep.elements()] == [1, 1, 2, 2]
    for (lr, seed), sub in run2.items():
        key = (float(lr.split("=")[1]), int(seed.split("=")[1]))
        loss = float((sub / "loss.txt").read_text())
        assert rows[key]["result.loss"] == pytest.approx(loss, abs=1e-6)

    third = multirun(app, "run3", *grid)
    assert third.returncode == 0, third.stdout + third.stderr
    assert submitted(third) == 0
    assert len(folders(app / "run3")) == 4
