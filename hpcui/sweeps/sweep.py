"""A sweep: named configurations of one call, run as job arrays, resumable from any process.

An element's jobs are the registry records tagged with the sweep's name and the element's
key (written before sbatch runs); the newest decides the element's state. `resume()`
submits what has no result - failed, cancelled, out of memory, lost, never submitted -
and nothing that is queued, running or done, under the sweep's lock: two processes, or
the same sweep started twice, never run an element twice at once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import cloudpickle

from hpcui.backends.states import JobState
from hpcui.clusters.mapping import side_by_side_gpus
from hpcui.errors import HpcuiError, UsageError
from hpcui.jobs.job import Job, JobList
from hpcui.node.packed import Packed
from hpcui.request.resources import Resources
from hpcui.submission.arrays import packed_calls, packing
from hpcui.submission.pickling import by_value
from hpcui.submission.submitter import function_name
from hpcui.sweeps import space, store, table
from hpcui.sweeps.element import ElementState
from hpcui.sweeps.store import Element, SweepSpec

if TYPE_CHECKING:
    from hpcui.clusters.cluster import Cluster
    from hpcui.store.registry import JobRecord

log = logging.getLogger(__name__)

#: the registry meta keys of an element's job record (KEYS: a packed task's, in call order)
TAG, KEY, KEYS = "sweep", "sweep_key", "sweep_keys"
#: an element's record and its call's place in the task (None: the task is the element's)
Slot = tuple["JobRecord", int | None]


class Sweep:
    """A named sweep on one cluster (`hpcui.sweep`, `hpcui.get_sweep`)."""

    def __init__(self, cluster: Cluster, spec: SweepSpec) -> None:
        self.cluster = cluster
        self.spec = spec
        #: the job ids the last start or resume of this object submitted
        self.last_submitted: list[str] = []

    def __repr__(self) -> str:
        return f"Sweep({self.name!r} on {self.cluster.name}, {len(self.spec.elements)} elements)"

    def _ipython_display_(self) -> None:
        """In Jupyter, the results table updating itself until the sweep ends (hpcui.live)."""
        from hpcui.sweeps.notebook import show_sweep  # only where a notebook shows a sweep

        show_sweep(self)

    @property
    def name(self) -> str:
        return self.spec.name

    # -- where each element stands ---------------------------------------------------------

    def _records(self) -> dict[str, list[Slot]]:
        """Each element's records, oldest first, with its call's place in a packed task."""
        by_key: dict[str, list[Slot]] = {}
        for rec in self.cluster.registry.tagged(self.cluster.name, TAG, self.name):
            keys = rec.meta.get(KEYS)
            if isinstance(keys, list):  # a packed task: several elements, in call order
                for position, key in enumerate(keys):
                    by_key.setdefault(str(key), []).append((rec, position))
            else:
                by_key.setdefault(str(rec.meta.get(KEY)), []).append((rec, None))
        return by_key

    def elements(self, *, refresh: bool = True) -> list[ElementState]:
        """Every element's state; `refresh` asks the scheduler (one call) about the live ones."""
        records = self._records()
        if refresh:
            records = self._refreshed(records)
        out = []
        for el in self.spec.elements:
            slots = records.get(el.key, [])
            last, position = slots[-1] if slots else (None, None)
            state = None if last is None else self._state_of(last, position)
            job_id = last.job_id if last else None
            out.append(ElementState(el.key, el.config, state, job_id, len(slots), position))
        return out

    def _state_of(self, rec: JobRecord, position: int | None = None) -> JobState:
        status = self.cluster.status.get(rec.job_id) if rec.job_id else None
        state = status.state if status is not None else rec.state
        if position is None or state is not JobState.COMPLETED or not rec.job_id:
            return state
        try:  # a packed task completes when its calls ended, each as it did (read once, kept)
            kind, _ = self.cluster.get_job(rec.job_id).result(timeout=60)[position]
        except HpcuiError as exc:
            log.info("sweep %s: the outcome of %s not read: %s", self.name, rec.job_id, exc)
            return state
        return state if kind == "success" else JobState.FAILED

    def _refreshed(self, records: dict[str, list[Slot]]) -> dict[str, list[Slot]]:
        newest = [slots[-1][0] for slots in records.values()]
        if any(r.job_id is None and r.state is JobState.SUBMITTING for r in newest):
            try:  # a submit cut off (a killed client): its job is found by its token
                self.cluster.submitter.reconcile(force=True)
            except HpcuiError as exc:
                log.warning("sweep %s: cut-off submits not checked: %s", self.name, exc)
            records = self._records()
            newest = [slots[-1][0] for slots in records.values()]
        live = {r.job_id: r for r in newest if r.job_id and not r.state.is_final}
        for rec in live.values():
            self.cluster.status.track([rec.job_id or ""], rec.state)
        if live:
            self.cluster.status.poll_once()
        return records

    def counts(self) -> dict[str, int]:
        """How many elements are in each state ("NOT_SUBMITTED" for the never submitted)."""
        out: dict[str, int] = {}
        for e in self.elements():
            label = e.state.value if e.state else "NOT_SUBMITTED"
            out[label] = out.get(label, 0) + 1
        return out

    def jobs(self) -> list[Job | None]:
        """Each element's newest job, in the sweep's order (None: never submitted)."""
        return [
            self.cluster.get_job(e.job_id) if e.job_id else None
            for e in self.elements(refresh=False)
        ]

    # -- submitting ------------------------------------------------------------------------

    def resume(
        self,
        *,
        by_state: Mapping[str | JobState, Mapping[str, Any]] | None = None,
        **resources: Any,
    ) -> JobList:
        """Submit every element without a result and with nothing queued or running.

        Keywords change the resources of these submits (`mem="16G"`); `by_state` changes
        them only for elements that ended that way: `by_state={"OUT_OF_MEMORY": {"mem":
        "16G"}}`. Elements that need different resources go in different arrays."""
        with store.holding(self.cluster.name, self.name):
            return self._submit_needed(resources, by_state or {}, only_new=False)

    def _submit_needed(
        self,
        resources: Mapping[str, Any],
        by_state: Mapping[str | JobState, Mapping[str, Any]],
        *,
        only_new: bool,
    ) -> JobList:
        per_state = {JobState(k) if isinstance(k, str) else k: dict(v) for k, v in by_state.items()}
        groups: dict[str, tuple[dict[str, Any], list[ElementState]]] = {}
        for e in self.elements():
            if not (e.state is None if only_new else e.needs_run):
                continue
            changed = per_state.get(e.state, {}) if e.state else {}
            res = {**self.spec.resources, **resources, **changed}
            groups.setdefault(json.dumps(res, sort_keys=True), (res, []))[1].append(e)
        submitted = JobList()
        if groups:
            fn, base_args = store.load_call(self.cluster.name, self.name)
            for res, els in groups.values():
                submitted += self._submit(fn, base_args, res, els)
        self.last_submitted = [j.job_id for j in submitted]
        return submitted

    def _submit(
        self,
        fn: Callable[..., Any],
        base_args: list[Any],
        resources: dict[str, Any],
        els: Sequence[ElementState],
    ) -> JobList:
        req = Resources.from_kwargs(**{"name": self.name, "track_group": self.name, **resources})
        calls = [self._call(base_args, e) for e in els]
        per_task = self.spec.calls_per_task
        gpus = side_by_side_gpus(req.merged(self.cluster.config.defaults), self.spec.tasks_per_gpu)
        if per_task <= 1 and not gpus:
            meta: list[dict[str, Any]] = [{TAG: self.name, KEY: e.key} for e in els]
            return self.cluster.map_calls(fn, calls, req, meta)
        packs = [els[i : i + per_task] for i in range(0, len(els), per_task)]
        meta = [{TAG: self.name, KEYS: [e.key for e in pack]} for pack in packs]
        runner = Packed(fn, gpus=gpus, tasks_per_gpu=self.spec.tasks_per_gpu or 1)
        return self.cluster.map_calls(runner, packed_calls(calls, per_task), req, meta)

    def _call(self, base_args: list[Any], e: ElementState) -> tuple[tuple, dict]:
        if self.spec.mode == "script":  # run_script(source, name, argv)
            source, name, argv = base_args
            return (source, name, [*argv, *space.argv_of(e.config)]), {}
        if self.spec.mode == "keyed":
            *common, by_key = base_args
            return (*common, by_key[e.key]), {}
        return tuple(base_args), dict(e.config)

    def wait(self, timeout: float | None = None) -> dict[str, int]:
        """Until every submitted element ended (JobTimeoutError after `timeout` s)."""
        jobs = [j for j in self.jobs() if j is not None]
        if jobs:
            self.cluster.status.wait([j.job_id for j in jobs], timeout=timeout)
            for job in jobs:
                job.wait(timeout=0)  # raises, with the state, when one has not ended
        return self.counts()

    def cancel(self) -> list[str]:
        """Cancel every queued or running element; returns their job ids."""
        live = list(dict.fromkeys(  # a packed task holds several elements: cancelled once
            e.job_id for e in self.elements() if e.job_id and e.state and not e.state.is_final
        ))  # fmt: skip
        if live:
            self.cluster.control.cancel(live)
        return [j for j in live if j]

    # -- results ---------------------------------------------------------------------------

    def results(self, *, metrics: bool = True) -> list[dict[str, Any]]:
        """The table: one row per element (hpcui.sweeps.table)."""
        return table.rows(self.cluster, self.name, self.elements(), metrics=metrics)

    def dataframe(self, *, metrics: bool = True) -> Any:
        """results() as a pandas DataFrame (pandas is not a dependency of hpcui)."""
        try:
            import pandas as pd  # optional: only this method needs it
        except ImportError:
            raise UsageError("dataframe() needs pandas: pip install pandas "
                             "(results() gives the same table as dicts).") from None  # fmt: skip
        return pd.DataFrame(self.results(metrics=metrics))


def start(
    cluster: Cluster,
    fn: Callable[..., Any],
    *,
    name: str,
    grid: Mapping[str, Any] | None = None,
    configs: Sequence[Mapping[str, Any]] | None = None,
    random: Mapping[str, Any] | None = None,
    seed: int | None = None,
    args: Sequence[Any] = (),
    mode: Literal["call", "script", "keyed"] = "call",
    calls_per_task: int | None = None,
    call_s: float | None = None,
    tasks_per_gpu: int | None = None,
    **resources: Any,
) -> Sweep:
    """Make (or extend) the sweep `name` and submit its elements that were never submitted.

    The same name again with the same configurations submits nothing; new configurations
    are added and submitted; a failed element waits for `resume()`."""
    if not callable(fn):
        raise UsageError(f"sweep() needs a callable, got {type(fn).__name__}.")
    store.check_name(name)
    found = space.expand(grid=grid, configs=configs, random=random, seed=seed)
    Resources.from_kwargs(**resources)  # a bad keyword fails before anything is written
    _json_resources(resources)
    with store.holding(cluster.name, name) as where:
        old = store.load(cluster.name, name)
        function = function_name(fn)
        if old is not None and old.function != function:
            raise UsageError(
                f"The sweep {name!r} on {cluster.name} runs {old.function or 'another call'}, "
                f"not {function or 'this call'}: give this one another name, or resume that "
                f"one (hpcui.get_sweep({cluster.name!r}, {name!r}).resume())."
            )
        known = {e.key for e in old.elements} if old else set()
        elements = (old.elements if old else []) + [
            Element(key=k, config=c) for k, c in found if k not in known
        ]
        kept = resources or (old.resources if old else {})
        per_gpu = (
            tasks_per_gpu if tasks_per_gpu is not None else (old.tasks_per_gpu if old else None)
        )
        gpus = side_by_side_gpus(Resources.from_kwargs(**kept).merged(cluster.config.defaults),
                                 per_gpu)  # fmt: skip
        if calls_per_task is not None or call_s is not None:
            per_task = packing(len(elements), calls_per_task, call_s)
        elif tasks_per_gpu is not None:
            per_task = gpus * tasks_per_gpu  # one round per task, as map does
        else:
            per_task = old.calls_per_task if old else 1
        spec = SweepSpec(name=name, cluster=cluster.name, function=function, mode=mode,
                         elements=elements, resources=kept, calls_per_task=per_task,
                         tasks_per_gpu=per_gpu)  # fmt: skip
        with by_value(fn):
            call = cloudpickle.dumps((fn, list(args)))
        store.save(where, spec, call)
        sweep = Sweep(cluster, spec)
        sweep._submit_needed({}, {}, only_new=True)
    return sweep


def get(cluster: Cluster, name: str) -> Sweep:
    spec = store.load(cluster.name, name)
    if spec is None:
        kept = ", ".join(n for c, n in store.names(cluster.name)) or "none"
        raise UsageError(
            f"No sweep {name!r} of cluster {cluster.name} on this machine (kept here: {kept}). "
            "`hpcui sweep list` shows them."
        )
    return Sweep(cluster, spec)


def _json_resources(resources: Mapping[str, Any]) -> None:
    try:
        json.dumps(dict(resources))
    except TypeError as exc:
        raise UsageError(
            f"A sweep keeps its resources to resume with, as JSON: {exc}. Give them as "
            "text or numbers (mem='8G', time='1h')."
        ) from None
