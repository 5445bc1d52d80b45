"""What is free now and where the user stands: ``sinfo --Node`` (every node's state, CPUs,
GPUs and memory in use), ``sshare`` (fair share) and ``sprio`` (pending jobs' priority
factors). Pure: argv lists and parsers of the ``|``-separated forms below."""

from __future__ import annotations

import re
from collections.abc import Iterable

from hpcui.backends.records import FairShare, JobPriority, NodeInfo, PartitionFree
from hpcui.backends.slurm.fields import layout_error, leading_int, split_fields
from hpcui.backends.slurm.partitions import allocation_counts

_SEP = "|"
SINFO_NODE_FIELDS: tuple[str, ...] = (
    "NodeHost",
    "Partition",
    "StateLong",
    "CPUsState",
    "Gres",
    "GresUsed",
    "Memory",
    "AllocMem",
)
SSHARE_FIELDS: tuple[str, ...] = (
    "Account",
    "User",
    "RawShares",
    "NormShares",
    "RawUsage",
    "EffectvUsage",
    "FairShare",
)
#: %i id, %u user, %r partition, %Y priority, %A age, %F fair share, %J job size,
#: %P partition factor, %Q QOS factor
SPRIO_FORMAT = "%i|%u|%r|%Y|%A|%F|%J|%P|%Q"


def sinfo_nodes_command() -> list[str]:
    fmt = ",".join(f"{f}:{_SEP}" for f in SINFO_NODE_FIELDS)
    return ["sinfo", "--noheader", "--Node", f"--Format={fmt}"]


def sshare_command() -> list[str]:
    """The user's own associations (``--users`` is the caller by default with -U)."""
    return ["sshare", "--noheader", "--parsable2", "-U", f"--format={','.join(SSHARE_FIELDS)}"]


def sprio_command() -> str:
    """Shell: the user's pending jobs' priority factors (sprio needs the name spelled out)."""
    return f"sprio --noheader --user=\"$(id -un)\" --format='{SPRIO_FORMAT}'"


#: what sprio/sshare print where the site runs no fair-share priority
NO_PRIORITY = re.compile(r"not running a supported priority plugin|priority/basic", re.I)


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def gres_gpus(text: str) -> int:
    """GPUs in a Gres/GresUsed field: ``gpu:4``, ``gpu:h100:4(S:0-1)``, ``gpu:a100:2(IDX:0-1)``,
    several kinds comma-separated (``gpu:a100:2,gpu:v100:1``); ``(null)`` -> 0."""
    total = 0
    for part in re.split(r",(?![^()]*\))", text):
        part = part.strip()
        if not part.startswith("gpu"):
            continue
        words = part.split("(")[0].split(":")
        if len(words) >= 2 and words[-1].isdigit():
            total += int(words[-1])
    return total


def parse_sinfo_nodes(text: str) -> list[NodeInfo]:
    """``sinfo_nodes_command`` output: one record per node and partition."""
    out = []
    # the `Field:|` form (squeue's too): a `|` after every field, the last included
    for host, part, state, cpus, gres, used, mem, alloc_mem in split_fields(
        text, len(SINFO_NODE_FIELDS), suffixed=True
    ):
        counts = allocation_counts(cpus)
        state_word = state.rstrip("*~#!%$@^-+").lower()
        out.append(
            NodeInfo(
                node=host,
                partition=part.rstrip("*"),
                is_default=part.endswith("*"),
                state=state_word,
                responding=not state.endswith("*"),
                cpus_alloc=counts[0],
                cpus_idle=counts[1],
                cpus_total=counts[3],
                gpus_total=gres_gpus(gres),
                gpus_used=gres_gpus(used),
                mem_mb=leading_int(mem),
                mem_alloc_mb=leading_int(alloc_mem),
            )
        )
    return out


def free_by_partition(nodes: Iterable[NodeInfo]) -> list[PartitionFree]:
    """Per partition: nodes by state, and the CPUs/GPUs a new job could get now (on nodes
    that take jobs: not down, drained or not responding)."""
    parts: dict[str, dict] = {}
    for n in nodes:
        p = parts.setdefault(
            n.partition,
            {
                "partition": n.partition,
                "is_default": n.is_default,
                "nodes_total": 0,
                "nodes_idle": 0,
                "nodes_mixed": 0,
                "nodes_allocated": 0,
                "nodes_unavailable": 0,
                "cpus_free": 0,
                "gpus_free": 0,
                "gpus_total": 0,
                "max_gpus_one_node": 0,
            },
        )
        p["nodes_total"] += 1
        p["gpus_total"] += n.gpus_total
        if not n.usable:
            p["nodes_unavailable"] += 1
            continue
        key = {"idle": "nodes_idle", "mixed": "nodes_mixed"}.get(n.state, "nodes_allocated")
        p[key] += 1
        p["cpus_free"] += n.cpus_idle
        p["gpus_free"] += n.gpus_free
        p["max_gpus_one_node"] = max(p["max_gpus_one_node"], n.gpus_free)
    # sinfo lists nodes in an order of its own (by state, by node): the default
    # partition first, then by name, the same on every call
    ordered = sorted(parts.values(), key=lambda p: (not p["is_default"], p["partition"]))
    return [PartitionFree(**p) for p in ordered]


def parse_sshare(text: str) -> list[FairShare]:
    out = []
    for line in text.splitlines():
        parts = line.split(_SEP)
        if not line.strip():
            continue
        if len(parts) != len(SSHARE_FIELDS):
            raise layout_error("sshare", SSHARE_FIELDS, line)
        if not parts[1].strip():
            continue  # the account's own line (no user) carries no fair share of the user
        account, user, raw, norm, usage, effective, fair = (p.strip() for p in parts)
        out.append(
            FairShare(
                account=account,
                user=user,
                raw_shares=leading_int(raw),
                norm_shares=_float(norm),
                raw_usage=leading_int(usage),
                effective_usage=_float(effective),
                fair_share=_float(fair),
            )
        )
    return out


def parse_sprio(text: str) -> list[JobPriority]:
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(_SEP)]
        if not line.strip():
            continue
        if len(parts) != len(SPRIO_FORMAT.split(_SEP)):
            raise layout_error("sprio", SPRIO_FORMAT.split(_SEP), line)
        if not parts[0]:
            continue
        job, user, part, prio, age, fair, size, part_f, qos = parts
        out.append(
            JobPriority(
                job_id=job,
                user=user,
                partition=part,
                priority=_float(prio),
                age=_float(age),
                fair_share=_float(fair),
                job_size=_float(size),
                partition_factor=_float(part_f),
                qos=_float(qos),
            )
        )
    return out
