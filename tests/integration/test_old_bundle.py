"""A job submitted by the client before the package moved into folders finishes, and the
client after the move reads its result: the job runs the old runtime bundle (old module
names) on the cluster, the registry and the result file are shared with the new client.

The old client is hpcui's own source at the commit before the move
(tests/fixtures/hpcui-before-folders), run from that folder in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.devcluster

OLD = ROOT / "tests" / "fixtures" / "hpcui-before-folders" / "hpcui-1f6d7a2.tar.xz"

SUBMIT = r"""
import sys
import hpcui
from hpcui.api import connect

assert hpcui.__file__.startswith(sys.argv[1]), hpcui.__file__  # the old client, not today's
import hpcui.cluster  # a module that exists only before the move

def summary(values):
    import time
    time.sleep(2)
    return {"n": len(values), "total": sum(values), "pair": (min(values), max(values))}

def breaks(x):
    raise ValueError(f"old bundle says no to {x}")

dev = connect("dev")
ok = dev.submit(summary, [3, 4, 5], time="5m", cpus_per_task=1, mem="200M")
bad = dev.submit(breaks, 7, time="5m", cpus_per_task=1, mem="200M")
print(ok.job_id, bad.job_id, ok.folder)
dev.close()
"""


@pytest.mark.timeout(300)
def test_a_job_submitted_before_the_move_is_read_after_it(dev_env: Path, tmp_path: Path) -> None:
    old = tmp_path / "old"
    with tarfile.open(OLD) as tar:
        tar.extractall(old, filter="data")
    (old / "hpcui" / "backends").symlink_to(Path("..") / "backends")  # its package-dir mapping
    env = {
        **os.environ,
        "PYTHONPATH": str(old),
        "HPCUI_AGENT": "off",
        "HPCUI_CONFIG": str(dev_env),
    }
    made = subprocess.run(
        [sys.executable, "-c", SUBMIT, str(old)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    ok_id, bad_id, folder = made.stdout.split()

    import hpcui
    from hpcui.clusters.api import connect

    dev = connect("dev")
    try:
        job = hpcui.get_job(dev, ok_id)
        assert job.result(timeout=180) == {"n": 3, "total": 12, "pair": (3, 5)}
        with pytest.raises(hpcui.JobFailedError, match="old bundle says no to 7"):
            hpcui.get_job(dev, bad_id).result(timeout=180)
        # the job ran the old bundle: its batch script names the old runner module
        script = dev.run(["cat", f"{folder}/submission.sh"]).check("cat").stdout
        assert "-m hpcui.compute.signed" in script and "hpcui.node" not in script
    finally:
        dev.close()
