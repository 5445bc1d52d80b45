"""Right-sizing from history: what a function's past runs used against what a request asks.

A request far above what the same function used (64G asked, 5G used) waits longer in the
queue, blocks backfill and burns the allocation; users size by guesswork because nobody
shows them the figures. Past runs are the registry's records of the same callable
(`meta.function`, written at submit) on this cluster, the newest MAX_RUNS with a job id;
what they used is one accounting call (sacct / qstat -x) for all of them: peak RSS
(MaxRSS of the largest task), elapsed time, and the GPUs that were busy where hpcui kept
usage looks of the run (`hpcui usage`, the app's Usage tab). Only runs that COMPLETED
count; a run that ran OUT_OF_MEMORY keeps the memory advice back. hpcui never changes a
request by itself: it says what it found and what would do (`suggestion`, Resources'
keywords), on submit (a `ResourceAdvice` warning, the CLI's `advice:` lines) and on demand
(`Cluster.right_size`, `hpcui submit --estimate`).
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import Field

from hpcui.backends.batch import format_mem
from hpcui.backends.model import Model
from hpcui.backends.states import JobState
from hpcui.common.formatting import hms, size
from hpcui.errors import HpcuiError, ResourceAdvice
from hpcui.jobs.usage import summary
from hpcui.submission.submitter import function_name

if TYPE_CHECKING:
    from hpcui.jobs.usage import UsageSample
    from hpcui.request.allocation import Allocation
    from hpcui.sitestate.jobs import HistoryJob
    from hpcui.store.registry import Registry

log = logging.getLogger(__name__)

#: past runs looked at (the newest), and how many completed ones a suggestion needs
MAX_RUNS, MIN_RUNS = 20, 3
#: memory: the suggestion is the p95 peak per node times this, plus MEM_SPARE_MB
MEM_HEADROOM, MEM_SPARE_MB = 1.25, 256
#: a request is "far above" when at least this many times the suggestion and this much more
MEM_FAR_FACTOR, MEM_FAR_MB = 2.0, 1024
TIME_HEADROOM, TIME_SPARE_S, TIME_STEP_S = 1.5, 600, 900
TIME_FAR_FACTOR, TIME_FAR_S = 4.0, 3600
#: what runs a script (`hpcui run script.py`): its runs are told apart by their job name
SCRIPT_RUNNER = "hpcui.node.runscript.run_script"
#: a GPU whose mean utilisation over a run's looks reached this (%) was busy
BUSY_GPU_PCT = 5.0


class PastUse(Model):
    """What the past runs of one function used, and what would do now."""

    function: str
    #: completed runs with figures; `looked_at`: all past runs asked about
    runs: int
    looked_at: int
    out_of_memory: int = 0
    max_rss_p95: int | None = None  # bytes, the largest task's peak
    max_rss_max: int | None = None
    elapsed_p95_s: int | None = None
    elapsed_max_s: int | None = None
    #: runs with kept GPU looks, and the most GPUs busy in any of them
    gpu_runs: int = 0
    gpus_busy_max: int | None = None
    #: Resources' keywords that would do (mem="1G", time="0:30:00", gpus=1)
    suggestion: dict[str, Any] = Field(default_factory=dict)
    #: one sentence per request far above its use ("asked 8G, used at most 300.0M in 5 runs")
    far_above: list[str] = Field(default_factory=list)


def p95(values: Sequence[float]) -> float:
    """The nearest-rank 95th percentile: with few runs, the largest but the odd outlier."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def round_mem_mb(mb: float) -> int:
    """Up to 256M steps below 2G, whole gigabytes above: a request people would write."""
    step = 256 if mb < 2048 else 1024
    return int(math.ceil(mb / step) * step)


class RightSizer:
    """One cluster's looks at past runs (`Cluster.right_size`, and each submit's check).

    The registry is read on every look (local); the accounting is asked only when the
    function has MIN_RUNS past runs, and its answer is kept KEEP_S while no new run was
    added: a loop of submits costs one round trip, not one each."""

    KEEP_S = 300.0

    def __init__(
        self,
        cluster: str,
        registry: Registry,
        history: Callable[[list[str]], list[HistoryJob]],
        kept_usage: Callable[[str], list[UsageSample]],
    ) -> None:
        self.cluster, self.registry = cluster, registry
        self.history, self.kept_usage = history, kept_usage  # sacct/qstat -x; usage looks
        self._kept: dict[str, tuple[tuple[str, ...], float, list[HistoryJob]]] = {}

    def look(self, fn: Callable[..., Any] | str, alloc: Allocation) -> PastUse | None:
        """The past runs of `fn` (a callable, or its `module.qualname`) against `alloc`;
        None when there were fewer than MIN_RUNS or the accounting cannot say (a request
        is never blocked by it). A script's runs are those of the same job name."""
        function = fn if isinstance(fn, str) else function_name(fn)
        if not function:
            return None
        records = [
            r
            for r in self.registry.tagged(self.cluster, "function", function)
            if r.job_id and (function != SCRIPT_RUNNER or r.name == alloc.name)
        ][-MAX_RUNS:]
        if len(records) < MIN_RUNS:
            return None
        ids = tuple(r.job_id or "" for r in records)
        if function == SCRIPT_RUNNER:
            function = f"{alloc.name} (a script)"
        kept = self._kept.get(function)
        if kept is not None and kept[0] == ids and time.monotonic() - kept[1] < self.KEEP_S:
            history = kept[2]
        else:
            try:
                history = self.history(list(ids))
            except HpcuiError as exc:  # accounting off or not answering: no advice
                log.debug("no right-sizing for %s: %s", function, exc)
                return None
            self._kept[function] = (ids, time.monotonic(), history)
        return judge(function, history, alloc, self.kept_usage)


def judge(
    function: str,
    history: list[HistoryJob],
    alloc: Allocation,
    kept_usage: Callable[[str], list[UsageSample]] = lambda _job_id: [],
) -> PastUse | None:
    """What the runs in `history` used, and what would do for `alloc`."""
    done = [h for h in history if h.state is JobState.COMPLETED]
    if len(done) < MIN_RUNS:
        return None
    use = PastUse(
        function=function,
        runs=len(done),
        looked_at=len(history),
        out_of_memory=sum(1 for h in history if h.state is JobState.OUT_OF_MEMORY),
    )
    rss = [h.max_rss_bytes for h in done if h.max_rss_bytes is not None]
    if len(rss) >= MIN_RUNS:
        use.max_rss_p95, use.max_rss_max = int(p95(rss)), max(rss)
    elapsed = [h.elapsed_s for h in done if h.elapsed_s is not None]
    if len(elapsed) >= MIN_RUNS:
        use.elapsed_p95_s, use.elapsed_max_s = int(p95(elapsed)), max(elapsed)
    _gpus(kept_usage, [h.job_id for h in done], use)
    _advise(use, alloc)
    return use


def _gpus(kept_usage: Callable[[str], list[UsageSample]], job_ids: list[str], use: PastUse) -> None:
    busy: list[int] = []
    for jid in job_ids:
        gpus = summary(kept_usage(jid))
        if gpus:
            busy.append(sum(1 for g in gpus if (g.mean_util_pct or 0) >= BUSY_GPU_PCT))
    if busy:
        use.gpu_runs, use.gpus_busy_max = len(busy), max(busy)


def _advise(use: PastUse, alloc: Allocation) -> None:
    n = use.runs
    if use.max_rss_p95 is not None and not use.out_of_memory:
        need_mb = use.max_rss_p95 / 2**20 * alloc.tasks_per_node  # every task of a node
        mb = round_mem_mb(need_mb * MEM_HEADROOM + MEM_SPARE_MB)
        use.suggestion["mem"] = format_mem(mb)
        asked = alloc.mem_mb
        if asked and asked >= MEM_FAR_FACTOR * mb and asked - mb >= MEM_FAR_MB:
            use.far_above.append(
                f"asked mem={format_mem(asked)}, used at most {size(use.max_rss_max)} in {n} "
                f"runs (p95 {size(use.max_rss_p95)} per task): mem={format_mem(mb)!r} would do"
            )
    if use.elapsed_p95_s is not None:
        s = use.elapsed_p95_s * TIME_HEADROOM + TIME_SPARE_S
        limit = int(math.ceil(s / TIME_STEP_S) * TIME_STEP_S)
        use.suggestion["time"] = hms(limit, pad_hours=False)
        asked_s = alloc.time_s
        if asked_s and asked_s >= TIME_FAR_FACTOR * limit and asked_s - limit >= TIME_FAR_S:
            use.far_above.append(
                f"asked time={hms(asked_s, pad_hours=False)}, ran at most "
                f"{hms(use.elapsed_max_s or 0, pad_hours=False)} in {n} runs: "
                f"time={hms(limit, pad_hours=False)!r} would do (a shorter limit starts sooner)"
            )
    asked_gpus = alloc.gpus_per_node * alloc.nodes
    if use.gpus_busy_max is not None and asked_gpus:
        busy = max(use.gpus_busy_max, 1)
        use.suggestion["gpus"] = busy
        if busy < asked_gpus:
            use.far_above.append(
                f"asked gpus={asked_gpus}, at most {use.gpus_busy_max} were busy in the "
                f"{use.gpu_runs} runs hpcui looked at (hpcui usage): gpus={busy} would do, "
                "or distribute the model (DDP/FSDP)"
            )


def say_on_submit(sizer: RightSizer, fn: Callable[..., Any], alloc: Allocation) -> None:
    """A ResourceAdvice warning when the request is far above what `fn` used before."""
    try:
        use = sizer.look(fn, alloc)
    except HpcuiError as exc:  # the registry locked, say: the submit goes on without it
        log.debug("no right-sizing: %s", exc)
        return
    if use is not None and use.far_above:
        warnings.warn(message(use), ResourceAdvice, stacklevel=4)


def message(use: PastUse) -> str:
    """The warning's text: what was found, what would do; never a change by itself."""
    return (
        f"{use.function}: " + "; ".join(use.far_above)
        + ". hpcui submitted what you asked; hpcui.connect(...).right_size(fn) has the figures."
    )  # fmt: skip
