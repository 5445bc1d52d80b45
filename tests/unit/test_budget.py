"""The budget's ledger read from a real sshare/squeue answer of the dev cluster
(tests/fixtures/slurm-22.05.8-dev/ledger.txt), a submission's cost, and the refusal."""

from __future__ import annotations

import pytest

from hpcui.backends.slurm import ledger
from hpcui.profiles import load_profile
from hpcui.request.cost import cost_of
from hpcui.request.plan import resolve
from hpcui.request.resources import Resources
from hpcui.sitestate.budget import BudgetExceeded, budget_of, check
from tests.conftest import FIXTURES, fixture_text

ANSWER = (FIXTURES / "slurm-22.05.8-dev" / "ledger.txt").read_text()


def parsed() -> ledger.LedgerAnswer:
    shares, queue, default = ledger.split_answer(ANSWER)
    return ledger.LedgerAnswer(
        associations=ledger.parse_associations(shares),
        jobs=ledger.parse_queue(queue),
        default_account=ledger.parse_default_account(default),
    )


def test_sshare_rows_know_their_parents_and_figures():
    rows = parsed().associations
    assert [(r.account, r.user, r.depth) for r in rows] == [
        ("root", "", 0), ("hpcacct", "", 1), ("hpcacct", "hpcuser", 2),
        ("hpcgrant", "", 1), ("hpcgrant", "hpcuser", 2),
    ]  # fmt: skip
    assert rows[4].parents == (0, 3) and rows[2].parents == (0, 1)
    assert rows[3].limits == {"cpu": 600.0}
    assert rows[3].running["cpu"] == 10.0 and rows[0].used["gres/gpu"] == 27.0


def test_the_queue_counts_each_array_task_and_its_limit():
    jobs = parsed().jobs
    grant = [j for j in jobs if j.account == "hpcgrant"]
    assert [j.job_id for j in grant] == ["44_0", "44_1", "44_2", "43", "42"]
    assert [j.pending for j in grant] == [True, True, True, True, False]
    assert grant[3].tres["cpu"] == 2 and grant[3].limit_min == 20
    assert grant[0].tres["mem"] == 100.0  # MB
    assert parsed().default_account == "hpcacct"


def test_the_ledger_spent_in_flight_committed_left():
    budget = budget_of(parsed())
    (line,) = budget.binding("hpcgrant")
    assert (line.account, line.user, line.tres, line.unit) == ("hpcgrant", "", "cpu", "core-h")
    assert line.limit == 10.0 and line.spent == 0.0
    assert line.in_flight == pytest.approx(10 / 60)  # job 42: 1 CPU x 10 min, Slurm's figure
    assert line.committed == pytest.approx((3 * 1 * 5 + 2 * 20) / 60)  # 44's tasks and 43
    assert line.left == pytest.approx(10 - 10 / 60 - 55 / 60)
    assert budget.binding("hpcacct") == [] and budget.binding(None) == []  # no limit there
    assert budget.pending_jobs == 4 and budget.running_jobs == 2
    unlimited = [ln for ln in budget.lines if ln.limit is None]
    assert {(ln.account, ln.tres) for ln in unlimited} == {
        ("hpcacct", "cpu"),
        ("hpcacct", "gres/gpu"),
    }  # hpcgrant: its limit binds, its user line would say nothing more
    assert budget.note == ""


def test_a_limit_on_a_parent_account_binds_the_accounts_below_it():
    text = ANSWER.replace("root|||", "root||gres/gpu=60|", 1)
    shares, queue, _ = ledger.split_answer(text)
    budget = budget_of(ledger.LedgerAnswer(ledger.parse_associations(shares),
                                           ledger.parse_queue(queue), "hpcacct"))  # fmt: skip
    (root,) = budget.binding(None)  # the default account hpcacct, under root
    assert (root.account, root.tres, root.unit, root.limit) == ("root", "gres/gpu", "GPU-h", 1.0)
    assert root.spent == pytest.approx(27 / 60) and root.in_flight == pytest.approx(20 / 60)
    assert root.committed == 0  # no pending job of the user asks for a GPU
    assert [ln.account for ln in budget.binding("hpcgrant")] == ["root", "hpcgrant"]


def plan(**kw):
    return resolve(Resources.from_kwargs(**kw), load_profile("dev"))


def test_what_a_sweep_costs_at_its_time_limits():
    cost = cost_of(plan(cpus_per_task=2, time="1h", account="hpcgrant"), 12, "12 array tasks")
    assert cost is not None and cost.hours["cpu"] == 24.0 and cost.hours["node"] == 12.0
    assert cost.each == "2 CPUs, 01:00:00" and cost.account == "hpcgrant"
    gpu = cost_of(plan(gpus=2, time="30m"), 4, "4 jobs")
    assert gpu is not None and gpu.hours["gres/gpu"] == 4.0
    assert cost_of(plan(), 3, "3 jobs") is None  # no time and no partition limit: unknown
    assert cost_of(plan(), 3, "3 jobs", limit_s=7200).hours["cpu"] == 6.0


def test_a_cost_beyond_whats_left_is_refused_with_the_figures():
    budget = budget_of(parsed())
    small = cost_of(plan(time="1h", account="hpcgrant"), 8, "8 array tasks")
    check(small, budget, 1.0)  # 8 core-h of 8.9 left
    big = cost_of(plan(time="1h", account="hpcgrant"), 12, "a sweep of 12")
    with pytest.raises(BudgetExceeded) as err:
        check(big, budget, 1.0)
    said = str(err.value)
    assert "a sweep of 12 would cost up to 12.0 core-h (12 x 1 CPU, 01:00:00)" in said
    assert "account hpcgrant has 8.9 core-h left" in said and "limit 10.0" in said
    assert "Nothing was queued" in said
    with pytest.raises(BudgetExceeded, match=r"budget_guard 0\.5: at most 4\.5"):
        check(small, budget, 0.5)
    check(cost_of(plan(time="1h"), 500, "500 tasks"), budget, 1.0)  # hpcacct: no limit


def test_another_layout_is_a_clear_error():
    with pytest.raises(ValueError, match="sshare printed 2 fields"):
        ledger.parse_associations("sshare: error: Problem talking to the database|x\n")
    with pytest.raises(ValueError, match=r"expected 7 '\|'-separated fields, got 3"):
        ledger.parse_queue("1|R|x\n")


class LedgerOnly:
    """A scheduler that answers only `ledger()`, from the captured answer, and counts."""

    name = "slurm"

    def __init__(self) -> None:
        self.calls = 0

    def ledger(self) -> ledger.LedgerAnswer:
        self.calls += 1
        return parsed()


def site_of(scheduler: LedgerOnly):
    from hpcui.config import ClusterConfig
    from hpcui.sitestate.site import SiteView

    return SiteView(
        name="dev", config=ClusterConfig(), profile=load_profile("dev"), transport=None,
        scheduler=scheduler, registry=None, setup=lambda: [], before_listing=lambda: None,
    )  # fmt: skip


def test_an_account_without_limit_is_not_asked_again_on_every_array():
    sched = LedgerOnly()
    site = site_of(sched)
    free = cost_of(plan(time="1h"), 500, "500 tasks")  # hpcacct, the default: no limit
    site.check_budget(free, 1.0)
    site.check_budget(free, 1.0)
    assert sched.calls == 1  # asked again only after NO_LIMIT_RECHECK_S
    big = cost_of(plan(time="1h", account="hpcgrant"), 12, "12 array tasks")
    for _ in range(2):
        with pytest.raises(BudgetExceeded):
            site.check_budget(big, 1.0)
    assert sched.calls == 3  # a limit seen: every array is checked


def test_a_site_tools_grants_count_running_and_pending_jobs_at_the_sites_rate():
    """lumi-allocations (its own printing code's layout, tests/fixtures/allocation-
    constructed) counts finished jobs only: a running job is in flight for its whole
    limit, a pending one committed, each billed by the LUMI-G profile's rule."""
    from hpcui.backends.allocations import parse_lumi_allocations
    from hpcui.sitestate.budget import tool_lines

    entries = parse_lumi_allocations(fixture_text("allocation-constructed/lumi_allocations.txt"))
    project = "project_465000123"
    jobs = [  # small-g: 0.5 x max(cores/8, mem/64G, GPUs) GPU-hours per hour
        ledger.QueuedJob("1", False, project, "small-g",
                         {"cpu": 14, "mem": 120 * 1024, "node": 1, "gres/gpu": 2}, 120, 60),
        ledger.QueuedJob("2", True, project, "standard-g",  # whole nodes: 4 an hour each
                         {"cpu": 112, "mem": 480 * 1024, "node": 2, "gres/gpu": 16}, 60, 60),
        ledger.QueuedJob("3", True, project, "small", {"cpu": 4, "node": 1, "billing": 4}, 60, 60),  # CPU
    ]  # fmt: skip
    lines = {ln.kind: ln for ln in tool_lines("lumi-allocations", entries, jobs,
                                              load_profile("lumi-g")) if ln.account == project}  # fmt: skip
    gpu = lines["gpu"]
    assert (gpu.limit, gpu.spent, gpu.unit, gpu.source) == (
        5000,
        3071,
        "gpu/hours",
        "lumi-allocations",
    )
    assert gpu.in_flight == pytest.approx(0.5 * 2 * 2)  # max(14/8->2, 120G/64G->2, 2) x 2 h
    assert gpu.committed == pytest.approx(4 * 2 * 1)  # 2 whole nodes x 1 h
    assert gpu.left == pytest.approx(5000 - 3071 - 2 - 8)
    # a partition the profile has no rule for: Slurm's billing TRES, 4 an hour
    assert lines["cpu"].committed == pytest.approx(4) and lines["cpu"].in_flight == 0

    from hpcui.sitestate.budget import Budget

    budget = Budget(source="t", lines=list(lines.values()), default_account=project)
    big = cost_of(resolve(Resources.from_kwargs(gpus=8, nodes=1, time="48h", account=project,
                                                partition="standard-g"), load_profile("lumi-g")),
                  12, "12 array tasks")  # fmt: skip
    with pytest.raises(BudgetExceeded, match=r"12 array tasks would cost up to 2,304\.0 gpu/hours"):
        check(big, budget, 1.0)  # 12 x 4 units/h x 48 h against 1,919 left


def test_the_site_reads_its_tool_into_the_ledger_and_refuses_by_it():
    """SiteView.budget on a LUMI-G profile: Slurm's ledger (the dev capture) and the
    tool's grants (its printing code's layout), one call each; the refusal by a grant."""
    from hpcui.config import ClusterConfig
    from hpcui.sitestate.site import SiteView
    from hpcui.transport.base import CommandResult
    from tests.canned import CannedTransport

    said = fixture_text("allocation-constructed/lumi_allocations.txt")
    tool = CannedTransport({"lumi-allocations": CommandResult(0, said.encode(), b"")}, strict=True)
    sched = LedgerOnly()
    site = SiteView(
        name="lumi", config=ClusterConfig(), profile=load_profile("lumi-g"), transport=tool,
        scheduler=sched, registry=None, setup=lambda: [], before_listing=lambda: None,
    )  # fmt: skip
    budget = site.budget()
    grants = [ln for ln in budget.lines if ln.source == "lumi-allocations"]
    assert {(ln.account, ln.kind) for ln in grants} == {
        ("project_465000123", "cpu"), ("project_465000123", "gpu"), ("project_465000456", "gpu")
    }  # fmt: skip
    assert tool.commands == ["lumi-allocations"] and sched.calls == 1
    over = cost_of(resolve(Resources.from_kwargs(gpus=1, time="1h", account="project_465000456",
                                                 partition="small-g"), load_profile("lumi-g")),
                   1, "1 job")  # fmt: skip
    with pytest.raises(BudgetExceeded, match=r"account project_465000456 has 0\.0 gpu/hours left"):
        site.check_budget(over, 1.0)  # 1200 used of 1000
