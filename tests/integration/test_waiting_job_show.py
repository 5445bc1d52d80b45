"""`hpcui show` of a waiting hpcui job says why it waits, on what, and for how long it may
run, and confirms an `update --time` at once; `jobs` never shows an empty reason `()`
after a release (issue 49, defect 5). Both Slurm sites, through the CLI."""

from __future__ import annotations

import time

import pytest

from tests.integration.test_usage_dev import cli

pytestmark = pytest.mark.devcluster


def fields(text: str) -> dict[str, str]:
    """`show`'s key/value lines (keys padded to one width, two spaces before the value)."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition("  ")
        out.setdefault(key.strip(), value.strip())
    return out


def test_show_of_held_and_dependent_jobs_and_a_lowered_limit(site, tmp_path):
    # held from its submit: a hold after it would race the job's start on an idle cluster
    first = site.submit(
        sum, [1, 2], time="5m", cpus_per_task=1, mem="100M", name="held", extra=["--hold"]
    )
    second = site.submit(
        sum, [3], time="4m", cpus_per_task=1, mem="100M", name="after", after_ok=[first.job_id]
    )
    try:
        res = cli("-c", site.name, "show", second.job_id)
        assert res.returncode == 0, res.stderr
        shown = fields(res.stdout)
        assert shown["state"].startswith("PENDING"), shown
        assert "Dependency" in shown["reason"], shown
        assert first.job_id in shown["dependency"], shown
        assert shown.get("time limit") == "00:04:00", shown
        assert "script" not in shown and "work dir" not in shown  # hpcui's own: `folder`
        assert "exit code" not in shown  # Slurm's 0:0 of a job that has not run

        held = fields(cli("-c", site.name, "show", first.job_id).stdout)
        assert "Held" in held["reason"] or "held" in held["reason"].lower(), held
        res = cli("-c", site.name, "update", first.job_id, "--time", "3m")
        assert res.returncode == 0, res.stderr
        held = fields(cli("-c", site.name, "show", first.job_id).stdout)
        assert held.get("time limit") == "00:03:00", held  # confirmed at once

        res = cli("-c", site.name, "release", first.job_id)
        assert res.returncode == 0, res.stderr
        rows = cli("-c", site.name, "jobs").stdout
        assert "()" not in rows, rows
    finally:
        site.control.cancel([second.job_id, first.job_id])
        time.sleep(0.5)
