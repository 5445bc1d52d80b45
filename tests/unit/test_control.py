"""hpcui.jobs.control: job verbs on any ids, and the one fan-out the CLI and the app share.
A real SlurmScheduler answered by a canned transport (scancel's captured refusal from
tests/unit/test_slurm_refusals.py)."""

from __future__ import annotations

import pytest

from hpcui.errors import ClusterConnectionError, UsageError
from hpcui.jobs.control import DONE, JobControl, fan_out
from hpcui.schedulers.slurm import SlurmScheduler
from tests.canned import CannedTransport, ok
from tests.conftest import fixture_text

REFUSED = "scancel: error: Kill job error on job id 32: Access/permission denied\n"


def control(name: str, *answers, changed=None) -> tuple[JobControl, CannedTransport]:
    transport = CannedTransport(list(answers))
    told: list[list[str]] = [] if changed is None else changed
    part = JobControl(
        name=name,
        remote_base="~/.hpcui",
        transport=transport,
        scheduler=SlurmScheduler(transport),
        changed=told.append,
    )
    return part, transport


def test_one_scheduler_call_per_cluster_in_the_order_clusters_appear():
    a, ta = control("a", ok(), ok())
    b, tb = control("b", ok())
    jobs = [("b", "7"), ("a", "1"), ("b", "8"), ("a", "2")]
    outcomes = list(fan_out("hold", jobs, {"a": a, "b": b}.__getitem__))
    assert [(o.cluster, o.job_ids, o.error) for o in outcomes] == [
        ("b", ["7", "8"], None),
        ("a", ["1", "2"], None),
    ]
    assert tb.commands == ["scontrol hold 7,8"] and ta.commands == ["scontrol hold 1,2"]


def test_a_cluster_that_fails_fails_only_its_own_jobs():
    told: list[list[str]] = []
    good, tg = control("good", ok(), changed=told)
    bad, _ = control("bad", ok("", REFUSED, rc=1))

    def reach(name: str | None) -> JobControl:
        if name == "gone":
            raise ClusterConnectionError("gone: the login node does not answer")
        return {"good": good, "bad": bad}[name or "good"]

    jobs = [("gone", "5"), ("bad", "32"), (None, "9")]
    outcomes = list(fan_out("cancel", jobs, reach))
    assert [o.cluster for o in outcomes] == ["gone", "bad", "good"]
    assert isinstance(outcomes[0].error, ClusterConnectionError)
    assert isinstance(outcomes[1].error, UsageError) and "not yours" in str(outcomes[1].error)
    assert outcomes[2].error is None and outcomes[2].job_ids == ["9"]
    assert tg.commands == ["scancel --verbose 9"] and told == [
        ["9"]
    ]  # fast polling for the cancelled
    assert DONE["cancel"] == "cancelled"


def test_a_verb_without_ids_says_what_to_give():
    part, transport = control("a")
    with pytest.raises(UsageError, match="name at least one job id"):
        part.hold([])
    part.cancel([])  # cancelling nothing is nothing (as scancel of no job)
    assert transport.commands == []


def test_a_new_time_limit_is_read_once_and_a_bad_one_is_refused_before_any_call():
    part, transport = control("a", ok())
    part.set_time_limit("12", "90m")
    assert transport.commands == ["scontrol update JobId=12 TimeLimit=01:30:00"]
    with pytest.raises(UsageError, match="Not a time limit"):
        part.set_time_limit("12", "soon")
    assert len(transport.commands) == 1


@pytest.mark.parametrize("site", ["slurm-22.05.8-dev", "slurm-24.11.5-dev24"])
def test_an_id_scancel_does_not_know_is_said_and_the_others_are_cancelled(site):
    """scancel exits 0 for an unknown id and names it only with --verbose (captured on
    both dev sites): that id fails on its own with Slurm's reason, job 2209 is done."""
    said = fixture_text(f"{site}/scancel_verbose_one_unknown.err")
    told: list[list[str]] = []
    part, transport = control("dev", ok("", said), changed=told)
    first = said.split("Terminating job ")[1].split()[0]  # the running job of the capture
    outcomes = list(fan_out("cancel", [(None, first), (None, "999999999")], lambda _: part))
    assert [(o.job_ids, o.error is None) for o in outcomes] == [
        ([first], True),
        (["999999999"], False),
    ]
    error = outcomes[1].error
    assert isinstance(error, UsageError) and "Slurm does not know job 999999999" in str(error)
    assert transport.commands == [f"scancel --verbose {first} 999999999"]
    assert told == [[first]]  # only the cancelled one is polled fast


def test_cancelling_a_job_that_already_ended_is_no_error():
    part, _ = control(
        "dev", ok("", fixture_text("slurm-22.05.8-dev/scancel_verbose_already_ended.err"))
    )
    part.cancel(["2209"])  # scancel: "already completing or completed": nothing to do
