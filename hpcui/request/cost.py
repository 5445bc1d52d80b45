"""What a submission may cost at most: each job's TRES for its whole time limit, times the
jobs (array tasks, chain links), in the units Slurm's ledger counts (core-hours, GPU-hours,
node-hours, billing-hours). No network: the plan (`Allocation`) has every number.

Billing: the profile's rule for the partition where it has one (`billed_per_hour`),
else one unit per CPU - Slurm's own default where a site sets no TRESBillingWeights.
"""

from __future__ import annotations

from pydantic import ConfigDict

from hpcui.backends.batch import format_duration
from hpcui.backends.model import Model
from hpcui.request.allocation import Allocation

#: TRES name -> the unit its hours are shown in
UNITS = {"cpu": "core-h", "gres/gpu": "GPU-h", "node": "node-h", "billing": "billing-h"}


class Cost(Model):
    """At most this many hours of each TRES, if every job ran to its time limit."""

    model_config = ConfigDict(frozen=True)

    what: str  # "12 array tasks", "a chain of 4 jobs"
    jobs: int
    account: str | None
    hours: dict[str, float]
    #: one job's request, as the refusal spells it ("2 CPUs, 1 GPU, 1:00:00")
    each: str


def job_tres(alloc: Allocation) -> dict[str, float]:
    """One job's TRES as Slurm counts them for its limits."""
    cpus = alloc.nodes * alloc.tasks_per_node * alloc.cpus_per_task
    billing = alloc.billed_per_hour if alloc.billed_per_hour is not None else float(cpus)
    tres = {"cpu": float(cpus), "node": float(alloc.nodes), "billing": billing}
    if alloc.gpus:
        tres["gres/gpu"] = float(alloc.gpus)
    return tres


def cost_of(alloc: Allocation, jobs: int, what: str, limit_s: int | None = None) -> Cost | None:
    """Without `time=` a job may run to its partition's or QoS's limit (`limit_s`, the
    profile's); None where that is unknown too: hpcui cannot say what it costs."""
    time_s = alloc.time_s or limit_s
    if not time_s:
        return None
    hours = time_s / 3600
    tres = job_tres(alloc)
    cpus = int(tres["cpu"])
    each = f"{cpus} CPU{'s' if cpus != 1 else ''}"
    if alloc.gpus:
        each += f", {alloc.gpus} GPU{'s' if alloc.gpus != 1 else ''}"
    each += f", {format_duration(time_s)}" + (
        "" if alloc.time_s else " = the limit: no time= given"
    )
    return Cost(
        what=what, jobs=jobs, account=alloc.account, each=each,
        hours={k: v * hours * jobs for k, v in tres.items()},
    )  # fmt: skip
