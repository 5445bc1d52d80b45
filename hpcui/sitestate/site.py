"""One site's state as the user checks it: the queue (one shared poll), history, free
capacity, standing, quota and modules, each one or two round trips. Handed the transport,
scheduler, registry and profile by `Cluster`, which offers it as `cluster.site`."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import cached_property

from hpcui.backends.allocations import ALLOCATION_PARSERS
from hpcui.backends.modules import Module, ModuleState, ModuleSystem
from hpcui.backends.records import PartitionInfo
from hpcui.config import ClusterConfig
from hpcui.errors import HpcuiError, SchedulerError
from hpcui.profiles import Profile
from hpcui.request.cost import Cost
from hpcui.schedulers.base import Scheduler
from hpcui.sitestate.budget import NO_LIMIT_RECHECK_S, Budget, budget_of, check, tool_lines
from hpcui.sitestate.footprint import fetch_own_usage
from hpcui.sitestate.jobs import HistoryJob, QueueJob, since_arg
from hpcui.sitestate.modules import (
    detect_system,
    fetch_modules,
    missing_modules,
    search_modules,
    setup_modules,
)
from hpcui.sitestate.quota import QuotaEntry, QuotaReport, fetch_quota
from hpcui.sitestate.standing import AllocationReport, FreeReport, Standing, fetch_allocation
from hpcui.sitestate.watcher import QueueWatcher
from hpcui.store.registry import JobRecord, Registry
from hpcui.store.remote import base_word
from hpcui.transport.base import Transport


class SiteView:
    """`before_listing` runs before the scheduler is asked for the user's jobs (Cluster:
    finish cut-off submissions, so that they are listed as jobs)."""

    def __init__(
        self,
        *,
        name: str,
        config: ClusterConfig,
        profile: Profile,
        transport: Transport,
        scheduler: Scheduler,
        registry: Registry,
        setup: Callable[[], Sequence[str]],
        before_listing: Callable[[], None],
    ) -> None:
        self.name = name
        self._setup = setup  # read when asked: the cluster's config may change meanwhile
        self.config = config
        self.profile = profile
        self.transport = transport
        self.scheduler = scheduler
        self.registry = registry
        self._before_listing = before_listing
        #: account ('' the default) -> when the ledger last showed no limit binding it
        self._unbound_at: dict[str, float] = {}
        #: whether the scheduler's own history marked hpcui's jobs (their comment or
        #: variables) in the last `history` call: False when none of its rows carried a
        #: mark (slurmdbd keeps comments only with AccountingStoreFlags=job_comment), and
        #: hpcui's jobs there are known only from this machine's registry; None: no rows
        self.marks_kept: bool | None = None

    # -- the queue: ONE poll of this cluster, screens subscribe to it -----------------------

    @cached_property
    def queue_watcher(self) -> QueueWatcher:
        """The ONE queue poll of this cluster: screens subscribe to it instead of polling."""
        return QueueWatcher(self._fetch_queue, name=self.name)

    def _fetch_queue(self) -> list[QueueJob]:
        self._before_listing()
        return self.scheduler.queue(into=QueueJob)

    def poke_queue(self) -> None:
        """After a submit or cancel: watchers refresh fast again (only if one exists)."""
        if "queue_watcher" in self.__dict__:
            self.queue_watcher.poke()

    def close(self) -> None:
        if "queue_watcher" in self.__dict__:
            self.queue_watcher.close()

    def queue(
        self, *, include_finished: bool = False, max_age_s: float = 0.0, all_users: bool = False
    ) -> list[QueueJob]:
        """All of the user's jobs (hpcui's have `token`), estimated start for pending ones.
        `max_age_s` > 0 accepts the watcher's last snapshot when it is that recent (no call).
        `all_users`: every user's jobs, as squeue shows the partitions (asked apart from the
        shared poll, which stays the user's own)."""
        if all_users:
            jobs = self.scheduler.everyones_queue(into=QueueJob)
            return jobs if include_finished else [j for j in jobs if not j.state.is_final]
        snap = self.queue_watcher.refresh(max_age_s=max_age_s)
        if snap.error is not None:
            exc = self.queue_watcher.last_exception
            if isinstance(exc, HpcuiError):
                raise exc
            raise SchedulerError(
                f"Listing the queue on {self.name} failed: {snap.error}. Retry in a minute."
            )
        return list(snap.jobs) if include_finished else snap.active

    # -- history ----------------------------------------------------------------------------

    def history(
        self,
        since: datetime | timedelta | str | None = timedelta(days=1),
        *,
        job_ids: list[str] | None = None,
    ) -> list[HistoryJob]:
        """Jobs since `since` with exit codes, elapsed, CPU time, max RSS, efficiency line."""
        self._before_listing()
        jobs = self.scheduler.history(since_arg(since), job_ids, into=HistoryJob)
        if job_ids is None:
            self.marks_kept = any(j.token for j in jobs) if jobs else None
        records: list[JobRecord] | None = None  # the registry, read once when needed
        if job_ids is None and isinstance(since, timedelta):
            records = self.registry.list(self.name, limit=1_000_000)
            jobs += self._own_jobs_missing(jobs, since, records)
        if any(j.token is None for j in jobs):
            # slurmdbd keeps comments only with AccountingStoreFlags=job_comment: ask the registry
            if records is None:
                records = self.registry.list(self.name, limit=1_000_000)
            known = {r.job_id: r.token for r in records}
            jobs = [
                j if j.token else j.model_copy(update={"token": known.get(j.job_id)}) for j in jobs
            ]
        return jobs

    def unmarked_note(self, jobs: list[HistoryJob]) -> str:
        """What to say above a history of hpcui's jobs when the accounting marks none of
        them ("" when it does): the others may be hpcui's too, submitted from elsewhere."""
        if self.marks_kept is not False:
            return ""
        unmarked = sum(1 for j in jobs if not j.hpcui)
        if not unmarked:
            return ""
        return (
            f"{self.name}'s accounting keeps no job comments (Slurm: AccountingStoreFlags="
            f"job_comment is not set), so hpcui knows its own jobs there only from this "
            f"machine's registry: {unmarked} ended job(s) may be hpcui's from another "
            "machine (--all lists every job)"
        )

    def _own_jobs_missing(
        self, jobs: list[HistoryJob], since: timedelta, records: list[JobRecord]
    ) -> list[HistoryJob]:
        """hpcui's jobs of the window that sacct's time-window query left out, asked by id
        (one more sacct, only when some are missing): slurmdbd 22.05 leaves a job out of
        `--starttime` queries for a few seconds after it ended, while `--jobs` finds it."""
        seen = {j.job_id for j in jobs} | {j.job_id.split("_")[0] for j in jobs}
        cutoff = time.time() - since.total_seconds()
        missing = [
            r.job_id
            for r in records
            if r.job_id and r.submitted_at >= cutoff and r.job_id.split("_")[0] not in seen
        ]
        if not missing or self.scheduler.accounting_off:  # history came from squeue
            return []
        found = self.scheduler.history(None, list(dict.fromkeys(missing)), into=HistoryJob)
        return [j for j in found if j.job_id not in seen]

    # -- capacity, standing, quota ----------------------------------------------------------

    def partitions(self) -> list[PartitionInfo]:
        return self.scheduler.partitions()

    def free(self) -> FreeReport:
        """Free CPUs and GPUs per partition now, and each node's state (one sinfo)."""
        return FreeReport.of(self.scheduler.nodes())

    def standing(self) -> Standing:
        """Fair share, pending jobs' priority factors (one round trip), the ledger of the
        user's accounts (a second) and the project's allocation from the site's tool where
        the profile names one (a third)."""
        shares, pending, note = self.scheduler.standing()
        tool = self.profile.allocation_command
        allocation = fetch_allocation(self.transport, tool) if tool else None
        ledger = self.budget(allocation) if self.scheduler.capabilities.budget else None
        return Standing(
            fair_share=shares, pending=pending, note=note, allocation=allocation, ledger=ledger
        )

    def budget(self, allocation: AllocationReport | None = None) -> Budget:
        """The ledger of the user's accounts: spent, in flight, committed, left (ONE round
        trip; a second for the site's allocation tool where hpcui reads it and no
        `allocation` is given; hpcui.sitestate.budget says where each figure comes from)."""
        answer = self.scheduler.ledger()
        if answer is None:
            return Budget(
                source="", note=(
                    f"a {self.scheduler.name} cluster keeps no allocation ledger hpcui can "
                    "read; the site's allocation tool (the profile's allocation_command) "
                    "is shown where it names one"
                ),
            )  # fmt: skip
        budget = budget_of(answer)
        tool = self.profile.allocation_command
        if tool not in ALLOCATION_PARSERS:
            return budget
        report = allocation or fetch_allocation(self.transport, tool)
        if report.error:
            note = f"{tool}: {report.error}"
            return budget.model_copy(update={"note": f"{budget.note} {note}".strip()})
        lines = tool_lines(tool, report.entries, answer.jobs, self.profile)
        return budget.model_copy(update={"lines": budget.lines + lines})

    def check_budget(self, cost: Cost, guard: float) -> None:
        """Refuse `cost` beyond `guard` x what is left (BudgetExceeded). An account that
        no limit binds is asked about again after NO_LIMIT_RECHECK_S, not on every array."""
        key = cost.account or ""
        seen = self._unbound_at.get(key)
        if seen is not None and time.monotonic() - seen < NO_LIMIT_RECHECK_S:
            return
        budget = self.budget()
        if budget.binding_of(cost):
            self._unbound_at.pop(key, None)
        else:
            self._unbound_at[key] = time.monotonic()
        check(cost, budget, guard)

    def quota_report(self) -> QuotaReport:
        """Quota with the tool that answered and the ones tried before it, and what hpcui's
        own folders take of it."""
        report = fetch_quota(self.transport, self.profile.quota_command, cluster=self.name)
        own = fetch_own_usage(self.transport, base_word(self.config.remote_base), report.entries)
        return report.model_copy(update={"own": own})

    def quota(self) -> list[QuotaEntry]:
        return self.quota_report().entries

    # -- modules ----------------------------------------------------------------------------

    @cached_property
    def module_system(self) -> ModuleSystem:
        """Lmod or Environment Modules: from the profile, else probed once."""
        return self.profile.module_system or detect_system(self.transport, cluster=self.name)

    def modules(self, *, with_setup: bool = False) -> ModuleState:
        """Loaded and available modules (defaults marked), one round trip; `with_setup`:
        "loaded" after this cluster's `setup` lines, as a job sees it."""
        setup = self._setup() if with_setup else ()
        return fetch_modules(self.transport, self.module_system, cluster=self.name, setup=setup)

    def missing_setup_modules(self) -> list[str]:
        """Modules the config's `setup` lines load that this site does not have."""
        setup = self._setup()
        if not setup_modules(setup):
            return []
        return missing_modules(setup, self.modules())

    def module_search(self, term: str) -> list[Module]:
        return search_modules(self.transport, self.module_system, term, cluster=self.name)
