from pathlib import Path

import pytest

from hpcui.backends.slurm.jobids import SlurmJobId, parse_job_id, parse_sbatch_parsable

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("123", SlurmJobId(job=123)),
        ("123_7", SlurmJobId(job=123, array_task=7)),
        ("123_[1-5%2]", SlurmJobId(job=123, array_spec="1-5%2")),
        ("123_[1,3,7-9]", SlurmJobId(job=123, array_spec="1,3,7-9")),
        ("123+0", SlurmJobId(job=123, het_offset=0)),
        ("123.batch", SlurmJobId(job=123, step="batch")),
        ("123.extern", SlurmJobId(job=123, step="extern")),
        ("123.0", SlurmJobId(job=123, step="0")),
        ("123_7.batch", SlurmJobId(job=123, array_task=7, step="batch")),
        ("123+1.0", SlurmJobId(job=123, het_offset=1, step="0")),
        ("  42 \n", SlurmJobId(job=42)),
    ],
)
def test_parse_job_id(text, expected):
    assert parse_job_id(text) == expected
    assert str(parse_job_id(text)) == text.strip()


def test_array_and_het_flags():
    assert parse_job_id("123_7").is_array
    assert parse_job_id("123_[1-3]").is_array
    assert not parse_job_id("123+0").is_array
    assert not parse_job_id("123.batch").is_array


@pytest.mark.parametrize(
    ("text", "base"),
    [
        ("123.batch", "123"),
        ("123.0", "123"),
        ("123_7.extern", "123_7"),
        ("123+0.batch", "123+0"),
        ("123_[1-5%2]", "123_[1-5%2]"),
        ("123", "123"),
    ],
)
def test_base_of_a_job_or_step_id(text, base):
    assert parse_job_id(text).base == base


@pytest.mark.parametrize("text", ["", "abc", "123_", "123.", "123_[1-3", "-1", "12 3", "123;c"])
def test_parse_job_id_rejects(text):
    with pytest.raises(ValueError, match="not a Slurm job id"):
        parse_job_id(text)


def test_every_id_in_the_verbatim_sacct_capture_round_trips():
    lines = (FIXTURES / "slurm-22.05.8" / "sacct_P.txt").read_text().splitlines()[1:]
    ids = [line.split("|")[0] for line in lines]
    assert [str(parse_job_id(i)) for i in ids] == ids
    assert parse_job_id("4_[79-99%100]") in [parse_job_id(i) for i in ids]
    assert {parse_job_id(i).base for i in ids if i.startswith("4_0")} == {"4_0"}


@pytest.mark.parametrize(
    ("stdout", "job_id", "cluster"),
    [
        ("123\n", "123", None),
        ("123;mn5\n", "123", "mn5"),
        ("4567   \n\n", "4567", None),
        ("NOTICE: project ehpc01 has 12% budget left\n890\n", "890", None),
        ("890\nSubmitted to the fast lane\n", "890", None),
    ],
)
def test_parse_sbatch_parsable(stdout, job_id, cluster):
    submitted = parse_sbatch_parsable(stdout)
    assert (submitted.job_id, submitted.cluster) == (job_id, cluster)


@pytest.mark.parametrize(
    "stdout",
    ["", "\n\n", "sbatch: error: Batch job submission failed: Invalid account\n", "12a\n"],
)
def test_parse_sbatch_parsable_without_id(stdout):
    with pytest.raises(ValueError, match="printed no job id"):
        parse_sbatch_parsable(stdout)


def test_expand_array_ids():
    from hpcui.backends.slurm.jobids import expand_array_ids

    assert expand_array_ids("123_[1-3,7%2]") == ["123_1", "123_2", "123_3", "123_7"]
    assert expand_array_ids("9_[0-6:3]") == ["9_0", "9_3", "9_6"]
    assert expand_array_ids("5_2") == ["5_2"] and expand_array_ids("9.batch") == ["9"]
