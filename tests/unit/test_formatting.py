"""One formatting module for every face: the CLI, the app and the core's messages agree."""

from __future__ import annotations

from hpcui.cli import output
from hpcui.common.formatting import hms, short_duration, size
from hpcui.sitestate.jobs import format_bytes
from hpcui.tui import rows


def test_durations_like_squeue():
    assert hms(None) == "-"
    assert hms(59.6) == "00:01:00"
    assert hms(90061) == "1-01:01:01"
    assert hms(300, pad_hours=False) == "0:05:00"
    assert hms(-5) == "00:00:00"
    assert output.duration(3600) == hms(3600) and rows.hms(3600) == "1:00:00"


def test_short_durations_for_messages():
    assert [short_duration(s) for s in (0, 90 * 60, 36 * 3600, 61)] == [
        "0s",
        "1h30m",
        "1d12h",
        "1m1s",
    ]


def test_sizes_short_and_iec():
    assert size(None) == "-" and size(512) == "512B" and size(1536) == "1.5K"
    assert size(1536, iec=True) == "1.5 KiB" and size(3 * 2**50, iec=True) == "3.0 PiB"
    assert format_bytes(2**30) == "1.0 GiB" == size(2**30, iec=True)
    assert output.size(2**40) == "1.0T"
