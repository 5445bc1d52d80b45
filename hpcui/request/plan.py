"""A request resolved against a site profile: `resolve()` turns what a user asks (`gpus=16`)
into what the scheduler needs (4 nodes x 4 tasks x 20 cores, `--gres=gpu:4`, a partition that
takes it) using only the profile's data, and fails before any network when the site would
refuse the job. `batch_spec()` is the one mapping from an Allocation to the renderer's
BatchSpec; `explain()` says an allocation in one line."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from hpcui.backends.batch import BatchSpec, format_mem
from hpcui.backends.containers import ContainerLaunch, check_image
from hpcui.backends.launch import agent_per_node
from hpcui.common.formatting import short_duration
from hpcui.errors import UsageError
from hpcui.profiles import Profile
from hpcui.request.allocation import TINY_MEM_MB, Advice, Allocation
from hpcui.request.billing import billing_advice, units_per_hour
from hpcui.request.partitions import check_qos, pick_partition
from hpcui.request.resources import Resources

__all__ = ["Advice", "Allocation", "batch_spec", "explain", "resolve"]


def _most_gpus(profile: Profile) -> tuple[int, str] | None:
    """The most GPUs one job can get where the profile says (a GPU partition's max_gpus,
    or its max_nodes x GPUs per node), and which partition; None when it does not say."""
    best: tuple[int, str] | None = None
    gpn = profile.gpus_per_node or 0
    for part in profile.partitions.values():
        if not part.gpu:
            continue
        if part.max_gpus is not None:
            most, why = part.max_gpus, f"partition {part.name}'s limit"
        elif part.max_nodes is not None and gpn:
            most = part.max_nodes * gpn
            why = f"{part.max_nodes} nodes of {gpn} GPUs in partition {part.name}"
        else:
            return None  # a partition without a known limit: no maximum to say
        if best is None or most > best[0]:
            best = (most, why)
    return best


def _nodes_and_gpus(req: Resources, profile: Profile) -> tuple[int, int]:
    """Nodes and GPUs per node: N GPUs on G-GPU nodes -> ceil(N/G) whole nodes."""
    gpn, gpus = profile.gpus_per_node, req.gpus
    if gpus and gpn == 0 and profile.scheduler == "local":
        why = next((n[len("no GPU: ") :] for n in profile.notes if n.startswith("no GPU: ")), "")
        raise UsageError(
            f"This machine has no GPU hpcui can use{f' ({why})' if why else ''}. Drop "
            f"gpus={gpus}; to run {gpus} rank(s) on CPU (gloo) instead, ask for "
            f"tasks_per_node={gpus}."
        )
    if gpus and gpn == 0:
        raise UsageError(
            f"Profile {profile.name!r} has no GPUs; drop gpus={gpus} or pick a GPU cluster."
        )
    if not gpus or gpn is None:  # no GPUs, or a site whose node shape hpcui does not know
        nodes = req.nodes or 1
        if gpus % nodes:
            raise UsageError(f"gpus={gpus} cannot be split evenly over nodes={nodes}.")
        return nodes, gpus // nodes
    if req.nodes and math.ceil(gpus / req.nodes) > gpn:  # the node is the first limit met
        most = gpn * req.nodes
        raise UsageError(
            f"gpus={gpus} on nodes={req.nodes} needs {math.ceil(gpus / req.nodes)} GPUs on a "
            f"node; {profile.name}'s nodes have {gpn}. Use nodes={math.ceil(gpus / gpn)}, or "
            f"ask for at most {most} GPUs on {req.nodes} node(s)."
        )
    cap = _most_gpus(profile)
    if cap is not None and gpus > cap[0]:
        most, where = cap
        raise UsageError(
            f"gpus={gpus} is more than {profile.name} gives one job: at most {most} ({where}). "
            f"Ask for {most} or fewer."
        )
    if gpus > gpn and gpus % gpn:
        lo, hi = (gpus // gpn) * gpn, math.ceil(gpus / gpn) * gpn
        raise UsageError(
            f"gpus={gpus} spans nodes of {gpn} GPUs on {profile.name}: multi-node jobs use whole "
            f"nodes. Ask for {lo} or {hi} GPUs."
        )
    nodes = req.nodes or math.ceil(gpus / gpn)
    if gpus % nodes:
        raise UsageError(f"gpus={gpus} cannot be split evenly over nodes={nodes}.")
    per_node = gpus // nodes
    if per_node > gpn:
        raise UsageError(
            f"gpus={gpus} over nodes={nodes} needs {per_node} GPUs per node; "
            f"{profile.name} nodes have {gpn}. Use nodes={math.ceil(gpus / gpn)}."
        )
    return nodes, per_node


def resolve(req: Resources, profile: Profile, *, default_name: str = "hpcui") -> Allocation:
    """Apply the profile's rules; a request the site cannot run fails here, before any network."""
    nodes, gpn = _nodes_and_gpus(req, profile)
    gpus = nodes * gpn
    if profile.scheduler == "local" and nodes > 1:
        have = f"{profile.gpus_per_node} GPU(s)" if profile.gpus_per_node else "no GPU"
        raise UsageError(
            f"The local cluster is this one machine ({have}); this request needs {nodes} "
            f"nodes. Ask for at most {profile.gpus_per_node or 0} GPUs and nodes=1 — several "
            "ranks may share a GPU with tasks_per_node=N."
        )
    part, routed = pick_partition(req, profile, gpus, nodes)
    check_qos(req, profile, gpus, nodes)
    if profile.requires_account and not req.account:
        flag = "-P <project>" if profile.scheduler == "pbs" else "--account"
        raise UsageError(
            f"{profile.name} requires an account/project ({flag}): pass account='...' or set "
            "defaults.account in the cluster config."
        )

    if req.launcher == "auto":
        raise UsageError(
            'launcher="auto" is chosen from the code that runs: plan it through submit() or '
            "`hpcui run`, or name the launcher (submitit, torchrun, lightning, accelerate, "
            "deepspeed)."
        )
    if profile.scheduler == "local" and agent_per_node(req.launcher, nodes):
        raise UsageError(
            f"launcher={req.launcher!r} starts one launcher per node, which the local cluster "
            "(plain processes) does not run. Ask for tasks_per_node=N with "
            "launcher='submitit': Lightning, Accelerate and DeepSpeed find their ranks in "
            "every task."
        )
    if agent_per_node(req.launcher, nodes):  # one agent per node starts the GPU workers
        tasks = req.tasks_per_node or 1
    else:
        tasks = req.tasks_per_node or max(gpn, 1)
    cpus = req.cpus_per_task
    if cpus is None:
        share = (profile.gpu_cores or 0) * gpn
        cpus = max(share // tasks, 1) if share else 1
    mem = req.mem_mb
    if mem is None and gpn and profile.mem_per_gpu:
        mem = profile.mem_per_gpu * gpn

    advice: list[Advice] = []
    if req.mem_mb is not None and req.mem_mb < TINY_MEM_MB:
        advice.append(
            Advice(
                code="tiny-mem",
                message=(
                    f"mem={format_mem(req.mem_mb)} per node is below 100 MB: Python alone "
                    "needs more, and the job may be killed at start. `m`/`M` mean megabytes "
                    "(as Slurm reads them): for gigabytes write mem='10G'."
                ),
                suggestion={"mem": f"{max(1, req.mem_mb)}G"},
            )
        )
    oversubscribed = profile.cores_per_node and tasks * cpus > profile.cores_per_node
    if oversubscribed and profile.scheduler == "local":  # a workstation: allowed, said
        advice.append(
            Advice(
                code="oversubscribed",
                message=(
                    f"{tasks} tasks x {cpus} cpus = {tasks * cpus} CPUs on this machine's "
                    f"{profile.cores_per_node} cores: the ranks share cores (fine for trying "
                    "DDP/FSDP out, slower than it would be)."
                ),
            )
        )
    elif (
        profile.cores_per_node and tasks * cpus > profile.cores_per_node * profile.threads_per_core
    ):
        limit = profile.cores_per_node * profile.threads_per_core
        raise UsageError(
            f"{tasks} tasks x {cpus} cpus = {tasks * cpus} CPUs per node, but {profile.name} "
            f"nodes have {limit}. Lower cpus_per_task or tasks_per_node."
        )
    if profile.mem_per_node and mem and mem > profile.mem_per_node:
        raise UsageError(
            f"mem={format_mem(mem)} per node exceeds {profile.name}'s {format_mem(profile.mem_per_node)} "
            "per node. Ask for less memory (mem is per node) or more nodes."
        )

    env = dict(profile.env)
    if profile.interconnect_suffix:
        env["HPCUI_INTERCONNECT_SUFFIX"] = profile.interconnect_suffix
    if req.track:  # the node points the trackers at the job folder (hpcui.node.track_env)
        env["HPCUI_TRACK"] = req.track
        if req.track_group:
            env["HPCUI_SWEEP"] = req.track_group
    fields: dict[str, Any] = dict(
        nodes=nodes,
        tasks_per_node=tasks,
        cpus_per_task=cpus,
        gpus_per_node=gpn,
        mem_mb=mem,
    )
    billed = unit = None
    if part is not None and part.billing is not None:
        billed = units_per_hour(part.billing, nodes, tasks * cpus, mem, gpn)
        unit = part.billing.unit
        advice += billing_advice(profile, part, fields, billed)
    elif part is not None and part.whole_nodes and profile.gpus_per_node and gpn:
        if gpn < profile.gpus_per_node:
            advice.append(
                Advice(
                    code="whole-nodes",
                    message=(
                        f"Partition {part.name!r} allocates whole nodes: the job holds all "
                        f"{profile.gpus_per_node} GPUs of each node but uses {gpn}. Ask for "
                        f"gpus={profile.gpus_per_node * nodes} to use them."
                    ),
                    suggestion={"gpus": profile.gpus_per_node * nodes},
                )
            )
    return Allocation(
        **fields,
        time_s=req.time_s,
        partition=part.name if part is not None else req.partition,
        qos=req.qos,
        account=req.account,
        constraint=req.constraint,
        exclusive=req.exclusive,
        name=req.name or default_name,
        extra=(*profile.extra_directives, *req.extra),
        after_ok=req.after_ok,
        modules=(*_container_modules(req, profile), *req.modules),
        container=req.container,
        container_runtime=_container_runtime(req, profile),
        binds=req.binds,
        container_env=dict(req.container_env),
        gpu_directive=profile.gpu_directive,
        gpu_type=profile.gpu_type,
        profile=profile.name,
        scheduler=profile.scheduler,
        launcher=req.launcher,
        max_restarts=req.max_restarts,
        signal_delay_s=_signal_delay(req, profile),
        array_parallelism=req.array_parallelism,
        routed_to=routed,
        env=env,
        billed_per_hour=billed,
        billing_unit=unit,
        advice=tuple(advice),
    )


def _container_modules(req: Resources, profile: Profile) -> tuple[str, ...]:
    """The site's runtime module(s), loaded by a job that runs in a container."""
    if req.container is None or profile.container is None:
        return ()
    return tuple(m for m in profile.container.modules if m not in req.modules)


def _container_runtime(req: Resources, profile: Profile) -> str | None:
    """The runtime that starts the request's image; a request the site cannot start fails
    here, before any network."""
    if req.container is None:
        if req.container_runtime or req.binds or req.container_env:
            raise UsageError(
                "container_runtime, binds and container_env apply to a container: name the "
                "image with container=... (CLI: --container IMAGE)"
            )
        return None
    if profile.scheduler == "local":
        raise UsageError(
            "The local cluster runs Python on this machine, not in a container image: drop "
            "container=..., or submit to a cluster whose profile names a container runtime."
        )
    runtime = req.container_runtime or (profile.container.runtime if profile.container else None)
    if runtime is None:
        raise UsageError(
            f"Profile {profile.name!r} names no container runtime: pass container_runtime="
            "apptainer, singularity, enroot or pyxis (CLI: --container-runtime), or set "
            "[container] runtime = ... in the profile (docs/containers.md)."
        )
    if runtime == "pyxis" and profile.scheduler != "slurm":
        raise UsageError(
            f"pyxis is a Slurm plugin (srun --container-image); {profile.name} runs "
            f"{profile.scheduler}: use container_runtime='enroot' or 'apptainer' there."
        )
    problem = check_image(req.container, runtime)
    if problem:
        raise UsageError(problem + ".")
    return runtime


def _signal_delay(req: Resources, profile: Profile) -> int:
    """The request's, else the profile's, but never more than a quarter of a short time
    limit (a 2-minute job told "the limit is near" 90 s early would stop at 30 s; Slurm
    may send it a minute earlier still)."""
    if req.signal_delay_s is not None:
        return req.signal_delay_s
    if req.time_s:
        return max(1, min(profile.signal_delay_s, req.time_s // 4))
    return profile.signal_delay_s


def job_setup(setup: Sequence[str], modules: Sequence[str]) -> tuple[str, ...]:
    """The shell lines a job runs before its Python: the cluster's setup, then the job's own
    modules (which that setup may make visible). What the job's Python imports is asked
    after the same lines."""
    return (*setup, *((f"module load {' '.join(modules)}",) if modules else ()))


def batch_spec(
    alloc: Allocation,
    *,
    folder: str,
    token: str,
    array_size: int | None = None,
    python: str = "python3",
    setup: Sequence[str] = (),
    pythonpath: Sequence[str] = (),
    verified: Sequence[tuple[str, str]] = (),
    container: ContainerLaunch | None = None,
    chain: bool = False,
    env_folder: str = "",
) -> BatchSpec:
    """The renderer's view of an allocation: the one mapping used by submit and previews.

    Every field BatchSpec shares with Allocation is copied by name, so a new resource is
    declared in Resources/Allocation/BatchSpec and needs no line here.
    """
    shared = {f.name for f in dataclasses.fields(BatchSpec)} & set(Allocation.model_fields)
    copied = {name: getattr(alloc, name) for name in shared}
    copied["env"] = dict(alloc.env)
    return BatchSpec(
        **copied,
        folder=folder,
        token=token,
        array_size=array_size,
        python=python,
        setup=job_setup(setup, alloc.modules),
        pythonpath=tuple(pythonpath),
        verified=tuple(verified),
        image=container,
        chain=chain,
        env_folder=env_folder,
    )


def explain(alloc: Allocation) -> str:
    """A short human summary of an allocation, for the CLI and TUI (advice on its own lines)."""
    shape = f"{alloc.nodes} node(s) x {alloc.tasks_per_node} task(s) x {alloc.cpus_per_task} cpu(s)"
    parts = [shape]
    if alloc.gpus_per_node:
        parts.append(f"{alloc.gpus} GPU(s) ({alloc.gpus_per_node} per node)")
    if alloc.mem_mb:
        parts.append(f"{format_mem(alloc.mem_mb)} per node")
    if alloc.time_s:
        parts.append(short_duration(alloc.time_s))
    where = []
    if alloc.partition:
        where.append(f"partition {alloc.partition}")
        if alloc.routed_to:
            where[-1] += f" -> {alloc.routed_to}"
    if alloc.qos:
        where.append(f"qos {alloc.qos}")
    if alloc.account:
        where.append(f"account {alloc.account}")
    line = ", ".join(parts)
    if where:
        line += " on " + ", ".join(where)
    if agent_per_node(alloc.launcher, alloc.nodes):
        line += f" ({alloc.launcher}: one launcher per node)"
    elif alloc.launcher in ("lightning", "deepspeed"):
        line += f" ({alloc.launcher}: one task per rank)"
    if alloc.container:
        line += f" in {alloc.container_runtime} image {alloc.container}"
    lines = [line]
    if alloc.billed_per_hour is not None:
        lines.append(f"billed {alloc.billed_per_hour:g} {alloc.billing_unit} per hour")
        if alloc.time_s:
            total = alloc.billed_per_hour * alloc.time_s / 3600
            lines[-1] += f" (at most {total:g} for the time limit)"
    lines += [f"advice: {a.message}" for a in alloc.advice]
    return "\n".join(lines)
