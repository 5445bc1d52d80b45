"""StatusService without a cluster: a real SlurmScheduler answered by sacct output captured
from the dev cluster (tests/fixtures/slurm-22.05.8-dev), replayed by a canned transport."""

from __future__ import annotations

import threading

import pytest

import hpcui.jobs.status as status_mod
from hpcui.backends.states import JobState
from hpcui.errors import HpcuiError
from hpcui.jobs.status import StatusService
from hpcui.schedulers.base import JobStatus
from hpcui.schedulers.slurm import SlurmScheduler
from tests.canned import CannedTransport, ok
from tests.conftest import fixture_text
from tests.support.clock import FakeClock

SACCT = fixture_text("slurm-22.05.8-dev/sacct_hpcui_format.txt")
ALL_FINAL = "\n".join(line for line in SACCT.splitlines() if line.startswith(("3068", "3069")))


def service(*answers: str, **kw) -> tuple[StatusService, CannedTransport]:
    transport = CannedTransport([ok(a) for a in answers])
    return StatusService(SlurmScheduler(transport), **kw), transport


def test_one_sacct_for_every_tracked_job_and_array_ranges_expanded():
    svc, transport = service(SACCT)
    svc._tracked.update(dict.fromkeys(["3068", "3069", "3070", "3071_4", "3072"], 0.0))
    svc._states.update({j: JobStatus(JobState.PENDING) for j in svc._tracked})
    changed = svc.poll_once()
    assert svc.last_poll_calls == 1 and len(transport.commands) == 1
    assert "sacct" in transport.commands[0]
    assert {j: s.state for j, s in changed.items()} == {
        "3068": JobState.COMPLETED,
        "3069": JobState.FAILED,
        "3070": JobState.RUNNING,
        "3071_4": JobState.PENDING,  # inside 3071_[2-5%2]
        "3072": JobState.PENDING,
    }
    assert changed["3072"].state_raw == "PENDING"
    assert svc.get("3069").exit_code == 1


def test_final_jobs_are_never_asked_again():
    svc, transport = service(ALL_FINAL)
    svc._states.update({"3068": JobStatus(JobState.PENDING), "3069": JobStatus(JobState.PENDING)})
    svc.poll_once()
    assert svc.poll_once() == {} and len(transport.commands) == 1


def test_the_interval_backs_off_while_nothing_changes_and_resets_on_change():
    svc, _ = service(SACCT, SACCT, SACCT, fast_s=0.25, slow_s=1.0)
    svc._states["3070"] = JobStatus(JobState.PENDING)
    svc.poll_once()  # PENDING -> RUNNING: a change
    assert svc.interval == pytest.approx(0.25, abs=0.05)
    svc.poll_once()
    second = svc.interval
    svc.poll_once()
    assert 0.25 < second < svc.interval <= 1.0


def test_a_vanished_job_is_judged_by_its_result_file(monkeypatch):
    monkeypatch.setattr(status_mod, "VANISHED_S", 0.0)
    judged = []

    def resolve(ids: list[str]) -> dict[str, JobStatus]:
        judged.append(ids)
        return {
            "999": JobStatus(
                JobState.COMPLETED, "COMPLETED (from its result file)", reason="result"
            )
        }

    svc, _ = service(ALL_FINAL, resolve_vanished=resolve)
    svc._states["999"] = JobStatus(JobState.RUNNING)
    svc._tracked["999"] = -1.0  # last seen long ago
    changed = svc.poll_once()
    assert judged == [["999"]] and changed["999"].state is JobState.COMPLETED


def test_waiters_wake_when_the_poll_thread_sees_the_end():
    svc, transport = service(ALL_FINAL, fast_s=0.01, slow_s=0.05)
    result: dict[str, JobStatus] = {}
    waiter = threading.Thread(target=lambda: result.update(svc.wait(["3068"], timeout=10)))
    waiter.start()
    waiter.join(timeout=15)
    svc.close()
    assert not waiter.is_alive() and result["3068"].state is JobState.COMPLETED
    assert len(transport.commands) == 1


def test_a_failed_poll_is_kept_and_slows_the_loop():
    """sacct fails (no slurmdbd) and so does the squeue fallback: the loop keeps the error,
    polls less often and goes on (it never dies, never raises into the caller)."""
    transport = CannedTransport({"sacct": ok("", "sacct: error", rc=1)})
    clock = FakeClock()
    svc = StatusService(SlurmScheduler(transport), fast_s=0.25, slow_s=5.0, clock=clock)
    with pytest.raises(HpcuiError):
        svc._states["1"] = JobStatus(JobState.PENDING)
        svc.poll_once()
    svc.track(["1"])
    clock.until_waits(2)  # kicked by track(), then the short pause before the first poll
    clock.run_for(0.25)
    svc.close()
    assert isinstance(svc.last_error, HpcuiError) and "squeue" in str(svc.last_error)
    assert svc.interval >= 2.0


def _as_state(state: str) -> str:
    """The captured line of job 3070 with another state word (sacct's field 7)."""
    line = next(x for x in SACCT.splitlines() if x.startswith("3070|"))
    fields = line.split("|")
    fields[6] = state
    return "|".join(fields)


def test_a_node_failure_is_the_end_only_once_slurm_did_not_requeue():
    """NODE_FAIL (and PREEMPTED) may be undone by Slurm's requeue: the job is shown in that
    state at once, but waiters wait until it held for SETTLE_S, polling meanwhile."""
    clock = FakeClock()
    svc, transport = service(
        _as_state("NODE_FAIL"), _as_state("PENDING"), _as_state("NODE_FAIL"), clock=clock
    )
    svc._states["3070"] = JobStatus(JobState.RUNNING)
    svc.poll_once()
    assert svc.get("3070").state is JobState.NODE_FAIL and not svc.settled("3070")
    svc.poll_once()  # requeued: back in the queue, not ended
    assert svc.get("3070").state is JobState.PENDING and not svc.settled("3070")
    svc.poll_once()
    assert not svc.settled("3070")
    clock.advance(status_mod.SETTLE_S - 0.5)
    assert not svc.settled("3070")
    clock.advance(0.5)
    assert svc.settled("3070") and len(transport.commands) == 3
    assert svc.wait(["3070"], timeout=1)["3070"].state is JobState.NODE_FAIL


def test_a_settled_node_failure_no_longer_holds_the_poll_interval_down(monkeypatch):
    """While an end may still be undone, polls come every SETTLE_S/4; once it settled, the
    interval backs off again for the jobs still tracked."""
    monkeypatch.setattr(status_mod, "SETTLE_S", 0.4)  # its cap (0.1 s) below fast_s
    clock = FakeClock()
    failed = _as_state("NODE_FAIL")
    other = next(x for x in SACCT.splitlines() if x.startswith("3072|"))  # stays PENDING
    answer = f"{failed}\n{other}"
    svc, _ = service(*[answer] * 8, fast_s=0.25, slow_s=10.0, clock=clock)
    svc._states.update({"3070": JobStatus(JobState.RUNNING), "3072": JobStatus(JobState.PENDING)})
    svc.poll_once()
    svc.poll_once()
    assert svc.interval <= 0.1  # capped while 3070 may still be requeued
    clock.advance(0.5)
    assert svc.settled("3070")
    for _ in range(3):
        svc.poll_once()
    assert svc.interval > 0.25  # backing off again
