"""Site state: the user's queue and history, partitions, quota and modules.

What a researcher checks on a login node ten times a day (squeue, sacct, sinfo,
bsc_quota, module list), typed and cheap to poll. ``Cluster`` exposes it
(``queue()``, ``history()``, ``partitions()``, ``quota()``, ``modules()``,
``module_search()``, ``queue_watcher``); this package holds the pieces, and
``parse_quota`` is the public quota parser (it recognises the tool from its output).
"""

from hpcui.backends.modules import Module, ModuleState, ModuleSystem, listed, module_label
from hpcui.backends.quota import QuotaEntry, QuotaParseError, parse_quota
from hpcui.backends.records import PartitionInfo
from hpcui.sitestate.budget import Budget, BudgetExceeded, LedgerLine
from hpcui.sitestate.footprint import OwnUsage, fetch_own_usage
from hpcui.sitestate.jobs import HistoryJob, QueueJob, efficiency_line, since_arg, token_of
from hpcui.sitestate.modules import (
    ModuleError,
    detect_system,
    fetch_modules,
    missing_modules,
    search_modules,
    setup_modules,
)
from hpcui.sitestate.quota import QuotaError, QuotaReport, QuotaTry, fetch_quota
from hpcui.sitestate.standing import (
    AllocationReport,
    FreeReport,
    Standing,
    fetch_allocation,
)
from hpcui.sitestate.watcher import QueueSnapshot, QueueWatcher, Subscription, is_rate_limited

__all__ = [
    "AllocationReport",
    "Budget",
    "BudgetExceeded",
    "FreeReport",
    "HistoryJob",
    "LedgerLine",
    "Module",
    "ModuleError",
    "ModuleState",
    "ModuleSystem",
    "OwnUsage",
    "PartitionInfo",
    "QueueJob",
    "QueueSnapshot",
    "QueueWatcher",
    "QuotaEntry",
    "QuotaError",
    "QuotaParseError",
    "QuotaReport",
    "QuotaTry",
    "Standing",
    "Subscription",
    "detect_system",
    "efficiency_line",
    "fetch_allocation",
    "fetch_modules",
    "fetch_own_usage",
    "fetch_quota",
    "is_rate_limited",
    "listed",
    "missing_modules",
    "module_label",
    "parse_quota",
    "search_modules",
    "setup_modules",
    "since_arg",
    "token_of",
]
