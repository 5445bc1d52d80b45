"""Any job of the user, hpcui's or not (turm's whole point): its logs followed from the
paths the scheduler reports, and its batch script edited and submitted again.

hpcui's own jobs keep their logs in their job folder (``hpcui.logs``); every other job's
logs are wherever its script said (``#SBATCH -o``), which only the scheduler knows while it
remembers the job (``Scheduler.job_details``)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from hpcui import log_push
from hpcui import logs as _logs
from hpcui.backends.records import JobDetails
from hpcui.backends.states import JobState
from hpcui.cluster_parts import ClusterParts
from hpcui.errors import UsageError
from hpcui.submission import base_word
from hpcui.transport.quoting import quote_argv, quote_bytes

if TYPE_CHECKING:
    from hpcui.config import ClusterConfig


class Cluster(ClusterParts, Protocol):
    """What this module needs of `hpcui.cluster.Cluster` (which imports it)."""

    config: ClusterConfig

    def job_details(self, job_id: str) -> JobDetails: ...


#: how often following asks the scheduler whether the job ended (one squeue/sacct)
STATE_POLL_S = 5.0
#: how often following a pending job asks whether it started (its first lines wait on it)
PENDING_POLL_S = 1.0


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


def follow_logs(
    cluster: Cluster,
    job: str | JobDetails,
    stream: _logs.Stream = "stdout",
    *,
    follow: bool = False,
    tail_bytes: int | None = None,
    timeout: float | None = None,
    spool_dir: Path | None = None,
    until: Callable[[], bool] | None = None,
) -> Iterator[_logs.LogChunk]:
    """A job's log as it appears, like `Cluster.logs` for hpcui's own jobs (one rank: the
    batch script's output; srun steps write where their own ``-o`` says), pushed by a
    reader on the login node unless the profile says `log_follow = "poll"`.

    A pending job's file, if there is one, is an older job's (a fixed ``-o train.log``):
    nothing is read before the job starts (Slurm truncates it then), and the local spool
    is the job's own, not the path's. `job`: its id, or the details the caller fetched."""
    details = job if isinstance(job, JobDetails) else cluster.job_details(job)
    path = log_path(details, stream)
    if details.state is JobState.PENDING:
        if not follow:
            return iter(())
        return _after_start(
            cluster, details, stream, tail_bytes=tail_bytes, timeout=timeout,
            spool_dir=spool_dir, until=until,
        )  # fmt: skip
    return _follow(
        cluster, details, path, stream, follow=follow, tail_bytes=tail_bytes,
        timeout=timeout, spool_dir=spool_dir, until=until,
    )  # fmt: skip


def _follow(
    cluster: Cluster,
    details: JobDetails,
    path: str,
    stream: _logs.Stream,
    *,
    follow: bool,
    tail_bytes: int | None,
    timeout: float | None,
    spool_dir: Path | None,
    until: Callable[[], bool] | None,
) -> Iterator[_logs.LogChunk]:
    spool = None
    if spool_dir is not None:
        stamp = details.submit_time.isoformat() if details.submit_time else ""
        spool = _logs.spool_path(spool_dir, f"{path}\0{details.job_id}\0{stamp}")
    follower = _logs.LogFollower(cluster.transport, path, tail_bytes=tail_bytes, spool=spool)
    done = None
    if follow:  # `until` (the app: its screen was left) ends it early, never later
        ended = _ended(cluster, details)
        done = ended if until is None else (lambda: until() or ended())
        if cluster.config.log_follow == "push":
            return log_push.follow_pushed({0: follower}, done, stream=stream, timeout=timeout)
    return _logs.follow_many({0: follower}, done, stream=stream, timeout=timeout)


def _after_start(
    cluster: Cluster,
    details: JobDetails,
    stream: _logs.Stream,
    *,
    tail_bytes: int | None,
    timeout: float | None,
    spool_dir: Path | None,
    until: Callable[[], bool] | None,
) -> Iterator[_logs.LogChunk]:
    """Follow once the scheduler says the job left the queue (asked every PENDING_POLL_S)."""
    ends = None if timeout is None else time.monotonic() + timeout
    while details.state is JobState.PENDING:
        if until is not None and until():
            return
        if ends is not None and time.monotonic() >= ends:
            raise _logs.LogTimeout(
                f"Job {details.job_id} was still pending after {timeout} s: its log has not "
                "begun. Follow again later, or see why with `hpcui show`."
            )
        time.sleep(PENDING_POLL_S)
        try:
            details = cluster.job_details(details.job_id)
        except UsageError:  # forgotten while we waited: cancelled long ago
            return
    left = None if ends is None else max(0.0, ends - time.monotonic())
    yield from _follow(
        cluster, details, log_path(details, stream), stream, follow=True,
        tail_bytes=tail_bytes, timeout=left, spool_dir=spool_dir, until=until,
    )  # fmt: skip


def _ended(cluster: Cluster, details: JobDetails) -> Callable[[], bool]:
    """True once the scheduler calls the job final or forgets it; asked every STATE_POLL_S
    (the first answer is `details`, just fetched)."""
    job_id = details.job_id
    last = {"at": time.monotonic(), "ended": details.state.is_final}

    def ended() -> bool:
        now = time.monotonic()
        if not last["ended"] and now - last["at"] >= STATE_POLL_S:
            last["at"] = now
            try:  # scontrol knows a job from submit on; sacct may not list it yet
                last["ended"] = cluster.job_details(job_id).state.is_final
            except UsageError:  # forgotten by the controller: long over
                last["ended"] = True
        return bool(last["ended"])

    return ended


def resubmit(cluster: Cluster, script: str, *, work_dir: str, name: str = "job") -> str:
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
        f'd={base_word(cluster.config.remote_base)}/resubmitted && mkdir -p "$d" && cd "$d" && '
        f"umask 077 && cat > {quote_bytes(file_name).decode()} && pwd"
    )
    res = cluster.transport.run(store, stdin=script.encode()).check("storing the script")
    path = f"{res.stdout.strip()}/{file_name}"
    submit = cluster.scheduler.submit_command(path)
    submit_line = submit if isinstance(submit, str) else quote_argv(submit).decode()
    res = cluster.transport.run(f"cd {quote_bytes(work_dir).decode()} && {submit_line}")
    if not res.ok:
        said = " ".join((res.stderr.strip() or res.stdout.strip()).split())[-600:]
        raise UsageError(
            f"The scheduler refused the edited script: {said or '(no output)'}. Fix it and "
            f"submit again (it is kept at {path} on {cluster.name})."
        )
    return cluster.scheduler.parse_submit(res.stdout)
