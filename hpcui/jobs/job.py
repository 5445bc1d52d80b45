"""A handle on one scheduler job (or one element of an array): state, result, logs."""

from __future__ import annotations

import logging
import os
import pickle
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Protocol

from hpcui.backends.job_paths import (
    SIGNATURE_SUFFIX,
    JobPaths,
    Stream,
    result_name,
    split_signature,
)
from hpcui.backends.states import JobState
from hpcui.errors import (
    HpcuiError,
    JobCancelledError,
    JobFailedError,
    JobLostError,
    JobTimeLimitError,
    JobTimeoutError,
    ResultIntegrityError,
    ResultNeedsModuleError,
)
from hpcui.store import signing as result_signing
from hpcui.store.remote import disk_full
from hpcui.transport import deadline

if TYPE_CHECKING:  # hpcui.jobs.usage imports pydantic: only where usage is asked for
    from hpcui.backends.records import JobDetails
    from hpcui.config import ClusterConfig
    from hpcui.jobs.control import JobControl
    from hpcui.jobs.status import StatusService
    from hpcui.jobs.usage import JobUsage, UsageReport, UsageSample
    from hpcui.logs.follow import LogChunk
    from hpcui.schedulers.base import Scheduler
    from hpcui.transport.base import Transport
from hpcui.backends.end_reasons import scheduler_words
from hpcui.common.formatting import clock_duration
from hpcui.logs import follow as _logs
from hpcui.logs import push as log_push


class JobHost(Protocol):
    """What a Job needs of its cluster (a `Cluster` is one): Job never imports Cluster, which
    imports it. The one Protocol of the core; every other part is passed concretely."""

    name: str
    config: ClusterConfig

    @property
    def transport(self) -> Transport: ...
    @property
    def scheduler(self) -> Scheduler: ...
    @property
    def status(self) -> StatusService: ...
    @property
    def control(self) -> JobControl: ...
    @property
    def usage(self) -> JobUsage: ...


STDERR_TAIL = 4000
log = logging.getLogger(__name__)


class Job:
    """Created by `Cluster.submit`/`map`, or found again with `hpcui.get_job`. A
    `hpcui.jobs.handle.JobHandle`, as `OtherJob` is."""

    hpcui_job = True
    #: what the scheduler says of a job hpcui did not submit: none for hpcui's own
    details: JobDetails | None = None

    def __init__(
        self,
        cluster: JobHost,
        job_id: str,
        folder: str,
        *,
        num_tasks: int = 1,
        name: str = "",
        result_key: bytes | None = None,
        result_cache: Path | None = None,
        cleaned_at: float | None = None,
        spool_dir: Path | None = None,
    ) -> None:
        self.cluster = cluster
        #: where followed logs are kept on this machine (None: nothing kept)
        self.spool_dir = spool_dir
        #: where fetched results are kept on this machine (`hpcui clean` may then remove the
        #: job folder); None: nothing kept
        self.result_cache = result_cache
        #: when `hpcui clean` removed the job folder (None: it is still there)
        self.cleaned_at = cleaned_at
        #: results are unpickled only with a valid signature under this key (None: a job
        #: submitted before hpcui signed results; hpcui/store/signing.py)
        self.result_key = result_key
        self.job_id = job_id
        self.folder = folder
        self.num_tasks = num_tasks
        self.name = name

    def __repr__(self) -> str:
        return f"Job({self.cluster.name}:{self.job_id}, {self.state.value})"

    def _ipython_display_(self) -> None:
        """In Jupyter, a panel that updates itself until the job ends (hpcui.live)."""
        from hpcui.live import show  # only where a notebook shows a job

        show(self)

    @property
    def cluster_name(self) -> str:
        return self.cluster.name

    # -- state -----------------------------------------------------------------------------

    @property
    def state(self) -> JobState:
        status = self.cluster.status.get(self.job_id)
        if status is None:
            self.cluster.status.track([self.job_id])
            self.cluster.status.poll_once()
            status = self.cluster.status.get(self.job_id)
        return status.state if status else JobState.UNKNOWN

    @property
    def reason(self) -> str:
        """Why the job waits, in the scheduler's words ("" when it does not wait)."""
        self.state  # noqa: B018 - tracks and polls a job the status service does not know yet
        status = self.cluster.status.get(self.job_id)
        return status.reason if status else ""

    def done(self) -> bool:
        """Ended for good (a node failure counts once Slurm did not requeue the job)."""
        self.state  # noqa: B018 - tracks and polls a job the status service does not know yet
        return self.cluster.status.settled(self.job_id)

    def wait(self, timeout: float | None = None) -> JobState:
        """Block until the job ends; raises JobTimeoutError if it takes longer than `timeout`."""
        states = self.cluster.status.wait([self.job_id], timeout=timeout)
        state = states[self.job_id].state
        if not self.cluster.status.settled(self.job_id):
            if stalled := self.cluster.transport.stalled_s():
                # the state is the last one heard, not the job's now
                answered = self.cluster.status.answered_at
                ago = (
                    ""
                    if answered is None
                    else f", {self.cluster.status.clock.monotonic() - answered:.0f} s ago"
                )
                raise JobTimeoutError(
                    f"Job {self.job_id} on {self.cluster.name}: its state could not be checked "
                    f"within {timeout} s - the connection has not answered for {stalled:.0f} s "
                    f"(stalled: network, VPN or sleep?). Last known state: {state.value}{ago}. "
                    "hpcui reconnects by itself; call wait()/result() again.",
                    job_id=self.job_id,
                )
            maybe = " (Slurm may still requeue it)" if state.may_requeue else ""
            raise JobTimeoutError(
                f"Job {self.job_id} on {self.cluster.name} is still {state.value}{maybe} after "
                f"{timeout} s. Call wait()/result() again later, or cancel() it.",
                job_id=self.job_id,
            )
        return state

    def cancel(self) -> None:
        self.cluster.control.cancel([self.job_id])

    def batch_script(self) -> str:
        """The batch script hpcui submitted it with (its job folder's copy)."""
        return self._text(self.paths.script)

    def _text(self, path: str) -> str:
        try:
            data = self.cluster.transport.read_file(path)
        except FileNotFoundError:
            return ""  # not written yet, or cleaned away
        return data.decode("utf-8", "replace")

    def logs(
        self,
        stream: Stream = "stdout",
        rank: int | None = None,
        *,
        follow: bool = False,
        tail_bytes: int | None = None,
        timeout: float | None = None,
        spool: bool = True,
        until: Callable[[], bool] | None = None,
    ) -> Iterator[LogChunk]:
        """Its log text as it appears, per rank (all ranks when `rank` is None); see
        `Cluster.logs`."""

        host = self.cluster
        tasks = range(self.num_tasks) if rank is None else [rank]
        followers = _logs.followers_for(
            host.transport,
            self.folder,
            self.job_id,
            tasks,
            stream,
            tail_bytes=tail_bytes,
            spool_dir=self.spool_dir if spool else None,
        )
        done = (until or self.done) if follow else None
        return log_push.read_or_follow(
            followers, done, mode=host.config.log_follow, stream=stream, timeout=timeout
        )

    # -- what it uses --------------------------------------------------------------------------

    def usage(self) -> UsageSample:
        """GPU/CPU use now (one command on the cluster), kept with the job's usage history."""
        return self.cluster.usage.look([self.job_id])[self.job_id]

    def usage_report(self) -> UsageReport:
        """The kept samples: newest, mean and peak per GPU, verdicts (works after the end)."""
        return self.cluster.usage.report(self.job_id)

    def stop(self) -> None:
        """Ask a running job to end itself: writes the stop file its ranks poll.

        `hpcui.distributed.stop_requested()` turns true on every rank at the same step,
        so training leaves its loop, checkpoints and calls destroy_process_group; unlike
        cancel(), no rank is killed mid-collective (which can hang NCCL and the node).
        The job only stops if its code calls stop_requested().
        """
        self.cluster.transport.write_file(self.paths.stop, b"stop\n", mode=0o644)
        self.cluster.status.track([self.job_id])  # poll fast: the job ends soon

    # -- results ---------------------------------------------------------------------------

    @property
    def paths(self) -> JobPaths:
        return JobPaths(self.folder, self.job_id)

    def kept_result(self, task: int) -> Path | None:
        """This machine's copy of a task's result (made by the first successful read)."""
        if self.result_cache is None:
            return None
        return kept_result_path(self.result_cache, self.folder, self.job_id, task)

    def _outcome(self, task: int) -> tuple[str, Any] | None:
        path = self.paths.result(task)
        kept = self.kept_result(task)
        if kept is not None and kept.exists():  # checked when it was kept; ours, 0600
            return _unpickle(kept.read_bytes(), self.job_id, f"task {task}, {kept}")
        try:  # one read, no separate stat: a missing file is the answer
            data = self.cluster.transport.read_file(path)
        except FileNotFoundError:
            if self.cleaned_at is not None:
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.cleaned_at))
                raise JobLostError(
                    f"The folder of job {self.job_id} on {self.cluster.name} was removed by "
                    f"`hpcui clean` on {when}, and its result had not been fetched before. "
                    "Resubmit the job to compute it again.",
                    job_id=self.job_id,
                    stderr_tail="",
                ) from None
            return None
        transport = self.cluster.transport
        what = f"task {task}, {path}"
        if self.result_key is not None:
            data, signature = split_signature(data)
            if signature is None:  # submitted before signatures moved into the result
                try:
                    signature = transport.read_file(path + SIGNATURE_SUFFIX).decode()
                except FileNotFoundError:
                    signature = None
                except UnicodeDecodeError:
                    signature = ""
            result_signing.check(data, signature, self.result_key, what=what, job_id=self.job_id)
        if kept is not None:  # verified: kept even when this Python cannot load it yet
            _keep(kept, data)
        return _unpickle(data, self.job_id, what)

    def result(self, timeout: float | None = None) -> Any:
        """The function's return value (task 0). Raises a JobError subclass on failure."""
        return self._result(0, timeout)

    def results(self, timeout: float | None = None) -> list[Any]:
        """One return value per task (rank), for multi-task jobs such as DDP."""
        ends = deadline.ends_after(timeout)
        self.wait(timeout)
        with deadline.within(deadline.rest(ends)):
            return [self._result(task, None) for task in range(self.num_tasks)]

    def exception(self, timeout: float | None = None) -> Exception | None:
        """The error the job ended with, or None when it succeeded."""
        try:
            self.results(timeout)
        except (JobFailedError, JobCancelledError, JobLostError) as exc:  # with time limits
            return exc
        return None

    def _result(self, task: int, timeout: float | None) -> Any:
        ends = deadline.ends_after(timeout)
        state = self.wait(timeout)
        with deadline.within(deadline.rest(ends)):  # the reads too: `timeout` covers the whole call
            return self._read_result(task, state)

    def _read_result(self, task: int, state: JobState) -> Any:
        outcome = self._outcome(task)
        if outcome is not None:
            kind, value = outcome
            if kind == "success":
                return value
            raise JobFailedError(
                f"Job {self.job_id} (task {task}) on {self.cluster.name} raised on the cluster:\n"
                f"{value}",
                job_id=self.job_id,
                remote_traceback=value,
            )
        tail = self.stderr(task)[-STDERR_TAIL:]
        if state is JobState.CANCELLED:
            raise JobCancelledError(
                f"Job {self.job_id} on {self.cluster.name} was cancelled before it produced a "
                "result. Resubmit it if that was not intended.",
                job_id=self.job_id,
                stderr_tail=tail,
            )
        if state is JobState.TIMEOUT:
            raise JobTimeLimitError(
                f"Job {self.job_id} on {self.cluster.name} {self._ran_out_of_time()} Last "
                f"lines of its stderr:\n{tail or '(empty)'}",
                job_id=self.job_id,
                stderr_tail=tail,
            )
        why = "killed, out of memory, time limit or node failure"
        if disk_full(tail) or self._folder_nearly_full():
            why = "it could not write its result: the disk or quota of its job folder is full"
        elif said := self._scheduler_words():  # asked only when the disk does not explain it
            why = said
        ended = f"ended {state.value} without a result ({why})."
        raise JobLostError(
            f"Job {self.job_id} on {self.cluster.name} {ended} Last lines of its stderr:\n"
            f"{tail or '(empty)'}",
            job_id=self.job_id,
            stderr_tail=tail,
        )

    def _details(self) -> JobDetails | None:
        """The scheduler's record of this job (None where it has none to give): asked only
        on the failure path, for its limit, reason and exit code."""

        try:
            return self.cluster.scheduler.job_details(self.job_id)
        except (HpcuiError, NotImplementedError, OSError) as exc:
            log.debug("no scheduler details for job %s: %s", self.job_id, exc)
            return None

    def _ran_out_of_time(self) -> str:
        """ "ran out of its time limit (3:00); ask for more ..." with the limit the scheduler
        held the job to (asked of it: a job found again has no request at hand)."""

        details = self._details()
        seconds = details.time_limit_s if details is not None else None
        limit = f" ({clock_duration(seconds)})" if seconds else ""
        return (
            f"ran out of its time limit{limit}; ask for more with time=..., or make it stop "
            "itself with hpcui.distributed.stop_requested()."
        )

    def _scheduler_words(self) -> str:
        """The scheduler's own reason and exit code for a job that left no result (a job
        that never started has an empty stderr: these are all there is); "" if it has none."""

        details = self._details()
        if details is None:
            return ""
        name = self.cluster.scheduler.name
        return scheduler_words(details, {"slurm": "Slurm", "pbs": "PBS"}.get(name, name))

    def _folder_nearly_full(self) -> bool:
        """Less than 1 MiB free where the job writes (asked only for a job that left no
        result: a full disk can swallow the result and the stderr that would say so)."""
        free = self.cluster.transport.free_bytes(self.folder)
        return free is not None and free < 1024 * 1024

    # -- logs ------------------------------------------------------------------------------

    def _log(self, task: int, stream: Stream) -> str:
        return self._text(self.paths.log(task, stream))

    def stdout(self, task: int = 0) -> str:
        return self._log(task, "stdout")

    def stderr(self, task: int = 0) -> str:
        return self._log(task, "stderr")


class JobList(list[Job]):
    """What `map` returns: a plain list of its jobs that a notebook shows live as one panel
    (states counted, the first errors at the end)."""

    @property
    def jobs(self) -> list[Job]:
        """Its array tasks, as a packed map's CallList names them (one call each here)."""
        return list(self)

    def _ipython_display_(self) -> None:
        from hpcui.live import show  # only where a notebook shows a job

        show(self)


def kept_result_path(cache: Path, folder: str, job_id: str, task: int) -> Path:
    """Where this machine keeps a fetched result: by job folder (the submission's token)."""
    return cache / PurePosixPath(folder).name / result_name(job_id, str(task))


def _unpickle(data: bytes, job_id: str, what: str) -> tuple[str, Any]:
    try:
        kind, value = pickle.loads(data)
    except ImportError as exc:  # whole and signed: an object of a module missing here
        module = getattr(exc, "name", None) or str(exc)
        top = module.split(".")[0]
        raise ResultNeedsModuleError(
            f"The result of job {job_id} ({what}) holds an object of the module "
            f"{module!r}, which this Python ({sys.executable}) cannot import. The result "
            f"is whole and kept: install it here (`pip install {top}`, the version the "
            "job used) and read it again, or return plain types from the function "
            "(numbers, lists, dicts; a tensor's .tolist(), a DataFrame's .to_dict()).",
            job_id=job_id,
            module=module,
        ) from exc
    except AttributeError as exc:  # the module is here, in another version
        raise ResultNeedsModuleError(
            f"The result of job {job_id} ({what}) holds an object this Python's modules "
            f"do not have ({exc}): the job ran with another version of that module. The "
            "result is whole and kept: install the version the job used here and read it "
            "again, or return plain types from the function.",
            job_id=job_id,
        ) from exc
    except Exception as exc:  # truncated or not submitit's (kind, value) pair
        raise ResultIntegrityError(
            f"The result of job {job_id} ({what}) cannot be read: {exc}. The file is "
            "damaged (a full disk or quota while the job wrote it?); resubmit the job.",
            job_id=job_id,
        ) from exc
    return kind, value


def _keep(path: Path, data: bytes) -> None:
    """A private local copy, written whole (a reader never sees half of it)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:  # a full local disk must not fail result(): the copy is a convenience
        log.warning("could not keep a local copy of %s", path.name, exc_info=True)
