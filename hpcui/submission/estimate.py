"""When would it start? The scheduler's own estimate for a request, in the partition the
plan picks and, when the request names none, in every other partition of the profile that
takes it (a job that waits hours in `gpu` may start now in `gpu-long`). Never a guess: a
scheduler without estimates says so (`Scheduler.estimate_start`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hpcui.backends.records import StartEstimate
from hpcui.config import ClusterConfig
from hpcui.errors import UsageError
from hpcui.profiles import Profile
from hpcui.request.resources import Resources
from hpcui.schedulers.base import Scheduler
from hpcui.submission.submitter import plan, preview_script

#: an estimate this close to now is "now" (the scheduler's clock and ours drift a little)
NOW_S = 60


def wait_s(e: StartEstimate) -> float | None:
    """Seconds until the estimated start (None: no estimate); below NOW_S it starts now.
    The one reading both faces (`--estimate`, the Submit form) print."""
    return None if e.start is None else (e.start - datetime.now()).total_seconds()


#: partitions asked at most (one `sbatch --test-only` each, one round trip for all)
MAX_PARTITIONS = 4


def candidate_partitions(config: ClusterConfig, profile: Profile, req: Resources) -> list[str]:
    """The planned partition first, then the profile's others the plan accepts (the
    request's own partition alone when it names one); [""] for a profile without any."""
    first = plan(config, profile, req, "hpcui").partition or ""
    if req.partition or not profile.partitions:
        return [first]
    names = [first]
    for name in profile.partitions:
        if name in names or len(names) >= MAX_PARTITIONS:
            continue
        try:
            plan(config, profile, req.model_copy(update={"partition": name}), "hpcui")
        except UsageError:
            continue  # the request does not fit there (GPUs, limits): not a candidate
        names.append(name)
    return names


def estimate_start(
    config: ClusterConfig,
    profile: Profile,
    scheduler: Scheduler,
    *,
    python: str,
    setup: list[str],
    array_size: int | None = None,
    **resource_kwargs: Any,
) -> list[StartEstimate]:
    """One estimate per candidate partition, each from the script a submit would send
    there (one scheduler round trip for all)."""
    req = Resources.from_kwargs(**resource_kwargs)
    scripts = {}
    for name in candidate_partitions(config, profile, req):
        kwargs = {**resource_kwargs, "partition": name} if name else dict(resource_kwargs)
        scripts[name] = preview_script(
            config, profile, scheduler, python=python, setup=setup, array_size=array_size,
            **kwargs,
        ).script  # fmt: skip
    return scheduler.estimate_start(scripts)
