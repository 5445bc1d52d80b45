"""History on a site whose accounting keeps no job comments (the dev sites' slurmdbd, as
many: AccountingStoreFlags without job_comment): hpcui's jobs there are known only from
this machine's registry, and the History says so instead of showing "0 of 382" as if
there were none (issue 49, defect 6). The CLI from this machine and from another."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.devcluster


def jobs_history(site, data_dir: str) -> subprocess.CompletedProcess:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "HPCUI_CONFIG": os.environ["HPCUI_CONFIG"],
        "HPCUI_DATA_DIR": data_dir,
        "PYTHONPATH": str(ROOT),
        "HPCUI_AGENT": "off",
    }
    return subprocess.run(
        [sys.executable, "-m", "hpcui.cli", "-c", site.name, "jobs", "--history", "1"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_history_says_when_the_accounting_marks_no_hpcui_job(site, tmp_path):
    job = site.submit(sum, [4, 5], cpus_per_task=1, mem="100M", time="2m", name="marks")
    assert job.result(timeout=120) == 9
    here = jobs_history(site, os.environ["HPCUI_DATA_DIR"])
    assert here.returncode == 0, here.stderr
    assert job.job_id in here.stdout  # this machine's registry knows it
    elsewhere = jobs_history(site, str(tmp_path / "another-machine"))
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert job.job_id not in elsewhere.stdout  # no mark there to know it by...
    assert "accounting keeps no job comments" in elsewhere.stderr  # ...and it says so
    assert "AccountingStoreFlags=job_comment" in elsewhere.stderr
    from datetime import timedelta

    rows = site.site.history(timedelta(days=1))
    assert site.site.marks_kept is False and any(r.job_id == job.job_id and r.hpcui for r in rows)
