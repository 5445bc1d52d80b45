"""When would it start? (issue 48, part 1) The scheduler's own estimate on the dev sites:
Slurm's `sbatch --test-only` per candidate partition, a later start while the nodes are
busy, the CLI's `script --estimate` and `submit --estimate` (nothing submitted), the
Submit form's line (Pilot), and PBS's honest "no estimate"."""

from __future__ import annotations

import json
import time
from datetime import datetime

import pytest

from hpcui.backends.states import JobState
from tests.integration.test_any_job import sbatch_script, wait_state
from tests.integration.test_usage_dev import cli

pytestmark = pytest.mark.devcluster


def test_busy_nodes_give_a_later_start_in_a_named_partition(site):
    # one node taken whole for a minute (the other stays for the other tests' jobs): a
    # request for both nodes starts after it
    last = site.run("sinfo -h -N -p cpu -o %N | sort -u | tail -1").check().stdout.strip()
    blocker = sbatch_script(site, "#!/bin/bash\nsleep 60\n", "--exclusive",
                            f"--nodelist={last}", "--time=1", "--partition=cpu")  # fmt: skip
    try:
        wait_state(site, blocker, {JobState.RUNNING})
        before = {r.token for r in site.records()}
        found = site.estimate_start(time="5m", nodes=2, cpus_per_task=1)
        assert {r.token for r in site.records()} == before  # nothing was submitted
        by_partition = {e.partition: e for e in found}
        assert "cpu" in by_partition, found
        cpu = by_partition["cpu"]
        assert cpu.start is not None and cpu.nodes, cpu
        assert (cpu.start - datetime.now()).total_seconds() > 20, cpu  # after the blocker
    finally:
        site.control.cancel([blocker])
    time.sleep(1)
    found = site.estimate_start(time="5m", nodes=2, cpus_per_task=1)
    free = {e.partition: e for e in found}["cpu"]
    assert free.start is not None and (free.start - datetime.now()).total_seconds() < 60


def test_the_cli_estimates_without_submitting(site, tmp_path):
    res = cli("-c", site.name, "script", "--time", "5m", "--estimate", "--json")
    assert res.returncode == 0, res.stderr
    estimates = json.loads(res.stdout)["estimates"]
    assert estimates and all(e["start"] for e in estimates), estimates
    res = cli("-c", site.name, "submit", "json:dumps", "--args", "[1]", "--estimate")
    assert res.returncode == 0, res.stderr
    assert "(nothing submitted)" in res.stderr and "start in cpu:" in res.stderr, res.stderr
    assert res.stdout == ""  # no job id: nothing was submitted


def test_pbs_says_it_gives_no_estimate(dev_env):
    res = cli("-c", "pbs", "submit", "json:dumps", "--args", "[1]", "--estimate", "--json")
    assert res.returncode == 0, res.stderr
    said = json.loads(res.stdout)
    assert said["estimates"] and all(e["start"] is None for e in said["estimates"])
    assert "PBS gives no start estimate before a job is queued" in said["estimates"][0]["said"]


def test_the_submit_form_shows_the_schedulers_estimate(site):
    """Pilot: the estimate comes after the preview, off the typing (a worker), and follows
    the request."""
    import asyncio

    from hpcui.tui.app import HpcuiApp
    from tests.support.pilot import wait_for

    async def go() -> tuple[str, str]:
        app = HpcuiApp(site.name, connect=[site.name])
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: app.hub.conns[site.name].status == "connected", 60)
            await pilot.press("3")
            form = app.screen
            form.query_one("#target").value = "json:dumps"
            form.query_one("#res-time").value = "5m"
            await wait_for(pilot, lambda: "start estimate:" in form.estimate_text, 30)
            first = form.estimate_text
            form.query_one("#res-partition").value = "gpu"
            await wait_for(pilot, lambda: form.estimate_text.startswith("start estimate: gpu "), 30)
            return first, form.estimate_text

    first, gpu = asyncio.run(go())
    assert first.startswith("start estimate: cpu ") and " on " in first, first
    assert "cpu" not in gpu.removeprefix("start estimate: gpu "), gpu  # only the named one
