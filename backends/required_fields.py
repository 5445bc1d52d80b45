"""A record without the fields hpcui reads is refused in words, never read as empty.

An older tool prints another key (Slurm before 2.3: ``Name=`` for ``JobName=``), a site
asks a column hpcui does not map (``JobIDRaw`` for ``JobID``), a JSON answer lacks a key:
each parser names what it needs and what it found instead, so the error says which
layout hpcui met, not "not a Slurm job id: ''" three calls later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MissingFields", "require", "require_columns"]


class MissingFields(ValueError):
    """The fields a parser needs are not in what the tool printed."""

    def __init__(self, what: str, missing: list[str], found: Iterable[str]) -> None:
        self.what, self.missing = what, missing
        shown = [str(f) for f in found][:20]
        super().__init__(
            f"{what} has no {', '.join(missing)}: hpcui reads "
            f"{'that field' if len(missing) == 1 else 'those fields'} and cannot read this "
            f"layout (an older or unknown version of the tool?). It has: "
            f"{', '.join(shown) or 'nothing'}."
        )


def require(record: Mapping[str, Any], needed: Iterable[str], what: str) -> None:
    """MissingFields naming the keys of `needed` that `record` lacks."""
    missing = [key for key in needed if key not in record]
    if missing:
        raise MissingFields(what, missing, record.keys())


def require_columns(
    columns: Iterable[str], mapping: Mapping[str, str], needed: Iterable[str], what: str
) -> None:
    """The asked columns (`columns`, mapped to record keys by `mapping`, case-insensitive)
    give every key in `needed`; else MissingFields naming the column each missing key is
    read from, and the columns that were not mapped."""
    columns = list(columns)
    lowered = {field.lower(): key for field, key in mapping.items()}
    have = {lowered.get(c.lower()) for c in columns}
    missing = [k for k in needed if k not in have]
    if missing:
        column_of = {key: field for field, key in mapping.items()}
        unmapped = [c for c in columns if c.lower() not in lowered]
        raise MissingFields(
            what,
            [column_of.get(k, k) for k in missing],
            [f"{c} (not read by hpcui)" if c in unmapped else c for c in columns],
        )
