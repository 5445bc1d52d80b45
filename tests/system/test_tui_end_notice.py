"""Issue 35, "told when a job ends": the app notifies (and rings the bell) when one of your
jobs ends while you look elsewhere, but not for the job the Job screen shows. Pilot on the
`local` box: real jobs run as local processes."""

from __future__ import annotations

import asyncio
import time

from hpcui.backends.states import JobState
from hpcui.store.registry import JobRecord
from hpcui.tui.app import HpcuiApp
from hpcui.tui.end_notice import EndWatch
from tests.support.pilot import wait_for


def nap(seconds: float) -> str:
    time.sleep(seconds)
    return "rested"


def fail() -> None:
    raise RuntimeError("on purpose")


def test_the_app_says_each_end_once_and_not_the_one_on_screen(local_box):
    async def go():
        app = HpcuiApp()
        bells: list[float] = []
        app.bell = lambda: bells.append(time.monotonic())  # type: ignore[method-assign]
        said: list[tuple[str, str]] = []  # every notice said: a shown one expires (10 s)
        notify = app.notify

        def heard(message, *, title="", severity="information", **kw):
            if title == "job ended":
                said.append((message, severity))
            return notify(message, title=title, severity=severity, **kw)

        app.notify = heard  # type: ignore[method-assign]
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for(pilot, lambda: app.hub.conns["local"].status == "connected")
            cluster = app.hub.cluster("local")
            assert cluster is not None
            ok = cluster.submit(nap, 1.0, name="napper")
            bad = cluster.submit(fail, name="failer")
            watched = cluster.submit(nap, 1.5, name="watched")
            app.open_job("local", watched.job_id)  # this one ends on screen
            for job in (ok, bad, watched):
                await wait_for(pilot, lambda job=job: job.state.is_final, 60)
            await pilot.pause(2 * 3.0 + 1)  # two more looks: nothing is said twice
            return said, bells, (ok.job_id, bad.job_id, watched.job_id)

    said, bells, (ok, bad, watched) = asyncio.run(go())
    assert (f"local:{ok} napper ended COMPLETED", "information") in said
    assert (f"local:{bad} failer ended FAILED", "warning") in said
    assert not any(f"local:{watched} " in text for text, _ in said)
    assert len(said) == 2 and 1 <= len(bells) <= 2


def test_jobs_already_over_at_start_are_not_news():
    def rec(job_id: str, state: JobState) -> JobRecord:
        r = JobRecord(cluster="c", token=job_id, array_index=-1, name="n", folder="/f", num_tasks=1)
        return r.model_copy(update={"job_id": job_id, "state": state})

    watch = EndWatch(since=time.time() + 60)  # both submitted before the app started
    assert watch.look([rec("1", JobState.COMPLETED), rec("2", JobState.RUNNING)]) == []
    ended = watch.look([rec("1", JobState.COMPLETED), rec("2", JobState.FAILED)])
    assert [r.job_id for r in ended] == ["2"]
    assert watch.look([rec("2", JobState.FAILED)]) == []
