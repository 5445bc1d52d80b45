"""Cluster: one connected site = transport + scheduler + profile + registry + status.

Over 500 lines: the one object every face holds; each of its parts lives in its own module
(submission, jobs, sitestate, logs) and this class only wires them and names the API.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from functools import cached_property
from pathlib import Path
from typing import Any, Unpack

from hpcui.backends.records import StartEstimate
from hpcui.backends.states import JobState
from hpcui.clusters import mapping, sizing
from hpcui.clusters import parts as cluster_setup
from hpcui.clusters.face_support import FaceSupport
from hpcui.clusters.job_view import JobView, assemble
from hpcui.config import ClusterConfig
from hpcui.errors import HpcuiError, UsageError
from hpcui.jobs import cleanup as housekeeping
from hpcui.jobs import files as job_files
from hpcui.jobs import usage
from hpcui.jobs.chain import ChainJob, job_for, whole_chains
from hpcui.jobs.control import JobControl
from hpcui.jobs.finish import FinishWatch
from hpcui.jobs.handle import JobHandle
from hpcui.jobs.job import Job, JobList
from hpcui.jobs.other import OtherJob
from hpcui.jobs.packed import CallList
from hpcui.jobs.status import StatusService
from hpcui.logs import follow as _logs  # site state (queue, quota, modules, logs): block at the end
from hpcui.logs.progress import Finish
from hpcui.profiles import Profile
from hpcui.request.allocation import Allocation
from hpcui.request.cost import Cost, cost_of
from hpcui.request.resources import Resources
from hpcui.schedulers.base import Capabilities, Scheduler
from hpcui.sitestate.budget import BudgetExceeded
from hpcui.sitestate.site import SiteView
from hpcui.store import remote as remote_side
from hpcui.store.registry import JobRecord, Registry, shared_registry
from hpcui.submission.env_store import EnvStore
from hpcui.submission.estimate import estimate_start as submitter_estimate
from hpcui.submission.submitter import ScriptPreview, Submitted, Submitter
from hpcui.submission.submitter import plan as submitter_plan
from hpcui.submission.submitter import preview_script as submitter_preview
from hpcui.trackers.relay import Relay
from hpcui.transport.base import Command, CommandResult, Transport

log = logging.getLogger(__name__)


#: one call of an array: (args, kwargs)
Call = tuple[tuple[Any, ...], dict[str, Any]]


class Cluster:
    """Everything hpcui does on one site goes through here; faces never reach below."""

    def __init__(
        self,
        config: ClusterConfig,
        *,
        transport: Transport | None = None,
        scheduler: Scheduler | None = None,
        registry: Registry | None = None,
        prompt: Callable[..., list[str]] | None = None,
        on_unknown_host: Callable[[str, str, str], bool] | None = None,
    ) -> None:
        self.config = config
        self.name = config.name
        self._transport = transport
        if scheduler is not None:  # given (tests, a caller with its own): not made from the kind
            self.__dict__["scheduler"] = scheduler
        self._registry = registry
        self._prompt = prompt
        self._on_unknown_host = on_unknown_host
        self._auto_clean_thread: threading.Thread | None = None
        self._lock = threading.Lock()
        cluster_setup.silence_submitit()

    def __repr__(self) -> str:
        return f"Cluster({self.name!r}, {self.transport.description})"

    # -- parts -----------------------------------------------------------------------------

    @property
    def transport(self) -> Transport:
        if self._transport is None:
            self._transport = self._own_transport()
        return self._transport

    def _own_transport(self) -> Transport:
        """This process's own connection to the cluster (see cluster_setup.own_transport)."""
        return cluster_setup.own_transport(
            self.config, prompt=self._prompt, on_unknown_host=self._on_unknown_host
        )

    @cached_property
    def profile(self) -> Profile:
        return cluster_setup.profile_for(self.config, self._kind)

    @cached_property
    def _kind(self) -> str:
        return cluster_setup.scheduler_kind(self.config)

    @property
    def python(self) -> str:
        """The Python jobs run with (see cluster_setup.job_python)."""
        return cluster_setup.job_python(self.config, self.profile, self._kind)

    @property
    def setup(self) -> list[str]:
        """Shell lines run before Python: the cluster config's, else the profile's."""
        return cluster_setup.job_setup(self.config, self.profile)

    @cached_property
    def scheduler(self) -> Scheduler:
        return cluster_setup.make_scheduler(
            self._kind,
            self.config,
            self.profile,
            self.transport,
            lambda: f"{self.remote_info().base}/local",
        )

    @property
    def capabilities(self) -> Capabilities:
        """What this cluster's scheduler can do (queue, history, partitions, arrays)."""
        return self.scheduler.capabilities

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = shared_registry()
        return self._registry

    @property
    def _result_cache(self) -> Path:
        """Fetched results of this cluster's jobs, beside the registry (files 0600)."""
        return self.registry.path.parent / "results" / self.name

    @property
    def _log_spool(self) -> Path:
        """Followed logs kept on this machine, beside the registry (files 0600)."""
        return self.registry.path.parent / "logs" / self.name

    @cached_property
    def faces(self) -> FaceSupport:
        """What the app, the CLI and the agent need beyond the user's API (records,
        tracking, statuses, the prompt, the stall watch): hpcui.clusters.face_support."""
        return FaceSupport(
            self.name, status=lambda: self.status, registry=lambda: self.registry,
            transport=lambda: self.transport, own_transport=self._own_transport,
            submitter=lambda: self.submitter,
        )  # fmt: skip

    def clean(
        self, *, older_than: timedelta | None = None, dry_run: bool = False
    ) -> housekeeping.CleanReport:
        """Remove the remote folders of ended jobs whose results are fetched (or, with
        `older_than`, of every ended job submitted before then). See hpcui.jobs.cleanup."""
        return housekeeping.clean(
            self.name, self.registry, self.transport, self.scheduler,
            remote_base=self.remote_info().base, result_cache=self._result_cache,
            older_than=older_than, dry_run=dry_run,
        )  # fmt: skip

    @cached_property
    def environments(self) -> EnvStore:  # env= builds: list (size, inodes), show, rm, build
        return EnvStore(
            name=self.name, transport=self.transport, registry=self.registry,
            info=lambda: self.remote_info(), profile=self.profile, python=self.python,
            setup=self.setup,
        )  # fmt: skip

    def _auto_clean(self) -> None:
        """The config's `keep` policy (housekeeping.auto_clean): at most once a day."""
        stamp = self.registry.path.parent / "housekeeping" / f"{self.name}.last"
        cleaning = housekeeping.auto_clean(
            self.config.keep, stamp, lambda older: self.clean(older_than=older)
        )
        self._auto_clean_thread = cleaning or self._auto_clean_thread

    @cached_property
    def status(self) -> StatusService:
        return cluster_setup.status_service(
            self.name, self.scheduler, self.registry, self.transport, on_end=self._queue_changed
        )

    def run(self, cmd: Command, *, timeout: float | None = None) -> CommandResult:
        """Run a command on the login node (a list is quoted word by word)."""
        return self.transport.run(cmd, timeout=timeout)

    @cached_property
    def relay(self) -> Relay:
        """The tracker relay of this cluster's track= jobs (hpcui.trackers.relay): a submit
        with track= starts it in this process; `hpcui track run` from a terminal."""
        return Relay(self)

    def close(self) -> None:
        """Stop its threads and links; a later use makes new ones (connect() caches it)."""
        if "relay" in self.__dict__:
            self.__dict__.pop("relay").stop()
        if "status" in self.__dict__:
            self.__dict__.pop("status").close()
        if "site" in self.__dict__:
            self.__dict__.pop("site").close()
        if self._transport is not None:
            self._transport.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- submit (hpcui.submission.submitter) -----------------------------------------------------------

    @cached_property
    def submitter(self) -> Submitter:
        """This cluster's submissions, made with its parts when first needed."""
        return Submitter(
            name=self.name,
            config=self.config,
            profile=self.profile,
            python=self.python,
            setup=self.setup,
            transport=self.transport,
            scheduler=self.scheduler,
            registry=self.registry,
            track=self.status.track,
            on_submitted=self._submitted,
            missing_setup_modules=lambda: self.site.missing_setup_modules(),
        )

    def remote_info(
        self, *, local_version: tuple[int, int] | None = None
    ) -> remote_side.RemoteInfo:
        """Home, job base and Python of the cluster, probed once (see Submitter)."""
        return self.submitter.remote_info(local_version=local_version)

    def submit(
        self,
        fn: Callable[..., Any],
        *args: Any,
        kwargs: dict[str, Any] | None = None,
        resources: Resources | None = None,
        **resource_kwargs: Any,
    ) -> Job:
        """Run `fn(*args, **kwargs)` on the cluster. Keywords here are resources (gpus=4, ...);
        `chain=N` runs it as up to N jobs in a row past the site's limit (a `ChainJob`)."""
        req = resources or Resources.from_kwargs(**resource_kwargs)
        sizing.say_on_submit(self._sizer, fn, self.plan(req))
        if req.chain > 1:
            self._check_budget(req, req.chain, f"a chain of {req.chain} jobs")
        return self._jobs(self.submitter.submit(fn, [(args, dict(kwargs or {}))], req, False))[0]

    def map(self, fn: Callable[..., Any], *iterables: Iterable[Any],
            resources: Resources | None = None, calls_per_task: int | None = None,
            call_s: float | None = None, tasks_per_gpu: int | None = None,
            **resource_kwargs: Any) -> JobList | CallList:  # fmt: skip
        """`fn` over the zipped iterables as job arrays; `calls_per_task=K` or `call_s=`
        packs calls into tasks: a CallList (hpcui.clusters.mapping); `tasks_per_gpu=M`
        runs a task's calls M at a time on each of its GPUs (hpcui.node.packed)."""
        calls: list[Call] = [(tuple(items), {}) for items in zip(*iterables)]
        req = resources or Resources.from_kwargs(**resource_kwargs)
        sizing.say_on_submit(self._sizer, fn, self.plan(req))
        return mapping.submit_map(
            self._to_map, fn, calls, req, calls_per_task, call_s, tasks_per_gpu
        )

    def map_calls(self, fn: Callable[..., Any], calls: list[Call], resources: Resources,
                  call_meta: list[dict[str, Any]] | None = None) -> JobList:  # fmt: skip
        """A task per call; call i's record carries `call_meta[i]` (hpcui.sweeps' keys)."""
        sizing.say_on_submit(self._sizer, fn, self.plan(resources))
        return mapping.submit_calls(self._to_map, fn, calls, resources, call_meta)

    @property
    def _to_map(self) -> mapping.MapTarget:
        return mapping.MapTarget(
            self.submitter, self.config.defaults, self._jobs, self._check_budget
        )

    def cost(self, jobs: int = 1, resources: Resources | None = None,
             **resource_kwargs: Any) -> Cost | None:  # fmt: skip
        """What `jobs` jobs (array tasks, chain links) of this request cost at most, in
        the ledger's units; None where neither `time=` nor the profile says the limit."""
        req = resources or Resources.from_kwargs(**resource_kwargs)
        alloc = self.plan(req)
        rules = (self.profile.partition(alloc.partition), self.profile.qos.get(alloc.qos or ""))
        limits = [r.max_time for r in rules if r is not None and r.max_time]
        what = "1 job" if jobs == 1 else f"{jobs} jobs"
        return cost_of(alloc, jobs, what, min(limits) if limits else None)

    def _check_budget(self, req: Resources, jobs: int, what: str) -> None:
        """Refuse (BudgetExceeded) before anything queues; a ledger that cannot be read
        is said and does not stop the submission (the scheduler enforces its limits)."""
        guard = self.config.budget_guard
        if not guard or not self.capabilities.budget:
            return
        cost = self.cost(jobs, req)
        if cost is None:
            log.info("%s: cost not checked against the budget: no time= and no partition "
                     "limit in the profile", what)  # fmt: skip
            return
        cost = cost.model_copy(update={"what": what})
        try:
            self.site.check_budget(cost, guard)
        except BudgetExceeded:
            raise
        except HpcuiError as exc:
            log.warning("%s: the budget could not be read, not checked: %s", what, exc)

    def _jobs(self, done: Submitted) -> list[Job]:
        jobs = [
            Job(
                self,
                jid,
                done.folder,
                num_tasks=done.num_tasks,
                name=done.name,
                result_key=done.result_key,
                result_cache=self._result_cache,
                spool_dir=self._log_spool,
            )
            for jid in done.ids
        ]
        if done.track:
            self.relay.start()  # the trackers' files reach this machine while they run
        return [ChainJob(jobs)] if done.chain else jobs

    def _submitted(self) -> None:
        self._queue_changed()
        self._auto_clean()

    def plan(self, resources: Resources | None = None, **resource_kwargs: Any) -> Allocation:
        """Validate a request against the profile without touching the network."""
        req = resources or Resources.from_kwargs(**resource_kwargs)
        return submitter_plan(self.config, self.profile, req, "hpcui")

    def preview_script(
        self, *, array_size: int | None = None, **resource_kwargs: Any
    ) -> ScriptPreview:
        """The batch script a submit with these resources would send (no network)."""
        return submitter_preview(
            self.config, self.profile, self.scheduler, python=self.python, setup=self.setup,
            array_size=array_size, **resource_kwargs,
        )  # fmt: skip

    def estimate_start(
        self, *, array_size: int | None = None, **resource_kwargs: Any
    ) -> list[StartEstimate]:
        """When a submit with these resources would start, per candidate partition, as the
        scheduler estimates it (hpcui.submission.estimate; one round trip)."""
        return submitter_estimate(
            self.config, self.profile, self.scheduler, python=self.python, setup=self.setup,
            array_size=array_size, **resource_kwargs,
        )  # fmt: skip

    # -- existing jobs ---------------------------------------------------------------------

    def _record(self, job_id: str) -> JobRecord | None:
        rec = self.registry.get(self.name, str(job_id))
        if rec is None and self.registry.unfinished_submissions(self.name):
            self.submitter.reconcile(force=True)
            rec = self.registry.get(self.name, str(job_id))
        return rec

    def get_job(self, job_id: str) -> Job:
        """A job submitted earlier (maybe by another process), found in the local registry."""
        rec = self._record(job_id)
        if rec is None:
            raise UsageError(
                f"No job {job_id} of cluster {self.name!r} in the registry "
                f"({self.registry.path}). `hpcui jobs --cluster {self.name}` lists known jobs."
            )
        for r in self.registry.by_token(self.name, rec.token) if "chain" in rec.meta else [rec]:
            self.status.track([r.job_id or ""], r.state)
        return job_for(
            self,
            rec,
            lambda token: self.registry.by_token(self.name, token),
            result_cache=self._result_cache,
            spool_dir=self._log_spool,
        )

    def records(self, limit: int = 1000) -> list[JobRecord]:
        """hpcui's jobs of this cluster as the local registry keeps them, newest first."""
        return self.registry.list(self.name, limit=limit)

    def job(self, ref: str) -> Job | OtherJob:
        """The one place that tells hpcui's jobs from the user's others: hpcui's `Job` when
        the registry knows the id, else a handle for another job of the user made from the
        scheduler's record (asked once). UsageError when neither knows it."""
        if self._record(str(ref)) is not None or not self.capabilities.control:
            return self.get_job(str(ref))
        return OtherJob(
            self.control.details(str(ref)),
            cluster=self.name,
            transport=self.transport,
            scheduler=self.scheduler,
            log_follow=self.config.log_follow,
            spool_dir=self._log_spool,
            changed=self._changed,
        )

    def view(self, ref: str) -> JobView:
        """The job as every face shows it (hpcui's or any other of the user's): its record,
        a fresh state, the accounting once it ended, the GPU use kept. `hpcui show`."""
        handle = self.job(str(ref))
        job_id = handle.current.job_id if isinstance(handle, ChainJob) else handle.job_id
        record = self._record(job_id) if handle.hpcui_job else None
        status_reason = ""
        if record is not None:
            self.status.poll_once()  # the registry's state may be stale: one batched poll
            status = self.status.get(job_id)
            if status is not None:
                status_reason = status.reason
                update = {"state": status.state, "state_raw": status.state_raw}
                record = record.model_copy(update=update)
        accounting = None
        if record is not None and self.capabilities.history:
            accounting = next(iter(self.site.history(None, job_ids=[job_id])), None)
        details = handle.details
        if record is not None and not record.state.is_final and self.capabilities.control:
            # why it waits, on what, for how long it may run: the scheduler's description
            # (one call, only while the job lives; an update --time shows here at once)
            try:
                details = self.control.details(job_id)
            except (HpcuiError, NotImplementedError) as exc:
                log.debug("no details for %s: %s", job_id, exc)
        view = assemble(
            self.name,
            job_id,
            record=record,
            accounting=accounting,
            details=details,
            gpu_usage=self.usage.report(job_id).summary if record is not None else [],
            status_reason=status_reason,
            track=self.relay.summary(record) if record is not None else None,
        )
        finish = (
            self._finish_watch.running(handle, details) if view.state is JobState.RUNNING else None
        )
        return view.model_copy(update={"finish": finish.line(job_id)}) if finish else view

    def will_finish(self, ref: str) -> Finish | None:
        """Whether a running job ends before its limit, from the progress its log printed
        (hpcui.jobs.finish); None when it does not run or printed no progress with a total."""
        handle = self.job(str(ref))
        return self._finish_watch.running(handle, self.control.details(handle.job_id))

    def running_finishes(self, most: int = 10) -> dict[str, Finish]:
        """Will-it-finish of the user's running hpcui jobs, from the last minute's queue."""
        return self._finish_watch.of_queue(self.site.queue(max_age_s=60), self.job, most)

    @cached_property
    def _finish_watch(self) -> FinishWatch:
        """Will it finish: this machine's looks at running jobs' progress (hpcui.jobs.finish)."""
        return FinishWatch(self.registry.path.parent / "progress", self.name, self.transport)

    def _changed(self, job_ids: list[str]) -> None:
        self.status.track(job_ids)  # its state changes: fast polling again
        self._queue_changed()

    # -- parts for any job id: verbs (hpcui.jobs.control) and files (hpcui.jobs.files) ------------

    @cached_property
    def control(self) -> JobControl:
        """Cancel, hold, release, requeue, time limit, shell, resubmit: any job id."""
        return JobControl(
            name=self.name,
            remote_base=self.config.remote_base,
            transport=self.transport,
            scheduler=self.scheduler,
            changed=self._changed,
            known_over=self._known_over,
            cancel_sent=self._cancel_sent,
            whole_chains=lambda ids: whole_chains(self.registry, self.name, ids, self._known_over),
        )

    def _cancel_sent(self, job_ids: list[str]) -> None:
        """hpcui's jobs among `job_ids` had a cancel accepted now (JobView says so)."""
        now = time.time()
        for job_id in job_ids:
            if self._record(job_id) is not None:
                self.registry.set_meta(self.name, job_id, "cancel_sent_at", now)

    def _known_over(self, job_id: str) -> bool:
        """The status service already holds this job's end (pushed or polled)."""
        status = self.status.get(job_id)
        return status is not None and status.state.is_final

    @cached_property
    def files(self) -> job_files.JobFiles:
        """A job's folder, listings, the start of a file, downloads with resume."""
        return job_files.JobFiles(self.transport, folder_of=self._folder_of)

    def _folder_of(self, job_id: str) -> str:
        rec = self._record(job_id)
        return rec.folder if rec is not None else self.control.details(job_id).work_dir

    # -- what running jobs use (hpcui.jobs.usage), what past runs used (hpcui.clusters.sizing) -------

    @cached_property
    def _sizer(self) -> sizing.RightSizer:
        return sizing.RightSizer(
            self.name,
            self.registry,
            lambda ids: self.site.history(None, job_ids=ids),
            lambda job_id: self.usage.store(job_id).load(),
        )

    def right_size(
        self, fn: Callable[..., Any] | str, **resource_kwargs: Any
    ) -> sizing.PastUse | None:
        """What past runs of `fn` used (p95 peak RSS, elapsed, busy GPUs) against this
        request, and what would do; None with fewer than 3 completed runs. Never changes
        a request: submit says when one is far above (a ResourceAdvice warning)."""
        return self._sizer.look(fn, self.plan(**resource_kwargs))

    @cached_property
    def usage(self) -> usage.JobUsage:
        """Looks at what running jobs use (GPU, CPU, memory per node and step), kept."""
        root = self.registry.path.parent / "usage"
        return usage.JobUsage(root, self.name, self.transport, self.scheduler)

    def _queue_changed(self) -> None:
        """After a submit or cancel: watchers refresh fast again (only if one exists)."""
        if "site" in self.__dict__:
            self.site.poke_queue()

    # == site state: queue, history, partitions, quota, modules (hpcui.sitestate.site) ======

    @cached_property
    def site(self) -> SiteView:
        return SiteView(
            name=self.name,
            config=self.config,
            profile=self.profile,
            transport=self.transport,
            scheduler=self.scheduler,
            registry=self.registry,
            setup=lambda: self.setup,
            before_listing=lambda: self.submitter.reconcile_quietly(),
        )

    def logs(
        self,
        job: JobHandle | str,
        stream: _logs.Stream = "stdout",
        rank: int | None = None,
        **options: Unpack[_logs.LogOptions],
    ) -> Iterator[_logs.LogChunk]:
        """A job's log text as it appears, per rank (all ranks when `rank` is None).

        Without `follow`, what is there now; with it, until the job ends and the files
        are drained. Offset-based reads, and a local spool (beside the registry, files
        0600) that a later call replays from disk: nothing is downloaded twice, also
        after a reconnect or in a new process. `spool=False` keeps nothing locally.
        `until` replaces "the job has ended" as the end of following (the app stops when
        its screen is hidden, and watches the state on the way). An id is looked up once
        (`job`); a handle in hand is not asked again.
        """
        handle = self.job(job) if isinstance(job, str) else job
        return handle.logs(stream, rank, **options)
