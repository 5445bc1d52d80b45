"""Chains past the site's limit on the dev cluster's real Slurm and real OpenPBS (issue 48).

A loop that needs 150 s of work, checkpointing every second into its job folder, runs as
a chain of 3 segments of 1 minute: each segment is killed at its limit (no result), the
next (afterany, queued with the first) resumes from the checkpoint, the one that finishes
writes the chain's DONE file and the rest are cancelled. The chain is one handle, one row
in `hpcui jobs`, and its cancel takes every segment still waiting.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from hpcui.backends.states import JobState
from hpcui.clusters.cluster import Cluster
from hpcui.jobs.chain import ChainJob
from tests.integration.test_pbs_real import SKIPPED
from tests.integration.test_usage_dev import cli
from tests.integration.test_waiting_job_show import fields

pytestmark = pytest.mark.devcluster


def needs(seconds: int, name: str) -> dict:
    """Works `seconds` in all, a second at a time, its progress checkpointed in the job
    folder (shared by the chain's segments); each start is noted with where it resumed."""
    import json
    import os
    import time as _t

    path = os.path.join(os.environ["HPCUI_JOB_FOLDER"], name)

    def save(state: dict) -> None:
        with open(path + ".tmp", "w") as fh:
            json.dump(state, fh)
        os.replace(path + ".tmp", path)

    try:
        with open(path) as fh:
            state = json.load(fh)
    except FileNotFoundError:
        state = {"done": 0, "starts": []}
    job = os.environ.get("SLURM_JOB_ID") or os.environ.get("PBS_JOBID", "")
    state["starts"].append([job, state["done"]])
    save(state)
    while state["done"] < seconds:
        _t.sleep(1)  # stop_requested() is ignored: the limit kills the segment
        state["done"] += 1
        save(state)
    return state


@pytest.fixture
def pbs(dev_env) -> Iterator[Cluster]:
    if SKIPPED.exists():
        pytest.skip(SKIPPED.read_text().strip())
    from hpcui.clusters.api import connect

    cluster = connect("pbs")
    yield cluster
    cluster.close()


def _chain_finishes(cluster: Cluster, **resources) -> None:
    chain = cluster.submit(
        needs, 150, "ckpt", chain=3, time="1m", signal_delay="20s", cpus_per_task=1,
        mem="300M", name="chained", **resources,
    )  # fmt: skip
    assert isinstance(chain, ChainJob) and len(chain.segments) == 3
    ids = chain.ids
    # one row in `hpcui jobs`, the chain's first id, with its segment
    listed = cli("-c", cluster.name, "jobs").stdout
    rows = [line for line in listed.splitlines() if any(i in line.split() for i in ids)]
    assert len(rows) == 1 and "chain 1/3" in rows[0], listed

    value = chain.result(timeout=600)
    assert value["done"] == 150, value
    starts = value["starts"]
    assert len(starts) >= 2, value  # a 1-minute segment cannot do 150 s
    assert starts[0][1] == 0 and all(done > 0 for _job, done in starts[1:]), starts
    assert [s[1] for s in starts] == sorted(s[1] for s in starts), starts  # never backwards
    finisher = chain.current
    assert finisher is chain.finished_by(), "the DONE file names the last segment that ran"
    at = chain.segments.index(finisher)
    # each segment up to the finisher ran the call once, in order, resuming where the one
    # before stopped (killed at its limit, or returned after the early signal: the loop
    # does not poll stop_requested, so a segment may end its work after the signal and
    # the next one then only finds the checkpoint complete)
    assert [job for job, _done in starts] == chain.ids[: at + 1], (starts, chain.ids)
    for seg in chain.segments[:at]:
        assert seg.state.is_final, seg
    for seg in chain.segments[at + 1 :]:  # cancelled by the finisher (or never started)
        assert seg.wait(timeout=120) in (JobState.CANCELLED, JobState.COMPLETED), seg
        assert seg.stdout() == "" or "segment skipped" in seg.stderr()
    # `show` of the chain's first id shows the segment that finished the work
    shown = fields(cli("-c", cluster.name, "show", ids[0]).stdout)
    assert shown["job"].startswith(f"{finisher.job_id} on "), shown
    # any segment's id finds the chain again
    again = cluster.get_job(ids[-1])
    assert isinstance(again, ChainJob) and again.ids == ids and again.result() == value


@pytest.mark.timeout(720)
def test_a_chain_of_three_1_minute_segments_finishes_a_150_s_loop_on_slurm(dev):
    _chain_finishes(dev)


@pytest.mark.xdist_group("pbs")
@pytest.mark.timeout(720)
def test_a_chain_of_three_1_minute_segments_finishes_a_150_s_loop_on_pbs(pbs):
    _chain_finishes(pbs)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("site_name", ["dev", "pbs"])
def test_cancelling_a_chain_cancels_its_waiting_segments(site_name, request):
    cluster = request.getfixturevalue("dev" if site_name == "dev" else "pbs")
    chain = cluster.submit(needs, 600, "c2", chain=3, time="5m", cpus_per_task=1, mem="300M")
    deadline = time.monotonic() + 90
    while chain.segments[0].state is not JobState.RUNNING and time.monotonic() < deadline:
        time.sleep(1)
    later = chain.segments[1:]
    assert all(s.state is JobState.PENDING for s in later)  # afterany: waiting on the first
    chain.cancel()
    for seg in chain.segments:
        assert seg.wait(timeout=120) is JobState.CANCELLED, seg
    assert chain.state is JobState.CANCELLED


def test_the_app_shows_a_chain_as_one_row_and_cancels_it_whole(dev):
    """One row for three segments (the running one, named `· chain 1/3`); `c` + `y` on it
    cancels every segment."""
    import asyncio

    from hpcui.tui.app import HpcuiApp
    from hpcui.tui.job_table import JobTable
    from hpcui.tui.modals import ConfirmModal
    from tests.integration.test_tui_dev import SIZE, wait_for

    chain = dev.submit(needs, 600, "c3", chain=3, time="5m", cpus_per_task=1, mem="300M",
                       name="apptrain")  # fmt: skip
    keys = [f"dev:{i}" for i in chain.ids]

    async def go() -> tuple[list[str], str]:
        app = HpcuiApp("dev", connect=["dev"])
        async with app.run_test(size=SIZE) as pilot:
            table = app.screen.query_one("#live", JobTable)
            await wait_for(pilot, lambda: keys[0] in table.shown, 60, lambda: table.shown)
            await pilot.pause(1)
            shown = [k for k in keys if k in table.shown]
            name = str(table.shown[keys[0]]["name"])
            table.move_cursor(row=table.get_row_index(keys[0]))
            await pilot.press("c")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), 10, "confirm")
            await pilot.press("y")
            return shown, name

    try:
        shown, name = asyncio.run(go())
        ended = [s.wait(timeout=60) for s in chain.segments]
    finally:
        chain.cancel()
    assert shown == [keys[0]], shown
    assert name == "apptrain · chain 1/3", name
    assert ended == [JobState.CANCELLED] * 3, ended


@pytest.mark.timeout(300)
def test_a_checkpointables_checkpoint_is_the_next_segments_call(dev):
    """In a chain, a submitit Checkpointable's checkpoint() at the early signal becomes the
    next segment's call (no requeue): segment 1 ends at once, segment 2 resumes it."""
    from tests.integration.test_requeue import TOTAL, Counter, _progress

    chain = dev.submit(Counter(), TOTAL, chain=2, time="5m", cpus_per_task=1, mem="500M",
                       name="ckpt-chain")  # fmt: skip
    first = chain.segments[0]
    deadline = time.monotonic() + 120
    while _progress(dev, chain.folder)[1] < 8:  # running, and some steps done
        assert time.monotonic() < deadline, f"no progress: {first.state}"
        time.sleep(0.5)
    # what Slurm does at --signal=USR2@N: signal the job's steps
    dev.run(["scancel", "--signal=USR2", first.job_id]).check("scancel --signal=USR2")
    result = chain.result(timeout=240)
    diag = f"{result}\n{first.stderr()[-2000:]}"
    assert result["steps"] == list(range(TOTAL)), diag  # every step once: resumed
    assert result["checkpoints"] == 1 and len(result["starts"]) == 2, diag
    assert chain.finished_by() is chain.segments[1]
    assert first.state is not JobState.COMPLETED, diag  # it left at its checkpoint
    assert "checkpointing for the chain's next segment" in first.stderr(), diag
    shown = dev.run(["scontrol", "show", "job", "-o", first.job_id]).stdout
    assert "Restarts=0" in shown, shown  # not requeued
