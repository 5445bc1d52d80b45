"""A chain's segments as one row (hpcui.sitestate.chains), in the app's table and in
`hpcui jobs`, and the table's optional "will it finish" column."""

from __future__ import annotations

from hpcui.backends.states import JobState
from hpcui.logs.progress import Finish, Progress
from hpcui.sitestate.chains import Segment, fold_chains, segments_of
from hpcui.store.registry import JobRecord, segment_index
from hpcui.tui.rows import collapse_chains, record_row

R, P, T, C = JobState.RUNNING, JobState.PENDING, JobState.TIMEOUT, JobState.COMPLETED


def _records(states: list[JobState], token: str = "tok", first: int = 501) -> list[JobRecord]:
    n = len(states)
    return [
        JobRecord(cluster="dev", token=token, job_id=str(first + k), array_index=segment_index(k),
                  folder="/f", name="train", state=s, meta={"chain": [k, n]})
        for k, s in enumerate(states)
    ]  # fmt: skip


def test_the_row_is_the_segment_now_and_stands_for_all():
    recs = _records([T, R, P])
    other = JobRecord(cluster="dev", token="x", job_id="9", folder="/g", name="other")
    rows = {r.key: r for r in map(record_row, [other, *recs])}
    out = collapse_chains(rows, segments_of([other, *recs]))
    assert list(out) == ["dev:9", "dev:502"]  # where the chain's first segment stood
    row = out["dev:502"]
    assert row.cells["name"] == "train · chain 2/3" and row.chain == "chain 2/3"
    assert row.members == ("dev:501", "dev:502", "dev:503")  # a cancel takes them all
    assert rows["dev:502"].cells["name"] == "train"  # the merged row is not changed


def test_an_ended_chain_shows_its_last_segment():
    recs = _records([T, T, C])
    got = fold_chains(recs, lambda r: (r.cluster, r.job_id or ""), lambda r: r.state,
                      segments_of(recs))  # fmt: skip
    assert [(item.job_id, seg) for item, seg, _ in got] == [("503", Segment("tok", 2, 3))]


def test_the_same_ids_on_two_clusters_are_two_chains_and_plain_jobs_stay():
    a = _records([R, P], token="a")
    b = [r.model_copy(update={"cluster": "dev24"}) for r in _records([P, P], token="b")]
    items = [*a, *b]
    got = fold_chains(items, lambda r: (r.cluster, r.job_id or ""), lambda r: r.state,
                      segments_of(items))  # fmt: skip
    assert [(i.cluster, i.job_id, s.label() if s else "") for i, s, _ in got] == [
        ("dev", "501", "chain 1/2"), ("dev24", "501", "chain 1/2")
    ]  # fmt: skip
    assert collapse_chains({"k": record_row(a[0])}, {}) == {"k": record_row(a[0])}


def test_the_finish_cell_says_it_in_few_words():
    p = Progress(done=100, total=400, unit="steps", source="counted")
    assert Finish(300.0, 20.0, "b", p).cell() == "NO: needs 0:05:00, 0:00:20 left"
    assert Finish(60.0, 600.0, "b", p).cell() == "yes: 0:01:00 more"
    assert Finish(None, 600.0, "b", p).cell() == "no ETA yet"
    assert Finish(60.0, None, "b", p).cell() == "needs 0:01:00"
