"""scancel's own words (backends/slurm/script.py), as captured on the dev sites."""

from __future__ import annotations

from hpcui.backends.slurm.script import parse_scancel_refusals, scancel_command
from tests.conftest import fixture_text


def test_scancel_is_asked_to_name_what_it_could_not_cancel():
    assert scancel_command(["1", "2"]) == ["scancel", "--verbose", "1", "2"]


def test_scancel_refusals_from_its_verbose_words():
    said = fixture_text("slurm-22.05.8-dev/scancel_verbose_one_unknown.err")
    assert parse_scancel_refusals(said) == {"999999999": "Invalid job id specified"}
    ended = fixture_text("slurm-22.05.8-dev/scancel_verbose_already_ended.err")
    assert parse_scancel_refusals(ended) == {}
    denied = "scancel: error: Kill job error on job id 32: Access/permission denied\n"
    assert parse_scancel_refusals(denied) == {"32": "Access/permission denied"}
