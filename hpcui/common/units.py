"""Durations and sizes as people and Slurm write them: one reading for every key and flag.

**A bare number** is read one way everywhere in hpcui:

- written as text without a unit (`"30"` in a file, `--time 30`, `--older-than 30`) it is
  **minutes**, as Slurm reads `--time=30`;
- given as a number (a Python `int`/`float`, a TOML number: `persist = 0`) it is
  **seconds**, as `timedelta(seconds=...)` and `time.sleep` read one.

Two keys read unit-less text as seconds before this rule: `[agent] persist = "30"` and the
signal delay (`signal_delay = "90"`, `--signal-delay 90`, after Slurm's `--signal=@90`).
They keep that reading for now and say so with a `UnitWarning` that names the spelling with
a unit; a later release reads them as minutes. Standard library only (a leaf).
"""

from __future__ import annotations

import math
import re
import warnings
from datetime import timedelta


class UnitWarning(FutureWarning):
    """A value was read the old way; the message says how to write it so it stays right."""


_UNIT_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr|d|day)s?\s*$", re.I)
_SLURM_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_BARE = re.compile(r"^\s*\d+(?:\.\d+)?\s*$")
_MEM = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*$", re.I)
_UNIT_SECONDS = {
    "s": 1,
    "sec": 1,
    "m": 60,
    "min": 60,
    "h": 3600,
    "hr": 3600,
    "d": 86400,
    "day": 86400,
}

#: longer than any site's limit; bigger values are typos (or `inf`)
MAX_TIME_S = 366 * 86400
#: Slurm's `--signal=@N` holds 16 bits
MAX_SIGNAL_DELAY_S = 65535


def is_bare_number(value: object) -> bool:
    """Text that is a number without a unit (`"30"`, `" 2.5 "`)."""
    return isinstance(value, str) and bool(_BARE.match(value))


def seconds_of(value: str | int | float | timedelta) -> float:
    """Seconds of a duration, zero allowed: `90s`, `10m`, `2h`, `1d`, `1:30:00`,
    `1-00:00:00`, a bare number in text (minutes), a number (seconds), a timedelta."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool):
        raise ValueError(f"cannot read duration {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"cannot read duration {value!r}")
    m = _UNIT_TIME.match(value)
    if m:
        return float(m.group(1)) * _UNIT_SECONDS[m.group(2).lower()]
    if is_bare_number(value):
        return float(value) * 60
    m = _SLURM_TIME.match(value.strip())
    if not m:
        raise ValueError(
            f"cannot read time {value!r}: use 90m, 2h, 1:30:00, 1-00:00:00 or seconds as int"
        )
    days, first, second, third = m.groups()
    a, b, c = int(first), int(second or 0), int(third or 0)
    if days is not None and third is None:  # "D-HH" or "D-HH:MM"
        return int(days) * 86400 + a * 3600 + b * 60
    if third is None:  # "MM:SS" (a bare "MM" matched above)
        return a * 60 + b
    return int(days or 0) * 86400 + a * 3600 + b * 60 + c


def parse_time(value: str | int | float | timedelta) -> int:
    """Whole seconds of a job's time (or any positive duration), at most a year."""
    seconds = seconds_of(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"time must be a positive, finite duration, got {value!r}")
    if seconds > MAX_TIME_S:
        raise ValueError(f"time {value!r} is more than a year: no scheduler accepts that")
    return math.ceil(seconds)


Duration = str | int | float | timedelta


def _old_seconds(value: Duration, key: str, *, warn: bool) -> Duration:
    """A bare number in text where the key read it as seconds: still seconds, with a
    UnitWarning that names the spelling that keeps it so."""
    if not (isinstance(value, str) and is_bare_number(value)):
        return value
    number = float(value)
    if warn:
        shown = f"{number:g}"
        warnings.warn(
            f'{key} = "{value}" is read as {shown} seconds, as before; a unit-less number in '
            f"text means minutes elsewhere in hpcui (as Slurm's --time) and will here too. "
            f'Write "{shown}s" (or "{shown}m") to say which.',
            UnitWarning,
            stacklevel=3,
        )
    return number


def parse_signal_delay(value: str | int | float | timedelta, *, warn: bool = True) -> int:
    """Seconds before the time limit: `5m`, `0:02:00`, or a number (seconds; unit-less text
    too, for now, with a UnitWarning). 1 s to 18 h (Slurm's 65535)."""
    seconds = parse_time(_old_seconds(value, "signal_delay", warn=warn))
    if seconds > MAX_SIGNAL_DELAY_S:
        raise ValueError(f"signal delay {value!r} is over Slurm's largest, 65535 s (18 h)")
    return seconds


def persist_seconds(value: object, *, warn: bool = True) -> float:
    """`[agent] persist`: "10m", "90s", "2h", a number (seconds), or 0 (no agent)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f'persist must be a duration like "10m" or seconds, not {value!r}')
    value = _old_seconds(value, "persist", warn=warn)
    try:
        seconds = seconds_of(value)
    except ValueError:
        raise ValueError(
            f'persist = {value!r} is not a duration: use e.g. "10m", "90s", "2h" or 0'
        ) from None
    if seconds < 0 or seconds != seconds:
        raise ValueError(f"persist = {value!r} must not be negative (0 turns the agent off)")
    return seconds


def parse_mem_mb(value: str | int) -> int:
    """Megabytes from `4G`, `500M`, `2T`, or a number (MB), as Slurm reads --mem."""
    if isinstance(value, int) and not isinstance(value, bool):
        mb = value
    else:
        m = _MEM.match(str(value))
        if not m:
            raise ValueError(f"cannot read memory {value!r}: use e.g. 4G, 500M or an int in MB")
        mult = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[m.group(2).upper()]
        mb = math.ceil(float(m.group(1)) * mult)
    if mb <= 0:
        raise ValueError(f"memory must be positive, got {value!r}")
    return mb
