"""Which partition takes a request, and whether its QoS allows it: the site's limits
(time, nodes, GPUs) read from the profile, each refusal saying what would fit."""

from __future__ import annotations

from hpcui.common.formatting import short_duration
from hpcui.errors import UsageError
from hpcui.profiles import Partition, Profile
from hpcui.request.resources import Resources


def _limits_problem(
    p: Partition, profile: Profile, gpus: int, nodes: int, time_s: int | None
) -> str | None:
    """Why partition `p` refuses the request (None: it takes it)."""
    if gpus and not p.gpu and any(q.gpu for q in profile.partitions.values()):
        return "has no GPUs"
    if p.max_gpus is not None and gpus > p.max_gpus:
        return f"takes at most {p.max_gpus} GPUs"
    if p.min_gpus is not None and gpus < p.min_gpus:
        return f"takes {p.min_gpus} or more GPUs"
    if p.max_nodes is not None and nodes > p.max_nodes:
        return f"takes at most {p.max_nodes} nodes"
    if p.max_time is not None and time_s is not None and time_s > p.max_time:
        return f"allows at most {short_duration(p.max_time)}"
    return None


def _admits(
    p: Partition, profile: Profile, gpus: int, nodes: int, time_s: int | None
) -> tuple[str | None, str | None]:
    """(problem, routed_to): a routing queue takes a job when one of its targets does."""
    problem = _limits_problem(p, profile, gpus, nodes, time_s)
    if problem or not p.routes_to:
        return problem, None
    reasons = []
    for name in p.routes_to:
        target = profile.partitions[name]
        if target.interactive:
            continue
        why = _limits_problem(target, profile, gpus, nodes, time_s)
        if why is None:
            return None, name
        reasons.append(f"{name} {why}")
    return "routes to no queue that takes it (" + "; ".join(reasons) + ")", None


def _describe(gpus: int, nodes: int, time_s: int | None) -> str:
    parts = [f"gpus={gpus}", f"nodes={nodes}"]
    if time_s:
        parts.append(f"time={short_duration(time_s)}")
    return ", ".join(parts)


def pick_partition(
    req: Resources, profile: Profile, gpus: int, nodes: int
) -> tuple[Partition | None, str | None]:
    """The named partition if it takes the request, else the first automatic one that does."""
    parts = profile.partitions
    if req.partition:
        part = parts.get(req.partition)
        if part is None:
            if not parts:
                return None, None  # the profile knows no partitions: pass it through
            raise UsageError(
                f"Partition {req.partition!r} is not in profile {profile.name!r} "
                f"(known: {', '.join(parts)}). Pick one of those, or add it with "
                f"[clusters.NAME.profile_overrides.partitions.{req.partition}]."
            )
        problem, routed = _admits(part, profile, gpus, nodes, req.time_s)
        if problem:
            others = [
                p.name
                for p in parts.values()
                if p is not part and _admits(p, profile, gpus, nodes, req.time_s)[0] is None
            ]
            fix = (
                f"use partition {others[0]!r}"
                if others
                else "ask for less (fewer GPUs/nodes or less time)"
            )
            raise UsageError(
                f"Partition {part.name!r} on {profile.name} {problem}; the request has "
                f"{_describe(gpus, nodes, req.time_s)}. Fix: {fix}."
            )
        return part, routed
    candidates = [p for p in parts.values() if p.auto]
    if not candidates:
        return None, None
    if not gpus:  # CPU jobs prefer CPU partitions; a GPU-only machine still runs them
        candidates.sort(key=lambda p: p.gpu)
    reasons = []
    for p in candidates:
        problem, routed = _admits(p, profile, gpus, nodes, req.time_s)
        if problem is None:
            return p, routed
        reasons.append(f"{p.name!r} {problem}")
    raise UsageError(
        f"No partition of {profile.name} takes {_describe(gpus, nodes, req.time_s)}: "
        f"{'; '.join(reasons)}. Ask for less, or name a partition explicitly."
    )


def check_qos(req: Resources, profile: Profile, gpus: int, nodes: int) -> None:
    if not req.qos:
        if profile.requires_qos:
            known = ", ".join(profile.qos) or "your project's QoS"
            raise UsageError(
                f"{profile.name} needs a QoS (it decides the partition): pass qos='...' "
                f"(known: {known}) or set defaults.qos in the cluster config."
            )
        return
    if profile.qos_prefix and not req.qos.startswith(profile.qos_prefix):
        known = ", ".join(profile.qos) or f"{profile.qos_prefix}..."
        raise UsageError(
            f"QoS {req.qos!r} is not for {profile.name}: its QoS names start with "
            f"{profile.qos_prefix!r} (known: {known}). Use one of those, or the profile "
            "of the machine that QoS belongs to."
        )
    q = profile.qos.get(req.qos)
    if q is None:
        return  # project-specific QoS: the scheduler judges it
    for limit, value, what in (
        (q.max_time, req.time_s, "time"),
        (q.max_nodes, nodes, "nodes"),
        (q.max_gpus, gpus, "gpus"),
    ):
        if limit is not None and value is not None and value > limit:
            shown = short_duration if what == "time" else str
            others = [
                o.name
                for o in profile.qos.values()
                if o is not q
                and (o.max_time is None or req.time_s is None or req.time_s <= o.max_time)
                and (o.max_nodes is None or nodes <= o.max_nodes)
                and (o.max_gpus is None or gpus <= o.max_gpus)
            ]
            fix = (
                f", or a QoS your project has that allows it ({', '.join(others)})"
                if others
                else ""
            )
            raise UsageError(
                f"{what}={shown(value)} exceeds the {shown(limit)} limit of QoS {q.name!r} on "
                f"{profile.name}. Ask for less{fix}."
            )
