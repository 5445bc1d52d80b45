"""Right-sizing from history (hpcui.clusters.sizing): the p95 of what past runs used
against what a request asks, said only when the request is far above it; a run that ran
out of memory keeps the memory advice back. The dev cluster's real runs:
tests/integration/test_right_size.py."""

from __future__ import annotations

import pytest

from hpcui.backends.states import JobState
from hpcui.clusters import sizing
from hpcui.sitestate.jobs import HistoryJob

MB = 2**20


def runs(rss_mb: list[float], elapsed_s: int = 40, state=JobState.COMPLETED) -> list[HistoryJob]:
    return [
        HistoryJob(job_id=f"7_{i}", state=state, max_rss_bytes=int(mb * MB), elapsed_s=elapsed_s)
        for i, mb in enumerate(rss_mb)
    ]


@pytest.fixture
def plan(local_box):
    import hpcui

    cluster = hpcui.connect("local")
    yield cluster.plan
    cluster.close()


def test_p95_is_the_nearest_rank():
    assert sizing.p95([1, 2, 3, 4, 5]) == 5
    assert sizing.p95(list(range(1, 101))) == 95
    assert sizing.round_mem_mb(700) == 768 and sizing.round_mem_mb(2100) == 3072


def test_a_request_far_above_five_runs_is_said_with_the_figures(plan):
    use = sizing.judge("m.train", runs([280, 300, 290, 295, 300]), plan(mem="8G", time="8:00:00"))
    assert use is not None and use.runs == 5
    assert use.suggestion == {"mem": "768M", "time": "0:15:00"}
    assert use.far_above[0] == (
        "asked mem=8G, used at most 300.0M in 5 runs (p95 300.0M per task): mem='768M' would do"
    )
    assert use.far_above[1].startswith("asked time=8:00:00, ran at most 0:00:40 in 5 runs")
    text = sizing.message(use)
    assert text.startswith("m.train: asked mem=8G") and "submitted what you asked" in text


def test_a_request_near_its_use_says_nothing(plan):
    use = sizing.judge("m.train", runs([3000] * 4, elapsed_s=3000), plan(mem="6G", time="2:00:00"))
    assert use is not None and use.far_above == []
    assert use.suggestion["mem"] == "4G"  # 3000M x 1.25 + 256M = 4006M, up to whole G


def test_few_runs_or_an_oom_keep_the_advice_back(plan):
    assert sizing.judge("m.f", runs([300, 300]), plan(mem="8G")) is None  # 2 < MIN_RUNS
    history = runs([300] * 4) + runs([7000], state=JobState.OUT_OF_MEMORY)
    use = sizing.judge("m.f", history, plan(mem="8G"))
    assert use is not None and use.out_of_memory == 1
    assert "mem" not in use.suggestion and not any("mem=" in s for s in use.far_above)


def test_every_task_of_a_node_counts(plan):
    use = sizing.judge("m.f", runs([1000] * 3), plan(mem="8G", tasks_per_node=4))
    assert use is not None and use.suggestion["mem"] == "6G"  # 4 x 1000M x 1.25 + 256M
