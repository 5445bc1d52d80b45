"""Arrays are folded in one place (hpcui.sitestate.arrays.fold): the app's table and
`hpcui jobs` both call it; its group key and its expanded arrays are checked here."""

from __future__ import annotations

from hpcui.backends.states import JobState
from hpcui.sitestate.arrays import FOLD_MIN, Folded, fold

Row = tuple[str, str, JobState]  # (cluster, job id, state)


def rows(cluster: str, array: str, n: int, state: JobState = JobState.RUNNING) -> list[Row]:
    return [(cluster, f"{array}_{i}", state) for i in range(n)]


def folded(items: list[Row], expanded: frozenset[str] = frozenset()) -> list[Row | Folded[Row]]:
    return fold(
        items,
        lambda r: r[1],
        lambda r: r[2],
        group=lambda r, array_id: f"{r[0]}:{array_id}",
        expanded=expanded,
    )


def test_one_line_per_array_where_its_first_element_stood() -> None:
    items = [
        ("dev", "7", JobState.PENDING),
        *rows("dev", "401", FOLD_MIN),
        ("dev", "8", JobState.RUNNING),
    ]
    out = folded(items)
    assert [x[1] if isinstance(x, tuple) else x.key for x in out] == ["7", "dev:401", "8"]
    (array,) = [x for x in out if isinstance(x, Folded)]
    assert (
        array.summary.label == f"401_[0-{FOLD_MIN - 1}]" and array.summary.state is JobState.RUNNING
    )


def test_the_same_array_id_on_two_clusters_is_two_arrays() -> None:
    out = folded(rows("dev", "401", FOLD_MIN) + rows("dev24", "401", FOLD_MIN))
    assert [x.key for x in out if isinstance(x, Folded)] == ["dev:401", "dev24:401"]


def test_an_expanded_array_keeps_its_elements_after_its_line() -> None:
    out = folded(rows("dev", "401", FOLD_MIN), expanded=frozenset({"dev:401"}))
    assert isinstance(out[0], Folded) and [x[1] for x in out[1:]] == [
        f"401_{i}" for i in range(FOLD_MIN)
    ]


def test_a_small_array_is_not_folded() -> None:
    items = rows("dev", "401", FOLD_MIN - 1)
    assert folded(items) == items


def test_the_summary_is_counted_only_when_asked() -> None:
    asked: list[Row] = []

    def state(r: Row) -> JobState:
        asked.append(r)
        return r[2]

    (array,) = fold(rows("dev", "401", FOLD_MIN), lambda r: r[1], state)
    assert asked == [] and isinstance(array, Folded)
    assert "0 failed" in array.summary.tally and len(asked) == FOLD_MIN
