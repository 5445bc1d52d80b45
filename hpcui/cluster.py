"""Cluster: one connected site = transport + scheduler + profile + registry + status."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any

from hpcui import (
    any_job,
    housekeeping,
    job_files,
    local_machine,
    sitestate,
    submission,
    submit_recovery,
    usage,
)
from hpcui import logs as _logs  # site state (queue, quota, modules, logs): block at the end
from hpcui.any_job import OtherJob
from hpcui.backends.records import JobDetails, RemoteFile
from hpcui.config import ClusterConfig
from hpcui.errors import (
    HpcuiError,
    SchedulerError,
    UsageError,
)
from hpcui.job import Job
from hpcui.profiles import Profile, resolve_profile
from hpcui.profiles.units import parse_time
from hpcui.registry import JobRecord, Registry, shared_registry
from hpcui.resources import Allocation, Resources
from hpcui.result_signing import job_key
from hpcui.schedulers.base import Capabilities, JobStatus, Scheduler
from hpcui.status import StatusService
from hpcui.submitter import ScriptPreview, Submitted, Submitter
from hpcui.submitter import plan as submitter_plan
from hpcui.submitter import preview_script as submitter_preview
from hpcui.transport.base import Command, CommandResult, TerminalChannel, Transport

log = logging.getLogger(__name__)

#: the `keep` policy runs at most this often per cluster
AUTO_CLEAN_S = 86400.0


def _silence_submitit() -> None:
    """submitit logs to stderr by default; that would corrupt the TUI. Route it to our logs."""
    logger = logging.getLogger("submitit")
    logger.handlers.clear()
    logger.propagate = True


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
        self._remote: submission.RemoteInfo | None = None
        self._shared_base_said = False
        self._setup_checked = False
        self._reconciled_at: float | None = None
        self._auto_clean_thread: threading.Thread | None = None
        self._lock = threading.Lock()
        _silence_submitit()

    def __repr__(self) -> str:
        return f"Cluster({self.name!r}, {self.transport.description})"

    # -- parts -----------------------------------------------------------------------------

    @property
    def transport(self) -> Transport:
        if self._transport is None:
            self._transport = self.own_transport()
        return self._transport

    def own_transport(self) -> Transport:
        """This process's own connection to the cluster (the agent's is handed in; this
        one also serves when the agent does not answer)."""
        if self.config.is_local:
            from hpcui.transport.local import LocalTransport

            return LocalTransport()
        from hpcui.transport.ssh import SshTransport

        c = self.config
        return SshTransport.from_config(
            c.host or "",
            ssh_config=c.ssh_config,
            user=c.user,
            port=c.port,
            identity_file=c.identity_file,
            known_hosts=c.known_hosts,
            proxy_jump=c.proxy_jump,
            prompt=self._prompt,
            on_unknown_host=self._on_unknown_host,
            login_shell=c.login_shell,
            trust_name=self.name,
        )

    @cached_property
    def profile(self) -> Profile:
        """The site profile; on this machine without Slurm, filled in with its own cores,
        memory and GPUs (hpcui.local_machine) before the config's overrides."""
        name, user = self._profile_name, self.config.user_profiles
        overrides = self.config.profile_overrides or None
        if self.config.is_local and self._kind == "local":
            return local_machine.describe(resolve_profile(name, user)).with_overrides(overrides)
        profile = resolve_profile(name, user, overrides)
        if profile.scheduler == "local" and self._kind != "local":  # `local` with Slurm on PATH
            profile = profile.model_copy(update={"scheduler": self._kind})
        return profile

    @cached_property
    def _kind(self) -> str:
        """slurm, pbs or local: the config's, else the profile's (`local` with Slurm on
        PATH is Slurm)."""
        if self.config.scheduler != "auto":
            return self.config.scheduler
        named = resolve_profile(
            self._profile_name, self.config.user_profiles, self.config.profile_overrides or None
        )
        return local_machine.scheduler_kind(named)

    @property
    def _profile_name(self) -> str:
        return self.config.profile or ("local" if self.config.is_local else "generic")

    @property
    def python(self) -> str:
        """The Python jobs run with: the cluster config's, else the profile's, else (on
        this machine without Slurm) the one running hpcui, with its packages, else python3."""
        if chosen := self.config.python or self.profile.python:
            return chosen
        return sys.executable if self.config.is_local and self._kind == "local" else "python3"

    @property
    def setup(self) -> list[str]:
        """Shell lines run before Python: the cluster config's, else the profile's."""
        return list(self.config.setup if self.config.setup is not None else self.profile.setup)

    @cached_property
    def scheduler(self) -> Scheduler:
        kind = self._kind
        if kind == "slurm":
            from hpcui.schedulers.slurm import SlurmScheduler

            return SlurmScheduler(self.transport)
        if kind == "local":
            from hpcui.schedulers.local import LocalScheduler

            return LocalScheduler(
                self.transport,
                lambda: f"{self.remote_info().base}/local",
                local_machine.this_machine if self.config.is_local else None,
            )
        if kind == "pbs":
            from hpcui.schedulers.pbs import PbsScheduler

            return PbsScheduler(
                self.transport,
                dialect=self.profile.pbs_dialect,
                node_shell=self.profile.node_shell,
            )
        raise UsageError(f"Scheduler {kind!r} of cluster {self.name!r} is not supported yet.")

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
    def result_cache(self) -> Path:
        """Fetched results of this cluster's jobs, beside the registry (files 0600)."""
        return self.registry.path.parent / "results" / self.name

    def clean(
        self, *, older_than: timedelta | None = None, dry_run: bool = False
    ) -> housekeeping.CleanReport:
        """Remove the remote folders of ended jobs whose results are fetched (or, with
        `older_than`, of every ended job submitted before then). See hpcui.housekeeping."""
        return housekeeping.clean(
            self.name,
            self.registry,
            self.transport,
            self.scheduler,
            remote_base=self.remote_info().base,
            result_cache=self.result_cache,
            older_than=older_than,
            dry_run=dry_run,
        )

    def _auto_clean(self) -> None:
        """The config's `keep` policy: at most once a day per cluster (a stamp beside the
        registry, shared by every process), in the background; never fails a submit."""
        if not self.config.keep:
            return
        stamp = self.registry.path.parent / "housekeeping" / f"{self.name}.last"
        try:
            if time.time() - stamp.stat().st_mtime < AUTO_CLEAN_S:
                return
        except FileNotFoundError:
            pass
        stamp.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        stamp.touch()
        older = timedelta(seconds=parse_time(self.config.keep))

        def work() -> None:
            try:
                report = self.clean(older_than=older)
                log.info("keep=%s on %s: %d folders, %d files removed", self.config.keep,
                         self.name, len(report.removed), report.files)  # fmt: skip
            except HpcuiError as exc:
                log.warning("automatic clean of %s failed: %s", self.name, exc)

        self._auto_clean_thread = threading.Thread(target=work, name="hpcui-keep", daemon=True)
        self._auto_clean_thread.start()

    @cached_property
    def status(self) -> StatusService:
        from hpcui.end_push import EndPush

        service = StatusService(
            self.scheduler,
            on_update=self._states_changed,
            resolve_vanished=self._resolve_vanished,
        )
        service.end_push = EndPush(self.transport, self._job_folder, service.nudge)
        return service

    def _states_changed(self, changed: dict[str, JobStatus]) -> None:
        """The registry learns them; a job that ended refreshes the queue an app shows
        at once (a pushed end reaches its table, not only result())."""
        self.registry.update_states(
            self.name, {j: (s.state, s.state_raw) for j, s in changed.items()}
        )
        if any(s.state.is_final for s in changed.values()):
            self._queue_changed()

    def _job_folder(self, job_id: str) -> str | None:
        """Where a tracked job of this cluster writes its result (None: not hpcui's job)."""
        rec = self.registry.get(self.name, job_id)
        return rec.folder if rec is not None else None

    def run(self, cmd: Command, *, timeout: float | None = None) -> CommandResult:
        """Run a command on the login node (a list is quoted word by word)."""
        return self.transport.run(cmd, timeout=timeout)

    def close(self) -> None:
        if "status" in self.__dict__:
            self.status.close()
        if "queue_watcher" in self.__dict__:
            self.queue_watcher.close()
        if self._transport is not None:
            self._transport.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- submit (hpcui.submitter) -----------------------------------------------------------

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
            track=lambda ids: self.status.track(ids),
            on_submitted=self._submitted,
            missing_setup_modules=self.missing_setup_modules,
        )

    def remote_info(self, *, local_version: tuple[int, int] | None = None) -> submission.RemoteInfo:
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
        """Run `fn(*args, **kwargs)` on the cluster. Keywords here are resources (gpus=4, ...)."""
        req = resources or Resources.from_kwargs(**resource_kwargs)
        return self._jobs(self.submitter.submit(fn, [(args, dict(kwargs or {}))], req, False))[0]

    def map(
        self,
        fn: Callable[..., Any],
        *iterables: Iterable[Any],
        resources: Resources | None = None,
        **resource_kwargs: Any,
    ) -> list[Job]:
        """`fn` over the zipped iterables as ONE job array (one sbatch call)."""
        calls = [(tuple(items), {}) for items in zip(*iterables)]
        if not calls:
            return []
        req = resources or Resources.from_kwargs(**resource_kwargs)
        return self._jobs(self.submitter.submit(fn, calls, req, True))

    def _jobs(self, done: Submitted) -> list[Job]:
        return [
            Job(
                self,
                jid,
                done.folder,
                num_tasks=done.num_tasks,
                name=done.name,
                result_key=done.result_key,
                result_cache=self.result_cache,
            )
            for jid in done.ids
        ]

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
            self.config,
            self.profile,
            self.scheduler,
            python=self.python,
            setup=self.setup,
            array_size=array_size,
            **resource_kwargs,
        )

    def remember(self, job: Job, key: str, value: Any) -> None:
        """Keep `value` (JSON) in the job's registry record, e.g. the form that made it."""
        self.registry.set_meta(self.name, job.job_id, key, value)

    def reconcile_submissions(self, *, force: bool = False) -> submit_recovery.Recovered:
        """Finish submissions cut off earlier (a killed client, a lost link, a timeout)."""
        return self.submitter.reconcile(force=force)

    # -- existing jobs ---------------------------------------------------------------------

    def record(self, job_id: str) -> JobRecord | None:
        """hpcui's record of a job, None for a job hpcui did not submit (a cut-off submit's
        job is reconciled first: it may be that one)."""
        rec = self.registry.get(self.name, str(job_id))
        if rec is None and self.registry.unfinished_submissions(self.name):
            self.reconcile_submissions(force=True)
            rec = self.registry.get(self.name, str(job_id))
        return rec

    def get_job(self, job_id: str) -> Job:
        """A job submitted earlier (maybe by another process), found in the local registry."""
        rec = self.record(job_id)
        if rec is None:
            raise UsageError(
                f"No job {job_id} of cluster {self.name!r} in the registry "
                f"({self.registry.path}). `hpcui jobs --cluster {self.name}` lists known jobs."
            )
        self.status.track([rec.job_id or ""], rec.state)
        # jobs submitted before results were signed (no "signed" in meta) keep working
        key = job_key(rec.token) if rec.meta.get("signed") else None
        return Job(
            self,
            rec.job_id or "",
            rec.folder,
            num_tasks=rec.num_tasks,
            name=rec.name,
            result_key=key,
            result_cache=self.result_cache,
            cleaned_at=rec.meta.get("cleaned_at"),
        )

    def job(self, ref: str) -> Job | OtherJob:
        """The one place that tells hpcui's jobs from the user's others: hpcui's `Job` when
        the registry knows the id, else a handle for another job of the user made from the
        scheduler's record (asked once). UsageError when neither knows it."""
        if self.record(str(ref)) is not None or not self.capabilities.control:
            return self.get_job(str(ref))
        return any_job.OtherJob(
            self.job_details(str(ref)),
            cluster=self.name,
            transport=self.transport,
            scheduler=self.scheduler,
            log_follow=self.config.log_follow,
            spool_dir=self.log_spool,
            changed=self._changed,
        )

    @property
    def log_spool(self) -> Path:
        """Where followed logs are kept on this machine (beside the registry, files 0600)."""
        return self.registry.path.parent / "logs" / self.name

    def _changed(self, job_ids: list[str]) -> None:
        self.status.track(job_ids)  # its state changes: fast polling again
        self._queue_changed()

    def _resolve_vanished(self, job_ids: list[str]) -> dict[str, JobStatus]:
        """Jobs the scheduler forgot (no accounting): judge them by their result files."""
        by_folder: dict[str, list[str]] = {}
        for jid in job_ids:
            rec = self.registry.get(self.name, jid)
            if rec is not None:
                by_folder.setdefault(rec.folder, []).append(jid)
        if not by_folder:
            return {}
        found = submission.list_results(self.transport, list(by_folder))
        return submission.judge_vanished(job_ids, found)

    def cancel(self, job_ids: list[str]) -> None:
        """Cancel jobs with one scheduler call; their end reaches the registry and the queue."""
        if not job_ids:
            return
        self.scheduler.cancel(job_ids)
        self._changed(job_ids)  # fast polling again until they are final

    # -- any job of the user (hpcui.any_job): details, script, control ---------------------

    def job_details(self, job_id: str) -> JobDetails:
        """What the scheduler knows of any job of the user (hpcui's or not): log paths,
        working directory, script, nodes. UsageError when it does not know the id."""
        return self.scheduler.job_details(str(job_id))

    def batch_script(self, job_id: str) -> str:
        """The batch script a job was submitted with (Slurm keeps it while it knows the job)."""
        return self.scheduler.batch_script(str(job_id))

    def hold(self, job_ids: list[str]) -> None:
        """Keep pending jobs from starting until `release`."""
        self._control(self.scheduler.hold, job_ids)

    def release(self, job_ids: list[str]) -> None:
        self._control(self.scheduler.release, job_ids)

    def requeue(self, job_ids: list[str]) -> None:
        """Back to pending: a running job is killed and starts again later (same id)."""
        self._control(self.scheduler.requeue, job_ids)

    def set_time_limit(self, job_id: str, time: str | int) -> None:
        """A new time limit (`"2:00:00"`, `"90m"`, seconds); Slurm lets users only lower
        it unless the site allows more, and says so."""
        seconds = any_job.time_limit_seconds(time)
        self._control(lambda ids: self.scheduler.set_time_limit(ids[0], seconds), [job_id])

    def open_shell(
        self,
        job_id: str,
        *,
        node: str | None = None,
        term: str = "xterm-256color",
        cols: int = 80,
        rows: int = 24,
    ) -> TerminalChannel:
        """An interactive shell inside a running job (srun --overlap --pty): the channel
        the caller bridges to its terminal. UsageError while the job does not run."""
        details = self.job_details(str(job_id))
        return any_job.open_shell(
            self.transport, self.scheduler, details, node=node, term=term, cols=cols, rows=rows
        )

    def job_folder(self, job_id: str) -> str:
        """Where a job's files are: hpcui's job folder, else the job's working directory."""
        rec = self.record(job_id)
        if rec is not None:
            return rec.folder
        return self.job_details(str(job_id)).work_dir

    def list_files(self, path: str) -> list[RemoteFile]:
        """A remote folder's entries, folders first (one round trip)."""
        return job_files.list_folder(self.transport, path)

    def read_text(self, path: str, limit: int = job_files.VIEW_BYTES) -> tuple[str, int]:
        """The start of a remote file as text, and its size."""
        return job_files.read_text(self.transport, path, limit)

    def download(
        self,
        remote: str,
        local: str | Path,
        *,
        progress: Callable[[int, int], None] | None = None,
        note: Callable[[str], None] | None = None,
    ) -> tuple[int, Path]:
        """Copy a remote file here, resuming a partial copy (`<name>.part`) of the same
        version of the file: bytes moved now, and where the file is."""
        return job_files.download(self.transport, remote, Path(local), progress=progress, note=note)

    def resubmit(self, script: str, *, work_dir: str, name: str = "job") -> str:
        """Submit an (edited) batch script from `work_dir`; returns the new job id."""
        job_id = any_job.resubmit(
            self.name,
            self.config.remote_base,
            self.transport,
            self.scheduler,
            script,
            work_dir=work_dir,
            name=name,
        )
        self._queue_changed()
        return job_id

    def _control(self, verb: Callable[[list[str]], None], job_ids: list[str]) -> None:
        ids = [str(j) for j in job_ids]
        if not ids:
            raise UsageError("No job given: name at least one job id.")
        verb(ids)
        self._changed(ids)

    # -- what running jobs use (hpcui.usage) --------------------------------------------------

    def usage_store(self, job_id: str) -> usage.UsageStore:
        """A job's kept samples, beside the log spool (the id made a safe file name: it may
        come from a command line)."""
        return usage.UsageStore(
            self.registry.path.parent / "usage" / self.name / f"{usage.file_name(job_id)}.jsonl"
        )

    def usage(self, job_ids: Iterable[str]) -> dict[str, usage.UsageSample]:
        """One sample per job now (one scheduler-side command each), kept with its history.

        Per node and GPU of the job: utilisation, memory, power; per step: CPU % and RSS.
        A job that is not running gets a sample with a note and no figures.
        """
        out = {}
        for jid in job_ids:
            store = self.usage_store(jid)
            res = self.transport.run(self.scheduler.usage_command(jid), timeout=60)
            reading = self.scheduler.parse_usage(res.stdout, jid)
            sample = usage.to_sample(self.name, jid, reading, store.last())
            if sample.gpus or sample.tasks:  # an empty look (job not running) is not history
                store.append(sample)
            out[jid] = sample
        return out

    def usage_report(self, job_id: str) -> usage.UsageReport:
        """The kept samples of a job: the newest, mean/peak per GPU, and verdicts."""
        return usage.report(self.name, job_id, self.usage_store(job_id).load())

    def _queue_changed(self) -> None:
        """After a submit or cancel: watchers refresh fast again (only if one exists)."""
        if "queue_watcher" in self.__dict__:
            self.queue_watcher.poke()

    # == site state: queue, history, partitions, quota, modules, logs ========================
    # Thin wrappers; the logic lives in hpcui.sitestate and hpcui.logs (see docs/site-state.md).

    @cached_property
    def queue_watcher(self) -> sitestate.QueueWatcher:
        """The ONE queue poll of this cluster: screens subscribe to it instead of polling."""
        return sitestate.QueueWatcher(self._fetch_queue, name=self.name)

    def _fetch_queue(self) -> list[sitestate.QueueJob]:
        self.submitter.reconcile_quietly()
        return self.scheduler.queue(into=sitestate.QueueJob)

    def queue(
        self, *, include_finished: bool = False, max_age_s: float = 0.0
    ) -> list[sitestate.QueueJob]:
        """All of the user's jobs (hpcui's have `token`), estimated start for pending ones.

        `max_age_s` > 0 accepts the watcher's last snapshot when it is that recent (no call).
        """
        snap = self.queue_watcher.refresh(max_age_s=max_age_s)
        if snap.error is not None:
            exc = self.queue_watcher.last_exception
            if isinstance(exc, HpcuiError):
                raise exc
            raise SchedulerError(
                f"Listing the queue on {self.name} failed: {snap.error}. Retry in a minute."
            )
        return list(snap.jobs) if include_finished else snap.active

    def history(
        self,
        since: datetime | timedelta | str | None = timedelta(days=1),
        *,
        job_ids: list[str] | None = None,
    ) -> list[sitestate.HistoryJob]:
        """Jobs since `since` with exit codes, elapsed, CPU time, max RSS, efficiency line."""
        self.submitter.reconcile_quietly()
        jobs = self.scheduler.history(
            sitestate.since_arg(since), job_ids, into=sitestate.HistoryJob
        )
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

    def _own_jobs_missing(
        self, jobs: list[sitestate.HistoryJob], since: timedelta, records: list[JobRecord]
    ) -> list[sitestate.HistoryJob]:
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
        if not missing or getattr(self.scheduler, "accounting_off", False):  # squeue's list
            return []
        found = self.scheduler.history(
            None, list(dict.fromkeys(missing)), into=sitestate.HistoryJob
        )
        return [j for j in found if j.job_id not in seen]

    def partitions(self) -> list[sitestate.PartitionInfo]:
        return self.scheduler.partitions()

    def free(self) -> sitestate.FreeReport:
        """Free CPUs and GPUs per partition now, and each node's state (one sinfo)."""
        return sitestate.FreeReport.of(self.scheduler.nodes())

    def standing(self) -> sitestate.Standing:
        """Fair share, pending jobs' priority factors (one round trip) and the project's
        allocation from the site's tool where the profile names one (a second)."""
        shares, pending, note = self.scheduler.standing()
        tool = self.profile.allocation_command
        allocation = sitestate.fetch_allocation(self.transport, tool) if tool else None
        return sitestate.Standing(
            fair_share=shares, pending=pending, note=note, allocation=allocation
        )

    def quota_report(self) -> sitestate.QuotaReport:
        """Quota with the tool that answered and the ones tried before it (one round trip),
        and what hpcui's own folders take of it (a second one)."""
        report = sitestate.fetch_quota(
            self.transport, self.profile.quota_command, cluster=self.name
        )
        base = submission.base_word(self.config.remote_base)
        own = sitestate.fetch_own_usage(self.transport, base, report.entries)
        return report.model_copy(update={"own": own})

    def quota(self) -> list[sitestate.QuotaEntry]:
        return self.quota_report().entries

    @cached_property
    def module_system(self) -> sitestate.ModuleSystem:
        """Lmod or Environment Modules: from the profile, else probed once."""
        known = getattr(self.profile, "module_system", None)
        return known or sitestate.detect_system(self.transport, cluster=self.name)

    def modules(self, *, with_setup: bool = False) -> sitestate.ModuleState:
        """Loaded and available modules (defaults marked), one round trip.

        ``with_setup``: "loaded" after this cluster's `setup` lines, as a job sees it.
        """
        setup = self.setup if with_setup else ()
        return sitestate.fetch_modules(
            self.transport, self.module_system, cluster=self.name, setup=setup
        )

    def module_search(self, term: str) -> list[sitestate.Module]:
        return sitestate.search_modules(self.transport, self.module_system, term, cluster=self.name)

    def missing_setup_modules(self) -> list[str]:
        """Modules the config's `setup` lines load that this site does not have."""
        if not sitestate.setup_modules(self.setup):
            return []
        return sitestate.missing_modules(self.setup, self.modules())

    def logs(
        self,
        job: Job | OtherJob | str,
        stream: _logs.Stream = "stdout",
        rank: int | None = None,
        *,
        follow: bool = False,
        tail_bytes: int | None = None,
        timeout: float | None = None,
        spool: bool = True,
        until: Callable[[], bool] | None = None,
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
        return handle.logs(
            stream, rank, follow=follow, tail_bytes=tail_bytes, timeout=timeout, spool=spool,
            until=until,
        )  # fmt: skip
