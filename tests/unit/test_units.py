"""One reading of a bare number (hpcui/common/units.py): text without a unit is minutes, a number
is seconds; the two keys that read unit-less text as seconds still do, and warn."""

from __future__ import annotations

import subprocess
import sys
import warnings
from datetime import timedelta

import pytest

from hpcui.common import units
from hpcui.config import load_config
from hpcui.profiles.model import Profile
from hpcui.request.resources import Resources
from tests.conftest import ROOT


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 1800),  # Slurm's --time=30
        ("1.5", 90),
        ("90s", 90),
        ("10m", 600),
        ("2h", 7200),
        ("1d", 86400),
        ("5:30", 330),  # MM:SS
        ("1:00:00", 3600),
        ("1-02", 93600),  # D-HH
        ("1-02:30", 95400),  # D-HH:MM
        ("1-00:00:00", 86400),
        (45, 45),  # a number is seconds
        (timedelta(minutes=2), 120),
    ],
)
def test_one_reading_of_a_duration(text, seconds):
    assert units.seconds_of(text) == seconds


def test_every_key_reads_unit_less_text_as_minutes():
    """The job's time, `keep` and `--older-than` agree (they all go through seconds_of)."""
    assert Resources.from_kwargs(time="30").time_s == 1800
    assert units.parse_time("30") == 1800
    from hpcui.cli.parser import _duration

    assert _duration("30") == 1800


@pytest.mark.parametrize("bad", ["ten", "5x", "", "1::2", True, None, [1]])
def test_what_is_not_a_duration_says_the_forms(bad):
    with pytest.raises(ValueError, match="cannot read"):
        units.seconds_of(bad)


@pytest.mark.parametrize(
    ("call", "value", "seconds"),
    [
        (units.persist_seconds, "45", 45),
        (units.parse_signal_delay, "90", 90),
    ],
)
def test_old_seconds_spellings_still_seconds_with_a_warning_naming_the_fix(call, value, seconds):
    with pytest.warns(units.UnitWarning, match=rf'"{value}s" \(or "{value}m"\)'):
        assert call(value) == seconds


@pytest.mark.parametrize(
    ("call", "value", "seconds"),
    [
        (units.persist_seconds, "45s", 45),
        (units.persist_seconds, 45, 45),
        (units.persist_seconds, "2m", 120),
        (units.parse_signal_delay, "90s", 90),
        (units.parse_signal_delay, 90, 90),
        (units.parse_signal_delay, "2m", 120),
    ],
)
def test_spellings_with_a_unit_or_a_number_do_not_warn(call, value, seconds):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert call(value) == seconds


def test_a_config_with_the_old_persist_spelling_loads_and_warns(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[agent]\npersist = "30"\n')
    with pytest.warns(units.UnitWarning, match="persist"):
        config = load_config(p)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # read once: the property does not say it again
        assert config.agent.persist_s == 30


def test_a_profile_with_the_old_signal_delay_spelling_loads_and_warns():
    with pytest.warns(units.UnitWarning, match="signal_delay"):
        assert Profile(name="p", signal_delay_s="120").signal_delay_s == 120


def test_the_cli_says_the_warning_as_one_line(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[agent]\npersist = "30"\n[clusters.box]\nprofile = "local"\n')
    env = {"HPCUI_CONFIG": str(cfg), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "hpcui.cli", "clusters"],
        cwd=ROOT,
        env={**env, "HPCUI_AGENT": "off"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "persist" in line]
    assert lines == [
        'hpcui: warning: persist = "30" is read as 30 seconds, as before; a unit-less number '
        "in text means minutes elsewhere in hpcui (as Slurm's --time) and will here too. "
        'Write "30s" (or "30m") to say which.'
    ]
