"""The fast squeue path (positional fields, rows built without a second validation, rows of
unchanged lines reused) gives exactly what the validated path gives, and refuses what it
refuses, with the same words."""

from __future__ import annotations

import pytest

from hpcui.backends.records import AccountingEntry, QueueEntry, trusted
from hpcui.backends.slurm import accounting as sa
from hpcui.backends.slurm import fields as sf
from hpcui.backends.slurm import queue as sq
from hpcui.sitestate import HistoryJob, QueueJob
from tests.conftest import FIXTURES

SQUEUE = [
    FIXTURES / "slurm-22.05.8-dev" / "squeue_hpcui_format.txt",
    FIXTURES / "slurm-24.11.5-dev24" / "squeue_hpcui_format.txt",
]


@pytest.mark.parametrize("path", SQUEUE, ids=lambda p: p.parent.name)
@pytest.mark.parametrize("into", [QueueEntry, QueueJob])
def test_fast_and_validated_paths_agree_on_real_output(path, into):
    text = path.read_text()
    fast = sq.parse_squeue(text, into=into)
    slow = sq.parse_squeue_validated(text, into=into)
    assert len(fast) == len(slow) > 0
    for a, b in zip(fast, slow, strict=True):
        assert type(a) is type(b) is into
        assert a == b and a.model_dump() == b.model_dump()
        assert a.model_fields_set == b.model_fields_set | set(into.model_fields)
    if into is QueueJob:
        assert any(j.hpcui for j in fast) and all(j.token for j in fast if j.hpcui)


def _line(**change: str) -> str:
    text = SQUEUE[0].read_text().splitlines()[0]
    parts = text.split("|")
    for key, value in change.items():
        parts[list(sq._SQUEUE.values()).index(key)] = value
    return "|".join(parts) + "\n"


@pytest.mark.parametrize(
    "text",
    [
        _line(submit_time="2026-11-22 13:30:28"),  # not SLURM_TIME_FORMAT=standard
        _line(start_time="yesterday"),
        _line(elapsed="1h"),
        _line(time_limit="5:xx"),
        "3068|3068|N/A|too few fields\n",
        _line(job="12a"),
    ],
)
def test_both_paths_refuse_malformed_lines_with_the_same_words(text):
    with pytest.raises(ValueError) as fast:
        sq.parse_squeue(text, into=QueueJob)
    with pytest.raises(ValueError) as slow:
        sq.parse_squeue_validated(text, into=QueueJob)
    assert str(fast.value) == str(slow.value)


def test_rows_of_unchanged_lines_are_reused_and_changed_lines_parsed_again():
    text = SQUEUE[0].read_text()
    reuse: dict = {}
    first = sq.parse_squeue(text, into=QueueJob, reuse=reuse)
    lines = text.splitlines()
    bumped = lines[0].split("|")
    bumped[17] = "0:07"  # elapsed
    second = sq.parse_squeue("\n".join(["|".join(bumped), *lines[1:]]), into=QueueJob, reuse=reuse)
    assert second[0].elapsed_s == 7 and second[0] is not first[0]
    assert all(a is b for a, b in zip(first[1:], second[1:], strict=True))
    assert len(reuse) == len(second)  # only this refresh's lines are kept


def test_trusted_rows_behave_like_validated_ones():
    values = sq.queue_values(*SQUEUE[0].read_text().splitlines()[0].split("|")[:-1])
    fast = QueueJob.from_values(dict(values))
    slow = QueueJob.model_validate({**values, "token": fast.token})
    assert fast == slow and hash(fast) == hash(slow)
    assert fast.model_copy(update={"name": "x"}).name == "x" and fast.name != "x"
    assert fast.model_dump_json() == slow.model_dump_json()
    with pytest.raises(Exception, match="frozen"):
        fast.name = "y"  # type: ignore[misc]
    acct = trusted(AccountingEntry, {**values, **dict.fromkeys(sq._USAGE)})
    assert acct.cpu_efficiency is None and HistoryJob.from_entry(acct).hpcui


def test_sacct_rows_match_their_validated_form():
    text = (FIXTURES / "slurm-22.05.8-dev" / "sacct_hpcui_format.txt").read_text()
    for job in sa.parse_sacct(text, into=HistoryJob):
        again = HistoryJob.model_validate(job.model_dump(exclude={"hpcui", "efficiency"}))
        assert again.model_dump() == job.model_dump()


SACCT = [
    FIXTURES / "slurm-22.05.8-dev" / "sacct_hpcui_format.txt",
    FIXTURES / "slurm-24.11.5-dev24" / "sacct_hpcui_format.txt",
    FIXTURES / "slurm-constructed" / "sacct_P.txt",  # arrays, het jobs, ranges, step shapes
]


@pytest.mark.parametrize("path", SACCT, ids=lambda p: p.parent.name)
@pytest.mark.parametrize("into", [AccountingEntry, HistoryJob])
def test_sacct_fast_and_general_paths_agree(path, into):
    text = path.read_text()
    fast = sa.parse_sacct(text, into=into)
    general = sa.parse_sacct_general(text, into=into)
    assert len(fast) == len(general) > 0
    for a, b in zip(fast, general, strict=True):
        assert type(a) is type(b) is into
        assert a.model_dump() == b.model_dump()
    # a field order of its own goes the general way and still gives the same rows
    reordered = list(reversed(sa.SACCT_FIELDS))
    lines = ["|".join(reversed(line.split("|"))) for line in text.splitlines() if line]
    again = sa.parse_sacct("\n".join(lines), reordered, into=into)
    assert [j.model_dump() for j in again] == [j.model_dump() for j in fast]


def _sacct_line(**change: str) -> str:
    parts = SACCT[2].read_text().splitlines()[0].split("|")
    for key, value in change.items():
        parts[list(sa._SACCT.values()).index(key)] = value
    return "|".join(parts) + "\n"


@pytest.mark.parametrize(
    "text",
    [
        _sacct_line(job="12a"),
        _sacct_line(job="12.ba tch"),
        _sacct_line(job="12_x"),
        _sacct_line(exit_code="0"),
        _sacct_line(end_time="yesterday"),
        _sacct_line(cpu_time="1h"),
        _sacct_line(max_rss="12Q"),
        _sacct_line(tres="cpu=4,mem=lots"),
        "2001|train|alice\n",
        _sacct_line() + "2001.batch|batch||x|||COMPLETED|0:0|1:00||||||||00:01|5X|\n",
    ],
)
def test_both_sacct_paths_refuse_malformed_lines_with_the_same_words(text):
    with pytest.raises(ValueError) as fast:
        sa.parse_sacct(text, into=HistoryJob)
    with pytest.raises(ValueError) as general:
        sa.parse_sacct_general(text, into=HistoryJob)
    assert str(fast.value) == str(general.value)


@pytest.mark.parametrize(
    "line",
    [
        "a|b|c|",  # suffixed: the suffix dropped
        "a|b|c||",  # a last field ending in the separator keeps it
        " a | b |c d|",  # padding stripped, inner spaces kept
        "a|b|",  # a field short: refused, not shifted
        "a|b|c",  # no suffix where one is expected: read as it stands
        "",
        "   ",
    ],
)
def test_the_line_splitter_keeps_the_exact_rules(line):
    def exact():
        return sf.fields_of(line, 3, suffixed=True)

    try:
        expected = exact()
    except ValueError as error:
        with pytest.raises(ValueError, match="expected 3"):
            list(sf.split_fields(line, 3, suffixed=True))
        assert "expected 3" in str(error)
        return
    assert list(sf.split_fields(line, 3, suffixed=True)) == (
        [expected] if expected is not None else []
    )
