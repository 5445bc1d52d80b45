"""What a job costs per hour where the profile knows the partition's billing rule, and the
advice when the same GPUs could be had for less (LUMI: cores or memory beyond the share)."""

from __future__ import annotations

import math
from typing import Any

from hpcui.backends.batch import format_mem
from hpcui.profiles import Billing, Partition, Profile
from hpcui.request.allocation import Advice


def units_per_hour(b: Billing, nodes: int, cores: int, mem_mb: int | None, gpus: int) -> float:
    """Units per hour: `b.factor * max(...)` per node for slices, `per_node` for whole nodes."""
    if b.per_node is not None:
        return b.per_node * nodes
    terms = []
    if b.cores_per_unit:
        terms.append(math.ceil(cores / b.cores_per_unit))
    if b.mem_per_unit and mem_mb:
        terms.append(math.ceil(mem_mb / b.mem_per_unit))
    if b.gpus_per_unit:
        terms.append(math.ceil(gpus / b.gpus_per_unit))
    return b.factor * max(terms, default=0) * nodes


def billing_advice(
    profile: Profile, part: Partition, alloc: dict[str, Any], billed: float
) -> list[Advice]:
    """Advice when the same GPUs could be had for less (LUMI: cores/memory beyond the share)."""
    b = part.billing
    gpn, nodes = alloc["gpus_per_node"], alloc["nodes"]
    if b is None or not gpn:
        return []
    unit = b.unit
    if b.per_node is not None:
        if profile.gpus_per_node and gpn < profile.gpus_per_node:
            cheaper = [
                p
                for p in profile.partitions.values()
                if p is not part and p.auto and p.billing and p.billing.per_node is None
            ]
            alt = (
                f" Use partition {cheaper[0].name!r}, which bills by resources," if cheaper else ""
            )
            return [
                Advice(
                    code="billed-whole-nodes",
                    message=(
                        f"Partition {part.name!r} bills whole nodes: {billed:g} {unit} per hour "
                        f"for {nodes} node(s), but the job uses {gpn} of "
                        f"{profile.gpus_per_node} GPUs per node.{alt} or ask for "
                        f"gpus={profile.gpus_per_node * nodes} to use what you pay for."
                    ),
                    suggestion={"partition": cheaper[0].name} if cheaper else {},
                )
            ]
        return []
    share_cores = (profile.gpu_cores or 0) * gpn
    share_mem = (profile.mem_per_gpu or 0) * gpn or None
    fair = units_per_hour(b, nodes, share_cores, share_mem, gpn)
    if billed <= fair:
        return []
    suggestion: dict[str, Any] = {}
    used_cores = alloc["tasks_per_node"] * alloc["cpus_per_task"]
    if share_cores and used_cores > share_cores:
        suggestion["cpus_per_task"] = max(share_cores // alloc["tasks_per_node"], 1)
    if share_mem and alloc["mem_mb"] and alloc["mem_mb"] > share_mem:
        suggestion["mem"] = format_mem(share_mem)
    asked = f"{gpn} GPU(s) with {used_cores} cores" + (
        f" and {format_mem(alloc['mem_mb'])}" if alloc["mem_mb"] else ""
    )
    as_gpus = math.ceil(billed / (b.factor * nodes) * (b.gpus_per_unit or 1))
    better = ", ".join(f"{k}={v!r}" for k, v in suggestion.items())
    fixes = [f"ask for {better} (billed {fair:g})"] if better else []
    if profile.gpus_per_node and as_gpus <= profile.gpus_per_node:
        fixes.append(f"ask for gpus={as_gpus * nodes} to use what you pay for")
    return [
        Advice(
            code="billed-beyond-use",
            message=(
                f"Partition {part.name!r} bills this job {billed:g} {unit} per hour, as much as "
                f"{as_gpus} GPU(s) per node, for {asked} per node. "
                + (("Fix: " + ", or ".join(fixes) + ".") if fixes else "")
            ).strip(),
            suggestion=suggestion,
        )
    ]
