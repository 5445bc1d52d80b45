"""Slurm's partitions: the ``sinfo`` command line and its parser, one line per partition
(per kind of node in it), built from one field tuple (``SINFO_FIELDS``)."""

from __future__ import annotations

from hpcui.backends.records import PartitionInfo
from hpcui.backends.slurm.fields import SEP, gres_gpus, seconds, split_fields, text_value

# partition, avail, time limit, nodes A/I/O/T, CPUs A/I/O/T, gres, nodelist
SINFO_FIELDS: tuple[str, ...] = ("%P", "%a", "%l", "%F", "%C", "%G", "%N")


def sinfo_command() -> list[str]:
    """``sinfo`` for ``parse_sinfo``: one line per partition (per kind of node in it)."""
    return ["sinfo", "--noheader", f"--format={SEP.join(SINFO_FIELDS)}"]


def allocation_counts(text: str) -> list[int]:
    parts = text.split("/")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        raise ValueError(f"expected allocated/idle/other/total counts, got {text!r}")
    return [int(p) for p in parts]


def parse_sinfo(text: str) -> list[PartitionInfo]:
    """Parse ``sinfo_command`` output."""
    result = []
    for name, avail, limit, nodes, cpus, gres, nodelist in split_fields(
        text, len(SINFO_FIELDS), suffixed=False
    ):
        na, ni, no, nt = allocation_counts(nodes)
        ca, ci, co, ct = allocation_counts(cpus)
        result.append(
            PartitionInfo(
                partition=name.rstrip("*"),
                is_default=name.endswith("*"),
                avail=avail,
                time_limit_s=seconds(limit),
                nodes_alloc=na,
                nodes_idle=ni,
                nodes_other=no,
                nodes_total=nt,
                cpus_alloc=ca,
                cpus_idle=ci,
                cpus_other=co,
                cpus_total=ct,
                gres=text_value(gres),
                gpus_per_node=gres_gpus(gres) if text_value(gres) else None,
                nodelist=nodelist,
            )
        )
    return result
