"""A map's calls as job arrays: packed per task when asked (hpcui.submission.arrays says
how many per task and how many arrays), one sbatch per array, one handle per call back.

Many arrays are sent one after the other; when a later one is refused, the ones already
queued stay queued (they are in the registry and `hpcui jobs` lists them) and the error
says which they are, so nothing is lost or sent twice by a retry of the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hpcui.errors import HpcuiError, UsageError
from hpcui.jobs.job import Job, JobList
from hpcui.jobs.packed import CallList
from hpcui.node.packed import Packed
from hpcui.request.resources import Resources
from hpcui.submission.arrays import ArrayPlan, packed_calls, plan_arrays
from hpcui.submission.submitter import Submitted, Submitter

log = logging.getLogger(__name__)

Call = tuple[tuple, dict]


@dataclass(frozen=True)
class MapTarget:
    """What a map needs of its Cluster (which imports this module, not the reverse)."""

    submitter: Submitter
    defaults: dict[str, Any]
    to_jobs: Callable[[Submitted], list[Job]]
    #: (request, array tasks, what) -> refuses one that costs more than is left
    check_budget: Callable[[Resources, int, str], None]


def submit_map(
    cluster: MapTarget,
    fn: Callable[..., Any],
    calls: list[Call],
    resources: Resources,
    calls_per_task: int | None = None,
    call_s: float | None = None,
    tasks_per_gpu: int | None = None,
) -> JobList | CallList:
    """A JobList (one job per call) when each task runs one call; a CallList otherwise."""
    if not calls:
        return JobList([])
    merged = resources.merged(cluster.defaults)
    gpus = side_by_side_gpus(merged, tasks_per_gpu)
    if gpus and calls_per_task is None and call_s is None:
        calls_per_task = gpus * (tasks_per_gpu or 1)  # one round of calls per task
    shape = plan_arrays(
        len(calls), calls_per_task=calls_per_task, call_s=call_s,
        limit=cluster.submitter.array_limit, parallelism=merged.array_parallelism,
    )  # fmt: skip
    per_task = shape.calls_per_task
    if per_task == 1:
        return JobList(_send(cluster, shape, fn, calls, resources, None))
    runner = Packed(fn, gpus=gpus, tasks_per_gpu=tasks_per_gpu or 1)
    jobs = _send(cluster, shape, runner, packed_calls(calls, per_task), resources, None)
    return CallList(jobs, per_task, len(calls))


def side_by_side_gpus(resources: Resources, tasks_per_gpu: int | None) -> int:
    """The GPUs a task's calls share out with `tasks_per_gpu=` (0: calls run one by one)."""
    if tasks_per_gpu is None:
        return 0
    if isinstance(tasks_per_gpu, bool) or not isinstance(tasks_per_gpu, int) or tasks_per_gpu < 1:
        raise UsageError(f"tasks_per_gpu= is how many calls share one GPU (1 or more), got "
                         f"{tasks_per_gpu!r}.")  # fmt: skip
    if not resources.gpus:
        raise UsageError(
            "tasks_per_gpu= runs several calls at once on each GPU of a task: ask for GPUs "
            "per task too (gpus=1, or gpus=4 for a node's four), or pack calls without it "
            "(calls_per_task=)."
        )
    if (resources.nodes or 1) > 1:
        raise UsageError(
            f"tasks_per_gpu= shares the GPUs of one node; this asks for {resources.nodes} "
            "nodes per task. Ask for one node per task (the array gives you many)."
        )
    return resources.gpus


def submit_calls(
    cluster: MapTarget,
    fn: Callable[..., Any],
    calls: list[Call],
    resources: Resources,
    call_meta: list[dict[str, Any]] | None = None,
) -> JobList:
    """A task per call; call i's record carries `call_meta[i]` (a sweep's element keys)."""
    if not calls:
        return JobList([])
    cap = resources.merged(cluster.defaults).array_parallelism
    shape = plan_arrays(len(calls), limit=cluster.submitter.array_limit, parallelism=cap)
    return JobList(_send(cluster, shape, fn, calls, resources, call_meta))


def _send(
    cluster: MapTarget,
    shape: ArrayPlan,
    fn: Callable[..., Any],
    task_calls: list[Call],
    resources: Resources,
    call_meta: list[dict[str, Any]] | None,
) -> list[Job]:
    """One sbatch per array of the plan, in order."""
    if shape.parallelism != resources.merged(cluster.defaults).array_parallelism:
        resources = resources.model_copy(update={"array_parallelism": shape.parallelism})
    cluster.check_budget(resources, shape.tasks, f"{shape.tasks} array tasks")
    jobs: list[Job] = []
    for tasks in shape.arrays:
        meta = call_meta[tasks.start : tasks.stop] if call_meta else None
        try:
            done = cluster.submitter.submit(
                fn, task_calls[tasks.start : tasks.stop], resources, True, meta
            )
        except HpcuiError as exc:
            if jobs:
                said = (
                    f"{len(jobs)} of the map's {shape.tasks} array tasks were queued before "
                    f"this ({jobs[0].job_id} .. {jobs[-1].job_id}) and stay queued: cancel "
                    "them, or map the remaining calls only."
                )
                log.warning("%s", said)
                exc.add_note(said)
            raise
        jobs += cluster.to_jobs(done)
    if len(shape.arrays) > 1:
        log.info("%d tasks sent as %d arrays (at most %d per array here)",
                 shape.tasks, len(shape.arrays), len(shape.arrays[0]))  # fmt: skip
    return jobs
