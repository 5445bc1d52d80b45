"""Durations and sizes as the schedulers print them: Slurm's ``[D-]HH:MM:SS`` and ``4.5G``,
PBS's ``[[DD:]HH:]MM:SS``. At the root of backends because a cross-dialect reader (usage)
needs both, and slurm/ and pbs/ sit above the shared records."""

from __future__ import annotations

import functools
import re

_NO_DURATION = {"", "UNLIMITED", "INFINITE", "INVALID", "PARTITION_LIMIT", "NOT_SET", "N/A"}
_DURATION = re.compile(
    r"(?:(?P<d>\d+)-(?=\d+:\d+:))?(?:(?P<h>\d+):)?(?P<m>\d+):(?P<s>\d+(?:\.\d+)?)"
)
_MEM = re.compile(r"(?P<n>\d+(?:\.\d+)?)(?P<unit>[KMGTP]?)", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)  # limits and elapsed times repeat across a big queue
def parse_duration(text: str) -> float | None:
    """Seconds in a duration as Slurm prints it: ``[D-][H]H:MM:SS``, ``M:SS``, ``MM:SS.mmm``.

    None for the words that mean "no limit" or "no value" (UNLIMITED, infinite,
    INVALID, Partition_Limit, NOT_SET, N/A, empty).
    """
    t = text.strip()
    if t.upper() in _NO_DURATION:
        return None
    m = _DURATION.fullmatch(t)
    if m is None:
        raise ValueError(f"not a Slurm duration: {text!r} (expected e.g. 1-02:03:04 or 03:04)")
    days, hours = int(m["d"] or 0), int(m["h"] or 0)
    return days * 86400 + hours * 3600 + int(m["m"]) * 60 + float(m["s"])


def parse_mem(text: str) -> int | None:
    """Bytes in a Slurm size (``123K``, ``4.5G``; 1024-based; a bare number is bytes).

    Empty -> None: sacct leaves MaxRSS empty where nothing was measured.
    """
    t = text.strip()
    if not t:
        return None
    m = _MEM.fullmatch(t)
    if m is None:
        raise ValueError(f"not a Slurm memory size: {text!r} (expected e.g. 0, 512K or 4.5G)")
    return round(float(m["n"]) * 1024 ** " KMGTP".index(m["unit"].upper() or " "))


def duration_s(value: str | None) -> int | None:
    """PBS durations ``[[[DD:]HH:]MM:]SS[.frac]`` -> whole seconds."""
    parts = (value or "").strip().split(":")
    try:
        numbers = [float(p) for p in reversed(parts)]
    except ValueError:
        return None
    if len(numbers) > 4:
        return None
    weights = (1, 60, 3600, 86400)[: len(numbers)]
    return int(sum(n * w for n, w in zip(numbers, weights, strict=True)))


_PBS_SIZE = re.compile(r"(?P<n>\d+)(?P<unit>[kmgtp]?)(?P<w>[bw]?)", re.IGNORECASE)


def pbs_size(value: str | None) -> int | None:
    """Bytes in a PBS size (``4194304kb``, ``8gb``, ``512mb``, bare bytes; 1024-based;
    a word is 8 bytes), None when absent or not a size."""
    m = _PBS_SIZE.fullmatch((value or "").strip())
    if m is None or not (value or "").strip():
        return None
    n = int(m["n"]) * 1024 ** " kmgtp".index(m["unit"].lower() or " ")
    return n * 8 if m["w"].lower() == "w" else n
