"""Time and memory as people and Slurm write them; shared by requests and profile files."""

from __future__ import annotations

import math
import re
from datetime import timedelta

_UNIT_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr|d|day)s?\s*$", re.I)
_SLURM_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
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


def parse_time(value: str | int | float | timedelta) -> int:
    """Seconds from `1:00:00`, `90m`, `2h`, `1-00:00:00`, an int (seconds) or a timedelta.

    A bare number in a string follows Slurm: minutes (`"30"` is 30 minutes).
    """
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        m = _UNIT_TIME.match(value)
        if m:
            seconds = float(m.group(1)) * _UNIT_SECONDS[m.group(2).lower()]
        else:
            m = _SLURM_TIME.match(value.strip())
            if not m:
                raise ValueError(
                    f"cannot read time {value!r}: use 90m, 2h, 1:30:00, 1-00:00:00 or seconds as int"
                )
            days, a, b, c = (int(x) if x else None for x in m.groups())
            if b is None:  # "MM" or "D-HH"
                seconds = (days or 0) * 86400 + (a * 3600 if days is not None else a * 60)
            elif c is None:  # "MM:SS" or "D-HH:MM"
                seconds = (days * 86400 + a * 3600 + b * 60) if days is not None else a * 60 + b
            else:
                seconds = (days or 0) * 86400 + a * 3600 + b * 60 + c
    else:
        raise ValueError(f"cannot read time {value!r}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"time must be a positive, finite duration, got {value!r}")
    if seconds > MAX_TIME_S:
        raise ValueError(f"time {value!r} is more than a year: no scheduler accepts that")
    return math.ceil(seconds)


def parse_mem_mb(value: str | int) -> int:
    """Megabytes from `4G`, `500M`, `2T`, or an int (MB), as Slurm reads --mem."""
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


def parse_signal_delay(value: str | int | float | timedelta) -> int:
    """Seconds before the time limit: a bare number is seconds here (Slurm's `--signal=@N`
    counts seconds), else as parse_time (`5m`, `0:02:00`). 1 s to 18 h (Slurm's 65535)."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    seconds = parse_time(value)
    if seconds > 65535:
        raise ValueError(f"signal delay {value!r} is over Slurm's largest, 65535 s (18 h)")
    return seconds
