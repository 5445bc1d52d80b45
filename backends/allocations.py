"""Compute allocations (billing units left) from the sites' own tools. Pure parsers.

Only `lumi-allocations` has a parser: its layout is taken from the tool's source (see
tests/fixtures/allocation-constructed/SOURCES.md). The other sites' tools
(`ALLOCATION_COMMANDS`) are run and shown verbatim until a real output of them is at hand.
"""

from __future__ import annotations

import re

from hpcui.backends.records import AllocationEntry

#: the site tool by profile key -> its argv
ALLOCATION_COMMANDS: dict[str, list[str]] = {
    "lumi-allocations": ["lumi-allocations"],
    "bsc_acct": ["bsc_acct"],
    "jutil": ["jutil", "user", "cpuquota"],
    "csc-projects": ["csc-projects"],
}

_CELL = re.compile(
    r"(?P<used>-?[\d.]+)/(?P<alloc>-?[\d.]+)\s+\(\s*(?P<pct>-?[\d.]+)%\)\s+(?P<unit>\S+)"
)
_KINDS = {"CPU": "cpu", "GPU": "gpu", "Storage": "storage", "QPU": "qpu"}


class AllocationParseError(ValueError):
    """Not the tool's layout; the message says what was expected."""


def parse_lumi_allocations(text: str) -> list[AllocationEntry]:
    """``lumi-allocations``: one row per project, a cell per resource (``N/A``: none)."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = next((i for i, line in enumerate(lines) if line.startswith("Project")), None)
    if header is None:
        raise AllocationParseError(
            "expected lumi-allocations' table (a `Project | CPU (used/allocated) | ...` header)"
        )
    kinds = [
        _KINDS.get(col.strip().split(" ")[0], col.strip()) for col in lines[header].split("|")[1:]
    ]
    out = []
    for line in lines[header + 1 :]:
        if set(line.strip()) == {"-"}:
            continue
        cells = line.split("|")
        project = cells[0].strip()
        for kind, cell in zip(kinds, cells[1:], strict=False):
            m = _CELL.search(cell)
            if m is None:
                continue  # N/A: nothing of this kind allocated
            out.append(
                AllocationEntry(
                    project=project,
                    resource=kind,
                    used=float(m["used"]),
                    allocated=float(m["alloc"]),
                    unit=m["unit"],
                )
            )
    return out


ALLOCATION_PARSERS = {"lumi-allocations": parse_lumi_allocations}
