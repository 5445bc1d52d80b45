"""The allocation's ledger - spent, in flight, committed, left - and the check that refuses
a sweep, chain or array before it queues when it would cost more than is left.

Where the figures come from (docs/budget.md): Slurm's own association limits,
`GrpTRESMins` on the user's account or any account above it, are what Slurm enforces, so
they are the ledger: *spent* is the association's `GrpTRESRaw` (the usage Slurm checks the
limit against: decayed where the site sets a PriorityDecayHalfLife), *in flight* its
`TRESRunMins` (what its running jobs will still use if they run to their limit), and
*committed* what the user's pending jobs would use at their limits (the queue; Slurm
counts those only once they start, and then holds them back as AssocGrp*Minutes). Left is
the limit less the three. A site that sets no such limit keeps its allocations in its own
tool (the profile's `allocation_command`): those are shown as the tool prints them.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ConfigDict, Field, computed_field

from hpcui.backends.model import Model
from hpcui.backends.records import AllocationEntry
from hpcui.backends.slurm.ledger import Association, LedgerAnswer, QueuedJob
from hpcui.errors import UsageError
from hpcui.profiles import Profile
from hpcui.request.billing import units_per_hour
from hpcui.request.cost import UNITS, Cost

#: a site whose ledger had no limit is asked again after this long, not on every array
NO_LIMIT_RECHECK_S = 600.0

#: TRES the ledger shows where no limit is set (the rest only when limited)
SHOWN = ("cpu", "gres/gpu")


class LedgerLine(Model):
    """One limit (or, where none is set, one figure) of one association, in hours."""

    model_config = ConfigDict(frozen=True)

    account: str
    user: str = Field("", description="'' for the account's own limit, shared by its users")
    tres: str
    unit: str
    limit: float | None = Field(None, description="GrpTRESMins in hours; None: no limit")
    spent: float
    in_flight: float
    committed: float
    #: the accounts whose jobs this line counts (itself and the accounts under it)
    covers: list[str] = Field(default_factory=list)
    #: "cpu"/"gpu": it counts only jobs without/with GPUs (a site tool's per-kind grant)
    kind: str | None = None
    source: str = Field("slurm", description="'slurm' (sshare) or the site tool's name")

    @computed_field
    @property
    def left(self) -> float | None:
        if self.limit is None:
            return None
        return self.limit - self.spent - self.in_flight - self.committed


class Budget(Model):
    source: str = Field(description="where the figures come from")
    lines: list[LedgerLine] = Field(default_factory=list)
    default_account: str | None = None
    pending_jobs: int = 0
    running_jobs: int = 0
    note: str = ""

    def binding(self, account: str | None, kind: str | None = None) -> list[LedgerLine]:
        """The limits a job charged to `account` (None: the user's default) counts against;
        `kind` ("cpu"/"gpu"): only the lines of that kind, and those of every kind."""
        acct = account or self.default_account
        return [
            ln for ln in self.lines
            if ln.limit is not None and acct in ln.covers
            and (kind is None or ln.kind is None or ln.kind == kind)
        ]  # fmt: skip

    def binding_of(self, cost: Cost) -> list[LedgerLine]:
        """The limits `cost` counts against: its account's, of its kind (GPU or CPU)."""
        return self.binding(cost.account, "gpu" if cost.hours.get("gres/gpu") else "cpu")


def budget_of(answer: LedgerAnswer) -> Budget:
    """The ledger lines of sshare's and squeue's answer."""
    rows = answer.associations
    covers = _covers(rows)
    pending = [j for j in answer.jobs if j.pending]
    lines: list[LedgerLine] = []
    bound = {a for i, r in enumerate(rows) if any(t in UNITS for t in r.limits) for a in covers[i]}
    for i, row in enumerate(rows):
        limited = [t for t in row.limits if t in UNITS]
        # where no limit binds, the user's own figures (sshare shows the caller's rows)
        mine = row.user != "" and row.account not in bound
        tres_list = limited or ([t for t in SHOWN if _shows(row, t)] if mine else [])
        for tres in tres_list:
            lines.append(_line(row, tres, covers[i], pending))
    running = sum(1 for j in answer.jobs if not j.pending)
    note = ""
    if rows and not any(ln.limit is not None for ln in lines):
        note = (
            "Slurm holds no limit (GrpTRESMins) on your accounts here: what a site grants "
            "is then kept in its own tool (the profile's allocation_command)."
        )
    return Budget(
        source="sshare (Slurm's association limits) and squeue", lines=lines,
        default_account=answer.default_account, pending_jobs=len(pending),
        running_jobs=running, note=note,
    )  # fmt: skip


def _shows(row: Association, tres: str) -> bool:
    return tres == "cpu" or bool(row.used.get(tres) or row.running.get(tres))


def _covers(rows: Sequence[Association]) -> list[list[str]]:
    """Each row's accounts: a user's association counts its account; an account's row
    counts itself and every account below it."""
    out: list[list[str]] = [[r.account] for r in rows]
    for row in rows:
        if row.user:
            continue
        for parent in row.parents:
            if not rows[parent].user and row.account not in out[parent]:
                out[parent].append(row.account)
    return out


def _line(row: Association, tres: str, covers: list[str], pending: list[QueuedJob]) -> LedgerLine:
    counted = [j for j in pending if j.account in covers]
    committed = sum(j.tres.get(tres, 0.0) * (j.limit_min or 0.0) for j in counted)
    limit = row.limits.get(tres)
    return LedgerLine(
        account=row.account, user=row.user, tres=tres, unit=UNITS.get(tres, f"{tres}-h"),
        limit=None if limit is None else limit / 60, spent=row.used.get(tres, 0.0) / 60,
        in_flight=row.running.get(tres, 0.0) / 60, committed=committed / 60, covers=covers,
    )  # fmt: skip


class BudgetExceeded(UsageError):
    """A submission would cost more than its account has left (times budget_guard)."""


def tool_lines(
    tool: str, entries: Sequence[AllocationEntry], jobs: Sequence[QueuedJob], profile: Profile
) -> list[LedgerLine]:
    """The site tool's grants (lumi-allocations: per project, CPU and GPU hours in its
    units) as ledger lines. Such tools count finished jobs only (as CINECA's saldo), so a
    running job is in flight for its whole limit and a pending one committed for it, each
    billed by the profile's rule for its partition (Slurm's billing TRES where the profile
    has none)."""
    out = []
    for e in entries:
        if e.resource not in ("cpu", "gpu"):
            continue  # storage TB-hours: no job's request says what it will write
        mine = [j for j in jobs if j.account == e.project and _job_kind(j) == e.resource]
        hours = {id(j): _units_per_hour(profile, j) * (j.limit_min or 0.0) / 60 for j in mine}
        out.append(
            LedgerLine(
                account=e.project,
                tres="billing",
                unit=e.unit,
                limit=e.allocated,
                spent=e.used,
                in_flight=sum(hours[id(j)] for j in mine if not j.pending),
                committed=sum(hours[id(j)] for j in mine if j.pending),
                covers=[e.project],
                kind=e.resource,
                source=tool,
            )
        )
    return out


def _job_kind(job: QueuedJob) -> str:
    return "gpu" if job.tres.get("gres/gpu") else "cpu"


def _units_per_hour(profile: Profile, job: QueuedJob) -> float:
    part = profile.partition(job.partition)
    if part is None or part.billing is None:
        return job.tres.get("billing", 0.0)
    nodes = max(int(job.tres.get("node", 1)), 1)
    mem = job.tres.get("mem")
    return units_per_hour(
        part.billing, nodes, int(job.tres.get("cpu", 0)) // nodes,
        int(mem / nodes) if mem else None, int(job.tres.get("gres/gpu", 0)) // nodes,
    )  # fmt: skip


def check(cost: Cost, budget: Budget, guard: float) -> None:
    """Refuse `cost` where it exceeds `guard` times what any binding limit has left."""
    for line in budget.binding_of(cost):
        need = cost.hours.get(line.tres, 0.0)
        left = max(line.left or 0.0, 0.0)
        if need <= 0 or need <= guard * left:
            continue
        whose = (
            f"{line.user}'s share of account {line.account}"
            if line.user
            else (f"account {line.account}")
        )
        allowed = "" if guard == 1 else f" (budget_guard {guard:g}: at most {guard * left:,.1f})"
        raise BudgetExceeded(
            f"Not submitted: {cost.what} would cost up to {need:,.1f} {line.unit} "
            f"({cost.jobs} x {cost.each}), and {whose} has {left:,.1f} {line.unit} left"
            f"{allowed}: limit {line.limit:,.1f}, spent {line.spent:,.1f}, in flight "
            f"{line.in_flight:,.1f} (running jobs, to their limits), committed "
            f"{line.committed:,.1f} (your pending jobs). Nothing was queued. Ask for less "
            "(a shorter time=, fewer configurations or calls), charge another account=, "
            "or set budget_guard in the cluster's config (0 turns the check off); "
            "`hpcui budget` shows the ledger."
        )


def cost_lines(cost: Cost | None, budget: Budget | None) -> list[str]:
    """What the Submit form and `--estimate` say: the cost, and each binding limit's left."""
    if cost is None:
        return ["cost: unknown (no time= and no partition limit in the profile)"]
    shown = ["gres/gpu", "cpu"] if "gres/gpu" in cost.hours else ["cpu"]
    if cost.hours.get("billing") != cost.hours.get("cpu"):
        shown.append("billing")  # the profile's billing rule differs from one per CPU
    figures = ", ".join(f"{cost.hours[t]:,.1f} {UNITS[t]}" for t in shown if t in cost.hours)
    lines = [f"cost: at most {figures} ({cost.jobs} x {cost.each})"]
    if budget is None:
        return lines
    binding = budget.binding_of(cost)
    for line in binding:
        whose = f"{line.user} in {line.account}" if line.user else line.account
        lines.append(
            f"{whose}: {line.left or 0:,.1f} {line.unit} left of {line.limit:,.1f} (spent "
            f"{line.spent:,.1f}, in flight {line.in_flight:,.1f}, committed "
            f"{line.committed:,.1f}); this takes {cost.hours.get(line.tres, 0.0):,.1f}"
        )
    if not binding:
        acct = cost.account or budget.default_account or "your default account"
        lines.append(f"{acct}: no limit in Slurm's ledger (`hpcui budget`)")
    return lines
