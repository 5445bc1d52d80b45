"""Any job of the user, hpcui's or not: `OtherJob`, the handle for a
job hpcui did not submit — its logs followed from the paths the scheduler reports, its
control, its batch script edited and submitted again. `Cluster.job(ref)` decides, in one
place, whether an id is hpcui's `Job` or such a handle.

hpcui's own jobs keep their logs in their job folder (``hpcui.logs.follow``); every other job's
logs are wherever its script said (``#SBATCH -o``), which only the scheduler knows while it
remembers the job (``Scheduler.job_details``)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from hpcui.backends.nodelist import expand_nodelist
from hpcui.backends.records import JobDetails
from hpcui.backends.states import JobState
from hpcui.common.units import parse_time
from hpcui.errors import UsageError
from hpcui.logs import follow as _logs
from hpcui.logs import push as log_push
from hpcui.schedulers.base import Scheduler
from hpcui.store.remote import base_word
from hpcui.transport.base import TerminalChannel, Transport
from hpcui.transport.quoting import quote_bytes, to_command

#: how often following asks the scheduler whether the job ended (one squeue/sacct)
STATE_POLL_S = 5.0
#: how often following a pending job asks whether it started (its first lines wait on it)
PENDING_POLL_S = 1.0
#: after the start, how long (and how often) to wait for Slurm to truncate a fixed -o file
TRUNCATE_WAIT_S, TRUNCATE_POLL_S = 30.0, 0.25


def log_path(details: JobDetails, stream: _logs.Stream) -> str:
    """The file the job writes `stream` to; a clear error for a job that has none."""
    path = details.stdout if stream == "stdout" else details.stderr
    if not path:
        raise UsageError(
            f"Job {details.job_id} has no {stream} file the scheduler knows of"
            + (
                " (an interactive srun/salloc job writes to its terminal)."
                if not details.batch
                else "."
            )
        )
    if not path.startswith("/"):
        path = f"{details.work_dir.rstrip('/')}/{path}"
    return path


class OtherJob:
    """A job of the user that hpcui did not submit (a plain sbatch/qsub job): what the
    scheduler said of it (`details`, fetched once by `Cluster.job`) and what can be done
    with it. It talks to the transport and the scheduler only; `changed` tells the cluster
    that its state moves (fast polling, the queue refreshed). A
    `hpcui.jobs.handle.JobHandle`, as hpcui's `Job` is."""

    hpcui_job = False
    #: one task as far as hpcui knows: its batch script's output is its log
    num_tasks = 1

    def __init__(
        self,
        details: JobDetails,
        *,
        cluster: str,
        transport: Transport,
        scheduler: Scheduler,
        log_follow: str = "push",
        spool_dir: Path | None = None,
        changed: Callable[[list[str]], None] | None = None,
    ) -> None:
        self.details = details
        self.cluster_name = cluster
        self.transport = transport
        self.scheduler = scheduler
        self.log_follow = log_follow
        self.spool_dir = spool_dir
        self._changed = changed or (lambda ids: None)

    def __repr__(self) -> str:
        return f"OtherJob({self.cluster_name}:{self.job_id}, {self.state.value})"

    @property
    def job_id(self) -> str:
        return self.details.job_id

    @property
    def state(self) -> JobState:
        """As the scheduler said when this handle was made or last refreshed."""
        return self.details.state

    @property
    def folder(self) -> str:
        """Where its files are: its working directory."""
        return self.details.work_dir

    @property
    def name(self) -> str:
        return self.details.name

    @property
    def reason(self) -> str:
        """Why it waits, in the scheduler's words, when this handle was made or refreshed."""
        return self.details.reason

    def refresh(self) -> JobDetails:
        self.details = self.scheduler.job_details(self.job_id)
        return self.details

    def batch_script(self) -> str:
        """The script it was submitted with (Slurm keeps it while it knows the job)."""
        return self.scheduler.batch_script(self.job_id)

    # -- control ---------------------------------------------------------------------------

    def _control(self, verb: Callable[[list[str]], None]) -> None:
        verb([self.job_id])
        self._changed([self.job_id])

    def cancel(self) -> None:
        self._control(self.scheduler.cancel)

    def hold(self) -> None:
        self._control(self.scheduler.hold)

    def release(self) -> None:
        self._control(self.scheduler.release)

    def requeue(self) -> None:
        self._control(self.scheduler.requeue)

    def set_time_limit(self, time_limit: str | int) -> None:
        seconds = time_limit_seconds(time_limit)
        self._control(lambda ids: self.scheduler.set_time_limit(ids[0], seconds))

    def open_shell(
        self,
        *,
        node: str | None = None,
        term: str = "xterm-256color",
        cols: int = 80,
        rows: int = 24,
    ) -> TerminalChannel:
        return open_shell(
            self.transport, self.scheduler, self.refresh(), node=node, term=term, cols=cols,
            rows=rows,
        )  # fmt: skip

    # -- logs --------------------------------------------------------------------------------

    def logs(
        self,
        stream: _logs.Stream = "stdout",
        rank: int | None = None,
        *,
        follow: bool = False,
        tail_bytes: int | None = None,
        timeout: float | None = None,
        spool: bool = True,
        until: Callable[[], bool] | None = None,
    ) -> Iterator[_logs.LogChunk]:
        """Its log as it appears, like `Job.logs` (one rank: the batch script's output;
        srun steps write where their own ``-o`` says), pushed by a reader on the login node
        unless the profile says `log_follow = "poll"`.

        A pending job's file, if there is one, is an older job's (a fixed ``-o train.log``):
        nothing is read before the job starts (Slurm truncates it then), and the local spool
        is the job's own, not the path's."""
        if rank not in (None, 0):
            raise UsageError(f"Job {self.job_id} is not an hpcui job: it has no ranks.")
        spool_dir = self.spool_dir if spool else None
        path = log_path(self.details, stream)
        if self.details.state is JobState.PENDING:
            if not follow:
                return iter(())
            return self._after_start(stream, tail_bytes, timeout, spool_dir, until)
        return self._follow(path, stream, follow, tail_bytes, timeout, spool_dir, until)

    def _follow(
        self,
        path: str,
        stream: _logs.Stream,
        follow: bool,
        tail_bytes: int | None,
        timeout: float | None,
        spool_dir: Path | None,
        until: Callable[[], bool] | None,
    ) -> Iterator[_logs.LogChunk]:
        details = self.details
        spool = None
        if spool_dir is not None:
            stamp = details.submit_time.isoformat() if details.submit_time else ""
            spool = _logs.spool_path(spool_dir, f"{path}\0{details.job_id}\0{stamp}")
        follower = _logs.LogFollower(self.transport, path, tail_bytes=tail_bytes, spool=spool)
        done = None
        if follow:  # `until` (the app: its screen was left) ends it early, never later
            ended = self._ended()
            done = ended if until is None else (lambda: until() or ended())
        return log_push.read_or_follow(
            {0: follower}, done, mode=self.log_follow, stream=stream, timeout=timeout
        )

    def _after_start(
        self,
        stream: _logs.Stream,
        tail_bytes: int | None,
        timeout: float | None,
        spool_dir: Path | None,
        until: Callable[[], bool] | None,
    ) -> Iterator[_logs.LogChunk]:
        """Follow once the scheduler says the job left the queue (asked every PENDING_POLL_S)
        and the file there is its own (`_stale_until_truncated`)."""
        ends = None if timeout is None else time.monotonic() + timeout
        stale = self._file_stamp(log_path(self.details, stream))
        while self.details.state is JobState.PENDING:
            if until is not None and until():
                return
            if ends is not None and time.monotonic() >= ends:
                raise _logs.LogTimeout(
                    f"Job {self.job_id} was still pending after {timeout} s: its log has not "
                    "begun. Follow again later, or see why with `hpcui show`."
                )
            time.sleep(PENDING_POLL_S)
            try:
                self.refresh()
            except UsageError:  # forgotten while we waited: cancelled long ago
                return
        path = log_path(self.details, stream)
        if stale:
            self._stale_until_truncated(path, stale, ends, until)
        left = None if ends is None else max(0.0, ends - time.monotonic())
        yield from self._follow(path, stream, True, tail_bytes, left, spool_dir, until)

    def _file_stamp(self, path: str) -> str:
        """The file's modification time to the nanosecond; "" where there is none."""
        res = self.transport.run(["stat", "-c", "%y %s", path])
        return res.stdout.strip() if res.ok else ""

    def _stale_until_truncated(
        self, path: str, stale: str, ends: float | None, until: Callable[[], bool] | None
    ) -> None:
        """Slurm truncates a fixed `-o` file when the batch step starts, a moment after
        the queue says RUNNING (seconds on a busy node): until the file changes, what it
        holds is the older job's. Waits at most TRUNCATE_WAIT_S (a job that writes
        nothing to a file already empty never changes it)."""
        limit = time.monotonic() + TRUNCATE_WAIT_S
        while self._file_stamp(path) == stale:
            now = time.monotonic()
            if now >= limit or (ends is not None and now >= ends) or (until and until()):
                return
            time.sleep(TRUNCATE_POLL_S)

    def _ended(self) -> Callable[[], bool]:
        """True once the scheduler calls the job final or forgets it; asked every
        STATE_POLL_S (the first answer is the details in hand)."""
        last = {"at": time.monotonic(), "ended": self.details.state.is_final}

        def ended() -> bool:
            now = time.monotonic()
            if not last["ended"] and now - last["at"] >= STATE_POLL_S:
                last["at"] = now
                try:  # scontrol knows a job from submit on; sacct may not list it yet
                    last["ended"] = self.scheduler.job_details(self.job_id).state.is_final
                except UsageError:  # forgotten by the controller: long over
                    last["ended"] = True
            return bool(last["ended"])

        return ended


def time_limit_seconds(time_limit: str | int) -> int:
    """A new time limit in seconds (`"2:00:00"`, `"90m"`, seconds), or a clear UsageError."""
    try:
        seconds = parse_time(time_limit)
    except ValueError:
        seconds = None
    if not seconds:
        raise UsageError(f"Not a time limit: {time_limit!r} (e.g. 2:00:00, 90m, 1-12:00:00).")
    return seconds


def open_shell(
    transport: Transport,
    scheduler: Scheduler,
    details: JobDetails,
    *,
    node: str | None = None,
    term: str = "xterm-256color",
    cols: int = 80,
    rows: int = 24,
) -> TerminalChannel:
    """An interactive shell inside a running job (srun --overlap --pty): the channel the
    caller bridges to its terminal. UsageError while the job does not run."""
    job_id = details.job_id
    if details.state is not JobState.RUNNING:
        raise UsageError(
            f"Job {job_id} is {details.state.value}: a shell needs a running job"
            + (" (wait for it to start)." if not details.state.is_final else ".")
        )
    if node and details.nodelist and node not in expand_nodelist(details.nodelist):
        raise UsageError(f"Job {job_id} does not run on {node} (its nodes: {details.nodelist}).")
    script = scheduler.shell_script(job_id, node)
    return transport.open_terminal(script, term=term, cols=cols, rows=rows)


def resubmit(
    cluster: str,
    remote_base: str,
    transport: Transport,
    scheduler: Scheduler,
    script: str,
    *,
    work_dir: str,
    name: str = "job",
) -> str:
    """Submit `script` (an edited batch script) from `work_dir`, as the user would with
    sbatch/qsub there. The script is kept in ``<remote_base>/resubmitted/`` (it must outlive
    the job: Slurm reads it at submit, PBS copies it). Returns the new job id."""
    if not script.startswith("#!"):
        raise UsageError(
            "A batch script must start with an interpreter line such as `#!/bin/bash`: "
            "add it and submit again."
        )
    if not work_dir.startswith("/"):
        raise UsageError(f"The working directory must be an absolute path, got {work_dir!r}.")
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:40] or "job"
    file_name = f"{stamp}-{safe}-{secrets.token_hex(3)}.sh"
    store = (
        f'd={base_word(remote_base)}/resubmitted && mkdir -p "$d" && cd "$d" && '
        f"umask 077 && cat > {quote_bytes(file_name).decode()} && pwd"
    )
    res = transport.run(store, stdin=script.encode()).check("storing the script")
    path = f"{res.stdout.strip()}/{file_name}"
    submit = scheduler.submit_command(path)
    submit_line = to_command(submit).decode()
    res = transport.run(f"cd {quote_bytes(work_dir).decode()} && {submit_line}")
    if not res.ok:
        said = " ".join((res.stderr.strip() or res.stdout.strip()).split())[-600:]
        raise UsageError(
            f"The scheduler refused the edited script: {said or '(no output)'}. Fix it and "
            f"submit again (it is kept at {path} on {cluster})."
        )
    return scheduler.parse_submit(res.stdout)
