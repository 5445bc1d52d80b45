"""Will it finish (issue 48, part 2) on the dev cluster: a loop that prints `step i/N` at a
known rate under a limit too short for it; two looks a few seconds apart time the rate,
the ETA lands within 10 % of the truth and says it will not finish, in the API, in `show`
and in `top`."""

from __future__ import annotations

import time

import pytest

from hpcui.backends.states import JobState
from tests.integration.test_usage_dev import cli
from tests.integration.test_waiting_job_show import fields
from tests.support.jobs import wait_job_state

pytestmark = pytest.mark.devcluster

STEP_S, STEPS = 0.25, 400  # 100 s of work under a 1-minute limit


def steps(n: int, every: float) -> None:
    import time as _t

    for i in range(1, n + 1):
        _t.sleep(every)
        print(f"step {i}/{n} loss={1 / i:.4f}", flush=True)


def test_a_loop_too_long_for_its_limit_is_said_not_to_finish(dev):
    job = dev.submit(steps, STEPS, STEP_S, time="1m", cpus_per_task=1, mem="200M", name="eta")
    try:
        wait_job_state(job, {JobState.RUNNING}, timeout=60)
        deadline = time.monotonic() + 30
        first = None
        while first is None and time.monotonic() < deadline:  # its first steps printed
            first = dev.will_finish(job.job_id)
            time.sleep(1)
        assert first is not None, "no progress read"
        time.sleep(6)
        later = dev.will_finish(job.job_id)
        assert (later is not None and later.basis.endswith("in the last 00:00:06")) or (
            later is not None and "in the last" in later.basis
        ), later
        truth = (STEPS - later.progress.done) * STEP_S
        assert later.needed_s == pytest.approx(truth, rel=0.10), (later, truth)
        assert later.will_finish is False and "it will NOT finish" in later.line()

        shown = fields(cli("-c", "dev", "show", job.job_id).stdout)
        assert "will NOT finish" in shown["will it finish"], shown
        top = cli("-c", "dev", "top", job.job_id, "--count", "1")
        assert "will it finish: " in top.stdout and "will NOT finish" in top.stdout, top.stdout
        waited = cli("-c", "dev", "wait", job.job_id, "--timeout", "14")
        assert waited.returncode == 6, waited.stderr  # still running when the wait gave up
        said = [ln for ln in waited.stdout.splitlines() if "will not finish in time" in ln]
        assert len(said) == 1 and f"hpcui update {job.job_id} --time" in said[0], waited.stdout
    finally:
        job.cancel()


def test_the_app_says_it_once_in_a_column_and_a_notice_whatever_the_screen(dev, monkeypatch):
    """The Jobs table grows a "will it finish" column for the running job (it shows no
    such column before), and the app says "will not finish" once, before the limit, from
    its own look (not the Job screen's)."""
    import asyncio

    from hpcui.tui import app as app_module
    from hpcui.tui.app import HpcuiApp
    from hpcui.tui.job_table import JobTable
    from tests.integration.test_tui_dev import SIZE, wait_for

    monkeypatch.setattr(app_module, "FINISH_LOOK_S", 3.0)  # the app's look, sooner
    monkeypatch.setattr(app_module, "FIRST_FINISH_LOOK_S", 1.0)
    job = dev.submit(steps, STEPS, STEP_S, time="1m", cpus_per_task=1, mem="200M", name="eta-app")
    key = f"dev:{job.job_id}"

    async def go() -> tuple[bool, str, list[str], str]:
        app = HpcuiApp("dev", connect=["dev"])
        async with app.run_test(size=SIZE) as pilot:
            table = app.screen.query_one("#live", JobTable)
            await wait_for(pilot, lambda: key in table.shown, 60, "row")
            column_before = "eta" in table.fitted()
            await wait_for(
                pilot, lambda: str(table.shown[key].get("eta", "")).startswith("NO:"), 60,
                lambda: table.shown.get(key),
            )  # fmt: skip
            cell = str(table.shown[key]["eta"])
            await wait_for(
                pilot, lambda: any(f"dev:{job.job_id} " in n.message
                                   and "will not finish" in n.message
                                   for n in app._notifications),
                20, "the notice",
            )  # fmt: skip
            # what the app shows when it tells (this test's own Job object reads a cache
            # that a poll dropped under load can leave a step behind)
            state_at_notice = str(table.shown[key].get("state", ""))
            await pilot.pause(8)  # more looks: still told once
            # this job's notices (other tests' running loops may be told about too)
            told = [n.message for n in app._notifications if f"dev:{job.job_id} " in n.message]
            assert "eta" in table.fitted()
            return column_before, cell, told, state_at_notice

    try:
        column_before, cell, told, state = asyncio.run(go())
    finally:
        job.cancel()
    assert not column_before  # nothing to say yet: no column
    assert "left" in cell, cell
    assert len(told) == 1 and "eta-app will not finish before its limit" in told[0], told
    assert f"hpcui update {job.job_id} --time" in told[0], told
    assert state == JobState.RUNNING.value  # before the limit
