"""GPU and CPU use of running jobs on the dev cluster's real Slurm: the real
`srun --jobid --overlap` step on each node of the job, Slurm's own sstat and squeue -s.

The nodes' GPUs are count-only gres (no driver), so each node runs the STAND-IN
nvidia-smi (tests/stand_ins/nvidia-smi-node, mounted first on the nodes' PATH by
scripts/devcluster): GPU 0 replays a busy H100 capture, GPUs 1-3 the idle one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcui.backends.states import JobState
from tests.conftest import LOCAL_WHEELS

pytestmark = [pytest.mark.devcluster, pytest.mark.xdist_group("distributed")]

ROOT = Path(__file__).resolve().parents[2]

SMALL = {"time": "5m", "cpus_per_task": 1, "mem": "500M"}


def busy_for(seconds: float) -> int:
    """Runs on every rank: some CPU (sstat has something to count), then it ends."""
    end = time.time() + seconds
    n = 0
    while time.time() < end:
        n += sum(range(2000))
        time.sleep(0.01)
    return n


def looked(job, want_tasks: bool = True, limit: float = 90):  # type: ignore[no-untyped-def]
    """Usage once the job runs and (if asked) its ranks' step is in sstat (bounded)."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if job.state is JobState.RUNNING:
            s = job.usage()
            if s.gpus and (not want_tasks or any(t.step.endswith(".0") for t in s.tasks)):
                return s
        time.sleep(1)
    pytest.fail(f"job {job.job_id} gave no usage within {limit} s (state {job.state.value})")


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "HPCUI_CONFIG": os.environ["HPCUI_CONFIG"],
        "HPCUI_DATA_DIR": os.environ["HPCUI_DATA_DIR"],
        "PYTHONPATH": str(ROOT),
        **{k: os.environ[k] for k in LOCAL_WHEELS if k in os.environ},  # pip: no network
    }
    res = subprocess.run(
        [sys.executable, "-m", "hpcui.cli", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in res.stderr, res.stderr
    return res


def test_a_two_node_job_per_node_per_gpu_and_the_idle_verdict(dev):
    job = dev.submit(busy_for, 60, gpus=8, name="usage-2n", **SMALL)
    try:
        first = looked(job)
        assert sorted({g.node for g in first.gpus}) == ["node1", "node2"]
        assert sorted((g.node, g.index) for g in first.gpus) == [
            (n, i) for n in ("node1", "node2") for i in range(4)
        ]
        busy = sorted((g.node, g.index) for g in first.gpus if g.util_pct == 100)
        assert busy == [("node1", 0), ("node2", 0)]  # the stand-in's GPU 0 on each node
        assert {g.mem_total_mib for g in first.gpus} == {81559}
        ranks = next(t for t in first.tasks if t.step.endswith(".0"))
        assert ranks.ntasks == 8 and ranks.rss_mb and ranks.rss_mb > 1  # sstat, real
        assert first.notes == []

        second = job.usage()
        report = job.usage_report()
        assert report.samples >= 2
        # two looks seconds apart are no trend (issue 49): no verdict until enough
        assert report.verdicts[0].startswith("No verdict yet"), report.verdicts
        time.sleep(max(0.0, 10.5 - (second.at - first.at)))
        job.usage()
        report = job.usage_report()
        assert any(v.startswith("6 of 8 GPUs idle for the last") for v in report.verdicts), (
            report.verdicts
        )
        assert second.at > first.at

        top = cli("top", job.job_id, "-c", "dev", "--count", "2", "--interval", "1")
        assert top.returncode == 0, top.stderr
        assert "node2 GPU3  [....................]   0%" in top.stdout
        assert "node1 GPU0  [####################] 100%" in top.stdout
        assert top.stdout.count("hpcui top · dev") == 2
    finally:
        job.cancel()
    assert job.wait(timeout=60) is JobState.CANCELLED
    # ended: what was kept still answers, with the summary per GPU
    kept = json.loads(cli("usage", job.job_id, "-c", "dev", "--json").stdout)
    assert kept["samples"] >= 4 and len(kept["summary"]) == 8
    peaks = {(s["node"], s["index"]): s["peak_util_pct"] for s in kept["summary"]}
    assert peaks[("node1", 0)] == 100 and peaks[("node2", 3)] == 0
    shown = cli("show", job.job_id, "-c", "dev")
    assert (
        "GPU node2:0  mean 100% peak 100%, memory mean 6735 peak 6735 of 81559 MiB" in shown.stdout
    )
    as_json = json.loads(cli("show", job.job_id, "-c", "dev", "--json").stdout)
    assert len(as_json["gpu_usage"]) == 8


def test_only_the_jobs_own_gpus_and_a_job_that_does_not_run(dev):
    job = dev.submit(busy_for, 40, gpus=2, name="usage-2g", **SMALL)
    try:
        s = looked(job, want_tasks=False)
        assert len(s.gpus) == 2 and len({g.node for g in s.gpus}) == 1
    finally:
        job.cancel()
    job.wait(timeout=60)
    gone = dev.usage.look([job.job_id])[job.job_id]
    assert gone.gpus == [] and gone.notes == ["the job is not running: no node to sample"]
    human = cli("usage", "999999", "-c", "dev")
    assert human.returncode == 0
    assert "job 999999 on dev: no usage figures (the job is not running" in human.stderr


def test_the_app_shows_usage_on_the_job_screen_and_gpu_percent_in_the_table(dev):
    import asyncio

    from textual.widgets import Static

    from hpcui.tui.app import HpcuiApp
    from hpcui.tui.job_table import JobTable
    from tests.integration.test_tui_dev import SIZE, wait_for

    job = dev.submit(busy_for, 90, gpus=4, name="usage-app", **SMALL)
    key = f"dev:{job.job_id}"

    async def go() -> tuple[str, str]:
        app = HpcuiApp("dev", connect=["dev"])
        async with app.run_test(size=SIZE) as pilot:
            table = app.screen.query_one("#live", JobTable)
            await wait_for(pilot, lambda: key in table.shown, 90, "the job's row")
            await wait_for(
                pilot,
                lambda: str(table.shown[key].get("gpu_pct", "")) == "25%",
                120,
                lambda: f"GPU% of the running job: {table.shown.get(key)}",
            )  # the stand-in: GPU 0 at 100 %, GPUs 1-3 idle -> mean 25 %
            table.move_cursor(row=table.get_row_index(key))
            await pilot.press("enter")
            await pilot.pause(0.5)
            await pilot.press("u")
            usage = app.screen.query_one("#usage", Static)
            await wait_for(
                pilot,
                lambda: "node1 GPU3" in str(usage.render()) or "node2 GPU3" in str(usage.render()),
                60,
                lambda: f"the usage panel: {usage.render()}",
            )
            await wait_for(pilot, lambda: "3 of 4 GPUs idle" in str(usage.render()), 60, "verdict")
            return str(usage.render()), str(table.shown[key]["gpu_pct"])

    try:
        text, pct = asyncio.run(go())
    finally:
        job.cancel()
    assert "GPU0 ████████████████████████ 100%" in text
    assert "is the model wrapped in DDP/FSDP" in text and pct == "25%"
