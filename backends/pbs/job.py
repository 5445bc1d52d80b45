"""PbsJob, and the one builder that turns a job's ``qstat -f`` attributes into it.

JSON and text outputs both reduce to the JSON shape (``Resource_List`` and
``resources_used`` as nested dicts) before reaching ``job_from_attrs``, so every form
decodes states, exit statuses, times and hosts the same way.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from pydantic import Field

from hpcui.backends.model import Model
from hpcui.backends.pbs.dialect import PbsDialect, decode_exit_status, pbs_state
from hpcui.backends.records import JobDetails
from hpcui.backends.required_fields import require
from hpcui.backends.scheduler_text import duration_s
from hpcui.backends.states import JobState


class PbsJob(Model):
    """One job as qstat reports it: normalized fields, with PBS's own words beside them."""

    job_id: str
    name: str | None = None
    owner: str | None = None  # user part of Job_Owner (``user@submithost``)
    queue: str | None = None
    state: JobState
    state_raw: str  # the job_state letter
    exit_status: int | None = None  # Exit_status as PBS wrote it (see decode_exit_status)
    exit_code: int | None = None  # the job script's exit code, when it returned one
    signal: int | None = None  # the signal that ended it, when one did
    resources_requested: dict[str, str] = Field(default_factory=dict)  # Resource_List
    resources_used: dict[str, str] = Field(default_factory=dict)  # resources_used
    exec_host: str | None = None
    nodes: list[str] = Field(default_factory=list)  # hosts, first (rank 0) first
    walltime_limit_s: int | None = None
    walltime_used_s: int | None = None
    ctime: datetime | None = None  # created; PBS prints the server's local time, no zone
    qtime: datetime | None = None  # entered its current queue
    stime: datetime | None = None  # started
    mtime: datetime | None = None  # last modified
    comment: str | None = None
    array_index: int | None = None  # set for a subjob ``1234[7].server``
    output_path: str | None = None  # Output_Path without its ``host:`` part
    error_path: str | None = None
    work_dir: str | None = None  # PBS_O_WORKDIR of Variable_List
    keep_files: str | None = None  # Keep_Files: "n", or o/e (kept on the host), d (direct)
    token: str | None = None  # HPCUI_TOKEN of Variable_List: hpcui submitted it


def job_from_attrs(job_id: str, attrs: dict[str, Any], dialect: PbsDialect) -> PbsJob:
    """Build a PbsJob from one job's attributes; odd or missing values become None, but
    a job without its state is refused, naming it (another layout)."""
    require(attrs, ("job_state",), f"PBS's record of job {job_id}")
    requested, used = _strs(attrs.get("Resource_List")), _strs(attrs.get("resources_used"))
    letter = str(attrs.get("job_state", "")).strip()
    status = _int(attrs.get("Exit_status", attrs.get("exit_status")))
    state = pbs_state(letter, status, dialect=dialect)
    exit_code = sig = None
    if status is not None:
        _, exit_code, sig = decode_exit_status(status, dialect=dialect)
    limit, spent = duration_s(requested.get("walltime")), duration_s(used.get("walltime"))
    if state is JobState.CANCELLED and sig and limit and spent is not None and spent >= limit:
        state = JobState.TIMEOUT  # killed at its walltime: PBS Pro before 2020 reports 271
    comment = _str(attrs.get("comment")) or ""
    if state is JobState.FAILED and _DELETED_BY.search(comment):
        # qdel'd while its shell passed SIGTERM on (Exit_status 143 = 128 + 15, not 271):
        # OpenPBS 23.06's comment names who deleted it ("... and terminated by user@host")
        state = JobState.CANCELLED
    when = {k: _when(attrs.get(k)) for k in ("ctime", "qtime", "stime", "mtime")}
    if dialect == "slurm-torque-wrapper":  # it prints Slurm's submit/start/end times
        when = {"ctime": when["qtime"], "qtime": when["qtime"], "stime": when["mtime"]}
    elif when["stime"] is None:
        when["stime"] = _when(attrs.get("start_time"))  # Torque's name for it
    if when["stime"] is None and state is JobState.PENDING:
        # the scheduler's estimate for a queued job, where the server computes one
        # (est_start_time_freq): JSON nests it, text flattens it to estimated.start_time
        est = attrs.get("estimated")
        raw = est.get("start_time") if isinstance(est, dict) else attrs.get("estimated.start_time")
        when["stime"] = _when(raw)
    exec_host = _str(attrs.get("exec_host"))
    return PbsJob(
        job_id=job_id,
        name=_str(attrs.get("Job_Name")),
        owner=(_str(attrs.get("Job_Owner")) or "").split("@")[0] or None,
        queue=_str(attrs.get("queue")),
        state=state,
        state_raw=letter,
        exit_status=status,
        exit_code=exit_code,
        signal=sig,
        resources_requested=requested,
        resources_used=used,
        exec_host=exec_host,
        nodes=_nodes(exec_host, _str(attrs.get("exec_vnode"))),
        walltime_limit_s=limit,
        walltime_used_s=spent,
        comment=_str(attrs.get("comment")),
        array_index=array_index(job_id),
        output_path=_path(attrs.get("Output_Path")),
        error_path=_path(attrs.get("Error_Path")),
        work_dir=_workdir(attrs.get("Variable_List")),
        token=_variable(attrs.get("Variable_List"), "HPCUI_TOKEN"),
        keep_files=_str(attrs.get("Keep_Files")),
        **when,
    )


#: the comment PBS writes on a job that qdel ended (a walltime kill says "exceeded")
_DELETED_BY = re.compile(r"\bterminated by \S+@\S+")


def array_index(job_id: str) -> int | None:
    """7 for a subjob ``1234[7].server``; None for parents and plain jobs."""
    m = re.match(r"\d+\[(\d+)\]", job_id)
    return int(m[1]) if m else None


def _nodes(exec_host: str | None, exec_vnode: str | None) -> list[str]:
    """Hosts in order of first use: exec_host ``a/0*2+b/0*2`` (PBS Pro), ``a/0-3+b/0``
    (Torque), else exec_vnode ``(a:ncpus=2)+(b:ncpus=2)``; vnode chunks may nest."""
    if exec_host:
        names = [part.split("/")[0] for part in exec_host.split("+")]
    elif exec_vnode:
        names = [part.strip("() ").split(":")[0] for part in exec_vnode.split("+")]
    else:
        return []
    return list(dict.fromkeys(n for n in names if n))


_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}


def _when(value: Any) -> datetime | None:
    """``Tue Oct  4 21:23:20 2022`` (ctime(3), English in every locale) -> naive datetime;
    a site qstat's ``1664911400 (Tue Oct  4 21:23:20 2022)`` reads its ctime part."""
    text = str(value).strip()
    if text.endswith(")") and "(" in text and text.split("(", 1)[0].strip().isdigit():
        text = text[text.index("(") + 1 : -1]
    try:
        _, month, day, clock, year = text.split()
        hour, minute, second = map(int, clock.split(":"))
        return datetime(int(year), _MONTHS[month], int(day), hour, minute, second)
    except (ValueError, KeyError):
        return None


def _strs(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _path(value: Any) -> str | None:
    """``login1.cluster:/home/u/job.o123`` -> the path (PBS prefixes the submit host)."""
    text = _str(value)
    if not text:
        return None
    _host, sep, path = text.partition(":")
    return path if sep and path.startswith("/") else text


def _workdir(value: Any) -> str | None:
    return _variable(value, "PBS_O_WORKDIR")


def _variable(value: Any, name: str) -> str | None:
    """One variable of Variable_List: a JSON object (PBS Pro) or ``A=1,B=2`` text."""
    if isinstance(value, dict):
        return _str(value.get(name))
    match = re.search(rf"(?:^|,){name}=([^,]*)", _str(value) or "")
    return match.group(1) if match else None


def details(job_id: str, job: PbsJob) -> JobDetails:
    """`scontrol show job`'s record for a PBS job (`hpcui show`)."""
    return JobDetails(
        job_id=job_id,
        name=job.name or "",
        user=job.owner or "",
        state=job.state,
        state_raw=job.state_raw,
        reason=job.comment or "",
        exit_code="" if job.exit_status is None else str(job.exit_status),
        partition=job.queue or "",
        work_dir=job.work_dir or "",
        stdout=job.output_path or "",
        stderr=job.error_path or "",
        batch_host=job.nodes[0] if job.nodes else "",
        nodelist=",".join(job.nodes),
        time_limit_s=job.walltime_limit_s,
        submit_time=job.ctime,
        start_time=job.stime,
        log_note=_spooled_note(job),
    )


def _spooled_note(job: PbsJob) -> str:
    """PBS keeps a job's stdout/stderr in the execution host's spool and copies them to
    Output_Path/Error_Path when it ends, unless Keep_Files has `d` (direct write)."""
    keep = job.keep_files
    if keep is None or "d" in keep or job.state.is_final:
        return ""
    return (
        f"PBS keeps this job's output on its execution host until it ends (Keep_Files={keep}): "
        "its log appears when the job ends. Submit with `qsub -k oed` to have it written "
        "in place as it runs."
    )
