"""A job's end is pushed over the open connection (hpcui.jobs.end_push) on the dev cluster.

With the status poll slowed far past the job's length, result() can only return in time
if the login node's reader told the client that a result file appeared.
"""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.devcluster


def sleeps(seconds: float) -> float:
    import time as _t

    _t.sleep(seconds)
    return _t.time()


@pytest.mark.timeout(120)
def test_the_end_of_a_job_is_pushed_not_polled(dev):
    service = dev.status
    service.slow_s = 300.0  # a poll alone would hear of the end minutes later
    job = dev.submit(sleeps, 6, cpus_per_task=1, mem="500M", name="pushed")
    deadline = time.monotonic() + 30
    while job.folder not in service.end_push.watching:  # the reader follows the job's folder
        assert time.monotonic() < deadline, "no reader watches the job's folder"
        time.sleep(0.1)
    polls_before = service.polls
    service.interval = service.slow_s  # the poll has backed off, as it does while a job runs
    ended_at = job.result(timeout=60)  # JobTimeoutError if nothing but the poll could tell
    assert service.end_push.pushes >= 1
    assert service.polls - polls_before <= 10  # a few polls after the push, not a loop
    assert ended_at <= time.time()


@pytest.mark.timeout(60)
def test_without_a_stream_the_poll_goes_on(dev, monkeypatch):
    """A transport that cannot stream (or a login node that refuses): polls only."""
    monkeypatch.setattr(type(dev.transport), "open_stream", lambda self, cmd: None)
    job = dev.submit(sleeps, 1, cpus_per_task=1, mem="500M", name="polled")
    assert job.result(timeout=45) > 0
    assert dev.status.end_push.pushes == 0 and not dev.status.end_push.watching
