"""Issue 59's must-show for the budget, on the dev cluster's real Slurm: its account
`hpcgrant` holds an allocation Slurm enforces (GrpTRESMins=cpu=600, 10 core-hours; set up
by scripts/devcluster). With a job running and one pending there, `hpcui budget` shows
spent / in flight / committed that match sshare and the queue as asked separately; a sweep
and a chain that cost more than is left are refused before anything queues, with the
figures; the same sweep with a time limit that fits is then submitted whole, once."""

from __future__ import annotations

import json
import uuid

import pytest

from hpcui.backends.states import JobState
from tests.integration.test_cli import hpcui, ok_json, work  # noqa: F401 (fixture)
from tests.integration.test_sweeps import _scheduler_count
from tests.support.jobs import wait_job_state

pytestmark = [pytest.mark.devcluster, pytest.mark.timeout(300)]

GRANT = "hpcgrant"


def nap(s: float) -> float:
    import time

    time.sleep(s)
    return s


def score(x: int) -> int:
    return x * x


def sshare_cpu(cluster) -> dict[str, float]:
    """The account row's cpu figures in minutes, from sshare asked directly."""
    said = cluster.run(["sshare", "-n", "-P", "-A", GRANT,
                        "-o", "Account,User,GrpTRESMins,GrpTRESRaw,TRESRunMins"]).stdout  # fmt: skip
    row = next(line for line in said.splitlines() if line.strip().startswith(f"{GRANT}||"))
    _, _, limit, raw, run = row.strip().split("|")

    def cpu(text: str) -> float:
        return float(dict(kv.split("=") for kv in text.split(","))["cpu"])

    return {"limit": cpu(limit), "raw": cpu(raw), "run": cpu(run)}


def pending_cpu_minutes(cluster) -> float:
    """The user's pending jobs in the account at their limits, from squeue asked directly."""
    said = cluster.run(["squeue", "--me", "-r", "-h", "-t", "PD", "-A", GRANT,
                        "-o", "%C %l"]).stdout  # fmt: skip
    total = 0.0
    for line in said.split("\n"):
        if line.strip():
            cpus, limit = line.split()
            h, m, s = ([0, 0] + [int(x) for x in limit.split(":")])[-3:]
            total += int(cpus) * (h * 60 + m + s / 60)
    return total


def test_the_budget_ledger_and_a_sweep_refused_before_it_queues(dev, work):  # noqa: F811
    import hpcui as sdk
    from hpcui.sitestate import BudgetExceeded

    running = dev.submit(nap, 45, account=GRANT, time="10m", mem="200M", name="budget-run")
    held = dev.run(["sbatch", "--parsable", "-H", "-A", GRANT, "-n", "2", "-t", "120",
                    "--mem=100M", "-o", "/dev/null", "-J", "budget-held", "--wrap", "true"])  # fmt: skip
    held_id = held.stdout.strip().split(";")[0]
    assert held.ok and held_id.isdigit(), held.stderr
    try:
        wait_job_state(running, {JobState.RUNNING}, timeout=90)
        budget = dev.site.budget()
        asked = sshare_cpu(dev)
        queued = pending_cpu_minutes(dev)
        (line,) = budget.binding(GRANT)
        assert (line.account, line.user, line.tres, line.unit) == (GRANT, "", "cpu", "core-h")
        assert line.limit == asked["limit"] / 60 == 10.0
        assert line.spent == pytest.approx(asked["raw"] / 60, abs=0.1)
        assert line.in_flight == pytest.approx(asked["run"] / 60, abs=0.1)
        assert line.in_flight > 0.1  # the running job: 1 CPU to its 10 minutes
        assert line.committed == pytest.approx(queued / 60) and queued >= 240  # the held job
        left = line.left
        assert left is not None and left < 6.0

        shown = hpcui(work, "budget")
        assert shown.returncode == 0, shown.stderr
        row = next(r for r in shown.stdout.splitlines() if r.startswith(GRANT) and "(all)" in r)
        assert f"{line.limit:,.1f}" in row and f"{line.committed:,.1f}" in row
        ledger = ok_json(hpcui(work, "budget", "--json"))["ledger"]
        assert any(r["account"] == GRANT and r["limit"] == 10.0 for r in ledger["lines"])
        est = hpcui(work, "script", "--estimate", "--array", "12", "--time", "1h",
                    "--account", GRANT)  # fmt: skip
        assert est.returncode == 0, est.stderr
        assert "cost: at most 12.0 core-h (12 x 1 CPU, 01:00:00)" in est.stderr
        assert f"{GRANT}: " in est.stderr and "left of 10.0" in est.stderr

        name = f"budget-{uuid.uuid4().hex[:8]}"
        with pytest.raises(BudgetExceeded) as refused:
            sdk.sweep(score, grid={"x": list(range(12))}, name=name, cluster=dev,
                        time="1h", account=GRANT)  # fmt: skip
        said = str(refused.value)
        assert "12 array tasks would cost up to 12.0 core-h (12 x 1 CPU, 01:00:00)" in said
        assert f"account {GRANT} has" in said and "limit 10.0" in said
        assert "Nothing was queued" in said
        assert _scheduler_count(dev, name) == 0
        with pytest.raises(BudgetExceeded, match=r"a chain of 4 jobs would cost up to 8\.0"):
            dev.submit(score, 2, chain=4, time="2h", account=GRANT)

        # the same sweep asking for what fits: submitted whole, once
        fits = sdk.sweep(score, grid={"x": list(range(12))}, name=name, cluster=dev,
                           time="5m", account=GRANT)  # fmt: skip
        assert len(fits.last_submitted) == 12  # the array's 12 tasks
        fits.wait(timeout=180)
        assert sorted(r["result"] for r in fits.results(metrics=False)) == sorted(
            x * x for x in range(12)
        )
        assert _scheduler_count(dev, name, expect=12) == 12
    finally:
        dev.control.cancel([running.job_id, held_id])


def test_budget_on_a_site_without_limits_says_so(dev):
    budget = dev.site.budget()
    assert budget.binding("hpcacct") == []
    mine = [ln for ln in budget.lines if ln.account == "hpcacct" and ln.user]
    assert mine and mine[0].limit is None and mine[0].left is None
    assert json.loads(budget.model_dump_json())["lines"]
