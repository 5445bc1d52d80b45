"""PBS job ids as PBS Pro, Torque and Slurm's Torque wrappers write them.

Ids look like ``1234.server``, ``1234[].server`` (array parent) and ``1234[7].server``
(subjob); Slurm's wrapper prints a bare ``1234``. ``qstat`` shortens ids to fit its
columns (``12860476.meta-pb*`` on PBS Pro, a short host name on Torque), so an id read
from a table is matched against the one qsub returned, never compared for equality.
"""

from __future__ import annotations

import re

from hpcui.backends.model import Model

_ID = re.compile(r"(?P<seq>\d+)(?:\[(?P<index>\d*)\])?(?:\.(?P<server>\S+))?")


class PbsJobId(Model):
    """One id split into parts, so arrays and servers need no string slicing elsewhere."""

    seq: int
    server: str | None = None
    is_array_parent: bool = False  # 1234[].server
    array_index: int | None = None  # 1234[7].server


def parse_pbs_id(text: str) -> PbsJobId:
    """Split ``seq[index].server``; raise ValueError on anything that is not an id."""
    m = _ID.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"not a PBS job id: {text!r}")
    index = m["index"]
    return PbsJobId(
        seq=int(m["seq"]),
        server=m["server"],
        is_array_parent=index == "",
        array_index=int(index) if index else None,
    )


def pbs_id_matches(full: str, shown: str) -> bool:
    """Whether the id ``qstat`` shows (maybe cut, ``*``-marked or with a short host) is ``full``.

    Ids compare dot-component by dot-component as far as both go, so ``1234`` matches
    ``1234.server`` and ``1234.pbs01`` matches ``1234.pbs01.example.org``, but ``123``
    never matches ``1234.server`` and ``1234[7]`` never matches the parent ``1234[]``.
    A trailing ``*`` means qstat cut the id to fit its column: then a prefix suffices.
    """
    full, shown = full.strip(), shown.strip()
    if shown.endswith("*"):
        cut = shown.rstrip("*")
        return bool(cut) and (full.startswith(cut) or cut.startswith(full + "."))
    a, b = full.split("."), shown.split(".")
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def parse_qsub_output(stdout: str) -> str:
    """The job id qsub printed: ``1234.server`` (PBS Pro, Torque) or ``1234`` (Slurm's wrapper).

    The last line that is an id wins, so a site banner above it does no harm. Slurm's
    wrapper prints its sbatch failure on stdout and may still exit 0: that text is no id
    and raises ValueError with the output, which is what the user needs to see.
    """
    for line in reversed(stdout.splitlines()):
        if _ID.fullmatch(line.strip()):
            return line.strip()
    raise ValueError(f"qsub printed no job id; its output was: {stdout.strip()!r}")
