"""``qstat -Q``: a PBS server's queues, as hpcui's scheduler-neutral PartitionInfo.

One table shape serves PBS Pro, Torque and Slurm's Torque wrapper (header ``Queue Max Tot
Ena Str Que Run Hld Wat Trn Ext`` then ``Type``, ``T`` or ``T Cpt``); the wrapper prints
``?`` for counts it does not know. Sources of each fixture: tests/fixtures/pbs-constructed/
SOURCES.md. Columns are found by header name, never by position, because the dialects
differ in their last columns.
"""

from __future__ import annotations

import re

from hpcui.backends.records import PartitionInfo
from hpcui.backends.required_fields import require

#: the queue table; -Q alone works on all three (PBS Pro's -Qf is too verbose, the
#: wrapper has no -Qf)
QSTAT_Q_COMMAND = ["qstat", "-Q"]

_HEADER = re.compile(r"^\s*Queue\s+Max\s+Tot\b")
#: Type column: ``Exec``/``Route`` (PBS Pro, ``Exe*``/``Rou*`` when cut), ``E``/``R`` (Torque)
_KINDS = {"E": "exec", "R": "route"}


def _count(value: str) -> int | None:
    """A job count; ``?`` (wrapper) and ``-`` mean unknown. Max 0 is PBS's "no limit"."""
    return int(value) if value.isdigit() else None


def parse_qstat_q(text: str) -> list[PartitionInfo]:
    """Every queue of a ``qstat -Q`` table, routing queues included (``kind`` says which).

    A queue is ``up`` when enabled and started, ``inact`` when enabled but stopped (jobs
    wait) and ``down`` when disabled (qsub refuses). Raises ValueError without the header:
    an error message must never read as "no queues".
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _HEADER.match(line)), None)
    if start is None:
        raise ValueError(f"no `qstat -Q` header in {text.strip()[:200]!r}")
    names = lines[start].split()
    require(dict.fromkeys(names), ("Queue", "Ena", "Str"), "This `qstat -Q` table")
    out = []
    for line in lines[start + 1 :]:
        cells = line.split()
        if not cells or set(line.strip()) <= {"-", " "}:
            continue
        if len(cells) < len(names) - 1:  # Torque's Cpt column may be missing on old servers
            raise ValueError(
                f"qstat -Q line has {len(cells)} columns, header {len(names)}: {line!r}"
            )
        row = dict(zip(names, cells))
        enabled, started = row.get("Ena") == "yes", row.get("Str") == "yes"
        kind = row.get("Type", row.get("T", ""))
        out.append(
            PartitionInfo(
                partition=row["Queue"],
                is_default=False,  # qstat -Q does not say; `qmgr -c 'p s'` would
                avail="up" if enabled and started else "inact" if enabled else "down",
                time_limit_s=None,
                nodes_alloc=None,
                nodes_idle=None,
                nodes_other=None,
                nodes_total=None,
                cpus_alloc=None,
                cpus_idle=None,
                cpus_other=None,
                cpus_total=None,
                gres="",
                gpus_per_node=None,
                nodelist="",
                jobs_queued=_count(row.get("Que", "")),
                jobs_running=_count(row.get("Run", "")),
                kind=_KINDS.get(kind[:1].upper(), kind.lower() or None),
            )
        )
    return out
