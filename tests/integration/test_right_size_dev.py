"""Issue 59's must-show for right-sizing, on the dev cluster's real Slurm accounting: a
function run 5 times with mem="8G" that used about 300 MB - as sacct measured it
(jobacct_gather/linux, every 2 s there) - makes the next submit say so, with what would do;
the request itself is submitted as asked."""

from __future__ import annotations

import warnings

import pytest

from hpcui.errors import ResourceAdvice

pytestmark = [pytest.mark.devcluster, pytest.mark.timeout(300)]


def hold_mb(mb: int, seconds: float = 5.0) -> int:
    """Touch `mb` MB page by page and keep it a while, so a 2 s sampler sees the peak."""
    import time

    block = bytearray(mb * 2**20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    time.sleep(seconds)
    return len(block) // 2**20


def test_five_runs_that_used_300m_of_8g_make_the_next_submit_say_so(dev):
    runs = dev.map(hold_mb, [300] * 5, mem="8G", time="5m")
    assert [j.result(timeout=240) for j in runs] == [300] * 5
    use = dev.right_size(hold_mb, mem="8G", time="5m")
    assert use is not None and use.runs >= 5, use
    assert use.max_rss_p95 is not None and 250 * 2**20 < use.max_rss_p95 < 600 * 2**20, use
    assert use.suggestion["mem"] != "8G"
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", ResourceAdvice)
        job = dev.submit(hold_mb, 1, 0.1, mem="8G", time="5m")
    try:
        advice = [str(w.message) for w in said if issubclass(w.category, ResourceAdvice)]
        assert len(advice) == 1, advice
        assert "asked mem=8G, used at most" in advice[0], advice
        assert f"in {use.runs} runs" in advice[0] and use.suggestion["mem"] in advice[0]
        assert job.result(timeout=120) == 1  # submitted as asked, not changed
    finally:
        job.cancel()
