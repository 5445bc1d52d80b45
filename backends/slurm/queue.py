"""Slurm queue, accounting and partition state: the command lines and their parsers.

Each command line is built here, next to the parser of its output, and both read the
same field tuple (``SQUEUE_FIELDS``, ``SACCT_FIELDS``, ``SINFO_FIELDS``), so they cannot
drift apart. The parsers take the tuple as an argument too, which is how the verbatim
captures in tests/fixtures (taken with other field lists) are read.

Why ``squeue -O 'Field:|,...'``: ``squeue --json`` changed shape in 21.08/22.05, 23.02
and 23.11 and ignored filters before 23.02, while the ``-O`` names have held from 20.11
to 25.x (matched case-insensitively). ``Field:|`` means width 0 (printed in full, never
truncated) with ``|`` appended, so every line ends in ``|``. ``-O`` and not ``-o``
because only ``-O`` has ``tres-alloc`` and ``tres-per-job``, needed to count GPUs
however they were requested. ``--array`` prints one line per array task (no
``123_[4-99]`` ranges, no truncated task lists); ``--states=all`` keeps recently ended
jobs, the fallback where accounting is off. Comment is last: a ``|`` in it stays in it.

Why sacct without ``-X``: MaxRSS and TotalCPU are measured per step; the allocation's
own line has no MaxRSS, and whether its TotalCPU includes the steps' is not something to
rely on. One call returns the allocation and its steps, and ``parse_sacct`` folds the
steps into one AccountingEntry (largest MaxRSS; the larger of the line's TotalCPU and
the steps' sum).

Timestamps: commands run under ``env SLURM_TIME_FORMAT=standard`` because a user's own
setting (``relative``, a strftime format) would change them. They are the cluster's
local time and are returned naive.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from hpcui.backends.records import AccountingEntry, PartitionInfo, QueueEntry
from hpcui.backends.scheduler_text import parse_duration, parse_mem
from hpcui.backends.slurm.jobids import parse_job_id
from hpcui.backends.states import JobState

_NO_TIME = {"", "N/A", "UNKNOWN", "NONE", "(NULL)"}
_NO_TEXT = {"", "N/A", "n/a", "(null)", "None", "None assigned"}

_ENV = ("env", "SLURM_TIME_FORMAT=standard")
E = TypeVar("E", bound=QueueEntry)
A = TypeVar("A", bound=AccountingEntry)
#: what an AccountingEntry knows beyond a QueueEntry (None where only squeue answered)
_USAGE = tuple(k for k in AccountingEntry.model_fields if k not in QueueEntry.model_fields)
_SEP = "|"

# Slurm's field name -> record key. The keys of each dict, in order, are the field list.
_SQUEUE = {
    "JobID": "job",
    "ArrayJobID": "array_job",
    "ArrayTaskID": "array_task",
    "HetJobID": "het_job",
    "HetJobOffset": "het_offset",
    "Name": "name",
    "UserName": "user",
    "State": "state",
    "Reason": "reason",
    "Partition": "partition",
    "QOS": "qos",
    "Account": "account",
    "NumNodes": "nodes",
    "NodeList": "nodelist",
    "tres-alloc": "tres",  # allocated TRES, or the requested ones while pending
    "tres-per-node": "tres_per_node",  # --gres / --gpus-per-node
    "tres-per-job": "tres_per_job",  # --gpus
    "TimeUsed": "elapsed",
    "TimeLimit": "time_limit",
    "SubmitTime": "submit_time",
    "StartTime": "start_time",  # expected start while pending
    "Comment": "comment",
}
_SACCT = {
    "JobID": "job",
    "JobName": "name",
    "User": "user",
    "Account": "account",
    "Partition": "partition",
    "QOS": "qos",
    "State": "state",
    "ExitCode": "exit_code",
    "Elapsed": "elapsed",
    "Timelimit": "time_limit",
    "Submit": "submit_time",
    "Start": "start_time",
    "End": "end_time",
    "NNodes": "nodes",
    "NodeList": "nodelist",
    "AllocTRES": "tres",
    "TotalCPU": "cpu_time",
    "MaxRSS": "max_rss",
    "Comment": "comment",
}
SQUEUE_FIELDS: tuple[str, ...] = tuple(_SQUEUE)
_SQUEUE_KEYS: tuple[str, ...] = tuple(_SQUEUE.values())  # `_queue_values`'s arguments
SACCT_FIELDS: tuple[str, ...] = tuple(_SACCT)
# partition, avail, time limit, nodes A/I/O/T, CPUs A/I/O/T, gres, nodelist
SINFO_FIELDS: tuple[str, ...] = ("%P", "%a", "%l", "%F", "%C", "%G", "%N")

# ---------------------------------------------------------------------------- states

_JS = JobState
_STATES: dict[str, JobState] = {
    **dict.fromkeys(("PENDING", "PD"), _JS.PENDING),
    **dict.fromkeys(("RUNNING", "R"), _JS.RUNNING),
    **dict.fromkeys(("SUSPENDED", "S"), _JS.SUSPENDED),
    **dict.fromkeys(("COMPLETED", "CD"), _JS.COMPLETED),
    **dict.fromkeys(("CANCELLED", "CA"), _JS.CANCELLED),
    **dict.fromkeys(("FAILED", "F"), _JS.FAILED),
    **dict.fromkeys(("TIMEOUT", "TO"), _JS.TIMEOUT),
    **dict.fromkeys(("NODE_FAIL", "NF"), _JS.NODE_FAIL),
    **dict.fromkeys(("PREEMPTED", "PR"), _JS.PREEMPTED),
    **dict.fromkeys(("OUT_OF_MEMORY", "OOM"), _JS.OUT_OF_MEMORY),
    **dict.fromkeys(("COMPLETING", "CG"), _JS.COMPLETING),
    **dict.fromkeys(("REQUEUED", "RQ"), _JS.REQUEUED),
    # The rest have no word of their own in hpcui; each maps to what it means for the user.
    **dict.fromkeys(("BOOT_FAIL", "BF"), _JS.NODE_FAIL),  # nodes failed to boot
    **dict.fromkeys(("DEADLINE", "DL"), _JS.TIMEOUT),  # killed at its --deadline
    **dict.fromkeys(("CONFIGURING", "CF"), _JS.RUNNING),  # allocated, nodes booting
    **dict.fromkeys(("RESIZING", "RS"), _JS.RUNNING),
    **dict.fromkeys(("SIGNALING", "SI"), _JS.RUNNING),
    **dict.fromkeys(("STAGE_OUT", "SO"), _JS.COMPLETING),  # burst buffer stage-out
    **dict.fromkeys(("STOPPED", "ST"), _JS.SUSPENDED),  # SIGSTOP, keeps its nodes
    **dict.fromkeys(("REQUEUE_FED", "RF"), _JS.REQUEUED),
    **dict.fromkeys(("REQUEUE_HOLD", "RH"), _JS.REQUEUED),
    **dict.fromkeys(("SPECIAL_EXIT", "SE"), _JS.REQUEUED),  # requeued and held
    **dict.fromkeys(("RESV_DEL_HOLD", "RD"), _JS.PENDING),  # held: reservation deleted
    **dict.fromkeys(("REVOKED", "RV"), _JS.CANCELLED),  # federation: runs elsewhere
}


@functools.lru_cache(maxsize=256)
def slurm_state(word: str) -> JobState:
    """hpcui's state for a Slurm state word or abbreviation; unknown words -> UNKNOWN.

    Only the first word counts (``CANCELLED by 1234``); a trailing ``+`` (sacct's mark
    for a truncated column) is ignored.
    """
    first = word.strip().split(" ", 1)[0].rstrip("+").upper()
    return _STATES.get(first, JobState.UNKNOWN)


# ------------------------------------------------------------------- scalar values


@functools.lru_cache(maxsize=4096)  # limits and elapsed times repeat across a big queue
@functools.lru_cache(maxsize=8192)  # an array's elements share their submit time
def parse_timestamp(text: str) -> datetime | None:
    """A naive local datetime from ``YYYY-MM-DDTHH:MM:SS``; None for N/A, Unknown, None."""
    t = text.strip()
    if t.upper() in _NO_TIME:
        return None
    try:  # fromisoformat: C speed; the shape check keeps it as strict as strptime was
        if len(t) != 19 or t[10] != "T" or not t[17:].isdigit():
            raise ValueError
        return datetime.fromisoformat(t)
    except ValueError:
        raise ValueError(
            f"not a Slurm timestamp: {text!r} "
            "(expected YYYY-MM-DDTHH:MM:SS, as printed under SLURM_TIME_FORMAT=standard)"
        ) from None


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """``code:signal`` -> (code, signal): ``0:9`` was killed by SIGKILL. Empty -> (None, None)."""
    t = text.strip()
    if not t:
        return None, None
    m = re.fullmatch(r"(\d+):(\d+)", t)
    if m is None:
        raise ValueError(f"not a Slurm exit code: {text!r} (expected CODE:SIGNAL, e.g. 0:9)")
    return int(m[1]), int(m[2])


def _text(value: str) -> str:
    """A value or "" for Slurm's words for nothing (values arrive stripped by `_split`)."""
    return "" if value in _NO_TEXT else value


def _leading_int(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    m = re.match(r"\d+", text.strip())  # NumNodes=1-1 while pending
    return int(m[0]) if m else None


@functools.lru_cache(maxsize=8192)
def _seconds(text: str) -> int | None:
    value = parse_duration(text)
    return None if value is None else int(value)


def _tres(text: str) -> dict[str, str]:
    """``cpu=4,mem=16G,gres/gpu=4`` -> {"cpu": "4", "mem": "16G", "gres/gpu": "4"}."""
    return dict(item.split("=", 1) for item in _text(text).split(",") if "=" in item)


def _gres_gpus(text: str) -> int:
    """GPUs in a gres list: ``gres:gpu:4``, ``gres/gpu:a100:2``, ``gpu:h100:4(S:0-1)``."""
    total = 0
    for item in _text(text).split(","):
        parts = re.sub(r"\(.*?\)", "", item).replace("gres/", "gres:").split(":")
        if parts[0] == "gres":
            parts = parts[1:]
        if parts and parts[0] == "gpu":
            total += int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 1
    return total


def _gpus(tres: Mapping[str, str], per_job: str, per_node: str, nodes: int) -> int | None:
    """GPUs of the whole job. TRES first (exact, but only where the site tracks gres/gpu),
    then the request; 0 when TRES is known and shows none, None when nothing is known."""
    if "gres/gpu" in tres:
        return int(tres["gres/gpu"])
    typed = [int(n) for key, n in tres.items() if key.startswith("gres/gpu:")]
    if typed:
        return sum(typed)
    if n := _gres_gpus(per_job):
        return n
    if n := _gres_gpus(per_node):
        return n * max(nodes, 1)
    return 0 if tres else None


def _compose_job_id(v: Mapping[str, str]) -> str:
    """The id as squeue's %i prints it, from the raw id, array and het columns."""
    task, het = _text(v.get("array_task", "")), _text(v.get("het_offset", ""))
    if task:
        return f"{v['array_job']}_{task}" if task.isdigit() else f"{v['array_job']}_[{task}]"
    if het:
        return f"{v['het_job']}+{het}"
    return v.get("job", "")


def _user(text: str) -> str:
    """``alice(1000)`` (scontrol's form) -> ``alice``."""
    if text.endswith(")") and "(" in text:
        i = text.rindex("(")
        if text[i + 1 : -1].isdigit():
            return text[:i]
    return text


def _queue_fields(row: Mapping[str, str]) -> dict[str, Any]:
    """Typed values of one squeue/sacct row ({record key: text})."""
    return _queue_values(*(row.get(key, "") for key in _SQUEUE_KEYS))


def _queue_values(
    job: str,
    array_job: str,
    array_task: str,
    het_job: str,
    het_offset: str,
    name: str,
    user: str,
    state: str,
    reason: str,
    partition: str,
    qos: str,
    account: str,
    nodes: str,
    nodelist: str,
    tres: str,
    tres_per_node: str,
    tres_per_job: str,
    elapsed: str,
    time_limit: str,
    submit_time: str,
    start_time: str,
    comment: str,
) -> dict[str, Any]:
    """Typed values from the texts of `_SQUEUE`'s columns, in that order (a standard
    squeue line is exactly these arguments). Called per line of a 10,000-job queue: the
    common shapes (a plain id, an array element) skip the general id parser, and what big
    queues repeat (limits, TRES, states) is parsed once (cached)."""
    task = "" if array_task in _NO_TEXT else array_task
    if task.isdigit():  # an array element: its id is in two columns already
        job_id, array_job_id, array_task_id = f"{array_job}_{task}", array_job, int(task)
    elif not task and job.isdigit() and het_offset in _NO_TEXT:  # a plain job
        job_id, array_job_id, array_task_id = job, None, None
    else:
        job_id = _compose_job_id(
            {
                "job": job,
                "array_job": array_job,
                "array_task": task,
                "het_job": het_job,
                "het_offset": het_offset,
            }
        )
        jid = parse_job_id(job_id)
        array_job_id = str(jid.job) if jid.is_array else None
        array_task_id = jid.array_task
    user_name, job_state, reason_text, part, qos_name, acct, count, gpus, limit = _shape(
        user, state, reason, partition, qos, account, nodes, tres, tres_per_node, tres_per_job,
        time_limit,
    )  # fmt: skip
    no = _NO_TEXT
    return {
        "job_id": job_id,
        "array_job_id": array_job_id,
        "array_task_id": array_task_id,
        "name": name,
        "user": user_name,
        "state": job_state,
        "state_raw": state,
        "reason": reason_text,
        "partition": part,
        "qos": qos_name,
        "account": acct,
        "nodes": count,
        "nodelist": "" if nodelist in no else nodelist,
        "gpus": gpus,
        "elapsed_s": _seconds(elapsed),
        "time_limit_s": limit,
        "submit_time": parse_timestamp(submit_time),
        "start_time": parse_timestamp(start_time),
        "comment": "" if comment in no else comment,
    }  # fmt: skip


@functools.lru_cache(maxsize=4096)
def _shape(
    user: str,
    state: str,
    reason: str,
    partition: str,
    qos: str,
    account: str,
    nodes: str,
    tres: str,
    tres_per_node: str,
    tres_per_job: str,
    time_limit: str,
) -> tuple[str, JobState, str, str, str, str, int, int | None, int | None]:
    """The typed values of the columns that a user's queue repeats line after line (one
    user, a few partitions, accounts, states, TRES shapes and limits): one cache lookup
    per line instead of one parse each."""
    no = _NO_TEXT
    count = int(nodes) if nodes.isdigit() else (_leading_int(nodes) or 0)
    return (
        _user(user),
        slurm_state(state),
        "" if reason in no else reason,
        "" if partition in no else partition,
        "" if qos in no else qos,
        "" if account in no else account,
        count,
        _gpus(_tres(tres), tres_per_job, tres_per_node, count),
        _seconds(time_limit),
    )


def as_accounting(entry: QueueEntry, into: type[A]) -> A:
    """A queue row as a history row whose outcome and usage are unknown (no accounting)."""
    return into.from_values({**entry.__dict__, **dict.fromkeys(_USAGE)})


# ------------------------------------------------------------------- command lines


def _selectors(job_ids: Sequence[str]) -> str:
    """The ``--jobs`` value: allocations only (steps dropped), ``123_[1-5]`` as ``123``."""
    if isinstance(job_ids, str):
        job_ids = [job_ids]
    if not job_ids:
        raise ValueError("no job ids given; pass None to ask about all your jobs")
    ids = [parse_job_id(text) for text in job_ids]
    return ",".join(dict.fromkeys(str(j.job) if j.array_spec else j.base for j in ids))


def squeue_command(job_ids: Sequence[str] | None = None, me: bool = True) -> list[str]:
    """``squeue`` for ``parse_squeue``: your jobs (``me``), optionally only ``job_ids``.

    Asked about one id it no longer knows, squeue exits 1 with "Invalid job id
    specified"; several ids just omit the unknown ones.
    """
    fmt = ",".join(f"{field}:{_SEP}" for field in SQUEUE_FIELDS)
    argv = [*_ENV, "squeue", "--noheader", "--array", "--states=all", f"--Format={fmt}"]
    if me:
        argv.append("--me")
    if job_ids is not None:
        argv.append(f"--jobs={_selectors(job_ids)}")
    return argv


def sacct_command(job_ids: Sequence[str] | None = None, since: str | None = None) -> list[str]:
    """``sacct`` for ``parse_sacct``: allocations and their steps.

    ``since`` is passed to ``--starttime`` (e.g. ``2024-01-01T00:00:00``). Without it
    sacct starts at midnight today, or at the epoch when ``job_ids`` are given.
    """
    argv = [*_ENV, "sacct", "--parsable2", "--noheader", f"--format={','.join(SACCT_FIELDS)}"]
    if job_ids is not None:
        argv.append(f"--jobs={_selectors(job_ids)}")
    if since is not None:
        argv.append(f"--starttime={since}")
    return argv


def sinfo_command() -> list[str]:
    """``sinfo`` for ``parse_sinfo``: one line per partition (per kind of node in it)."""
    return ["sinfo", "--noheader", f"--format={_SEP.join(SINFO_FIELDS)}"]


# ------------------------------------------------------------------------- parsers


def _fields_of(line: str, count: int, *, suffixed: bool) -> list[str] | None:
    """The fields of one line (None for a blank one); the last keeps any further ``|``."""
    if suffixed and line.endswith(_SEP):  # squeue -O puts the suffix after the last field too
        line = line[:-1]
    parts = line.split(_SEP, count - 1)
    if len(parts) != count:
        if not line.strip():
            return None
        raise ValueError(
            f"expected {count} '{_SEP}'-separated fields, got {len(parts)} in {line!r}; "
            "was the command built with the same field list?"
        )
    if " " in line:  # padding around values: only then is a strip per field needed
        parts = [part.strip() for part in parts]
    return parts


@contextlib.contextmanager
def _young_collection_once() -> Iterator[None]:
    """One collection of the young objects after a big parse instead of dozens during it.

    A 10,000-job answer leaves ~40,000 container objects (rows, their values, the lines'
    fields) that hold no cycle; with the collector on, they were scanned again and again
    as they aged and a full collection of the whole process often followed (~20 % of a
    sacct parse). The young generation is collected here, inside the parse, so what it
    costs is counted where it is caused."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(0)


def _split(text: str, count: int, *, suffixed: bool) -> Iterator[list[str]]:
    """The fields of each non-blank line: `_fields_of`, with the common line (the right
    number of fields, the suffix where one is expected) taken without a second pass."""
    n = count - 1
    for line in text.splitlines():
        parts = line.split(_SEP, n)
        if len(parts) == count:
            last = parts[n]
            if not suffixed or last.endswith(_SEP):
                if suffixed:  # the suffix: dropped from the last field only
                    parts[n] = last[:-1]
                if " " in line and (  # padding around values (not a space inside one)
                    " |" in line or "| " in line or line[0] == " " or line[-1] == " "
                ):
                    parts = [part.strip() for part in parts]
                yield parts
                continue
        odd = _fields_of(line, count, suffixed=suffixed)  # an odd line: the exact rules
        if odd is not None:
            yield odd


def _rows(
    text: str, fields: Sequence[str], keys: Mapping[str, str], *, suffixed: bool
) -> Iterator[dict[str, str]]:
    """Each line as {record key: value}; fields the parser has no use for are dropped."""
    lowered = {field.lower(): key for field, key in keys.items()}
    found = [lowered.get(field.lower()) for field in fields]
    known = [name for name in found if name is not None]
    if len(known) == len(found):  # every field is one the parser uses: the fast path
        for parts in _split(text, len(fields), suffixed=suffixed):
            yield dict(zip(known, parts))
        return
    for parts in _split(text, len(fields), suffixed=suffixed):
        yield {name: part for name, part in zip(found, parts) if name}


def parse_squeue(
    text: str,
    fields: Sequence[str] = SQUEUE_FIELDS,
    *,
    into: type[E] = QueueEntry,  # type: ignore[assignment]  # default of a TypeVar: PEP 696
    reuse: dict[str, Any] | None = None,
) -> list[E]:
    """Parse ``squeue_command`` output (``fields`` in the order they were asked for) into
    ``into`` rows (`QueueEntry.from_values`).

    The standard field list (what `squeue_command` asks) takes the fast path: each line's
    fields are `_queue_values`'s arguments and the typed values become rows without a
    second validation; malformed values are refused by the value parsers either way
    (`parse_squeue_validated` is the reference both are tested against). ``reuse``: the
    rows of the previous call by line (a refresh repeats most lines verbatim: pending
    jobs, array elements); it is left holding this call's lines only.
    """
    if tuple(fields) != SQUEUE_FIELDS:
        return parse_squeue_validated(text, fields, into=into)
    make = into.from_values
    with _young_collection_once():
        if reuse is None:
            return [
                make(_queue_values(*parts)) for parts in _split(text, len(fields), suffixed=True)
            ]
        rows: list[E] = []
        seen: dict[str, Any] = {}
        for line in text.splitlines():
            row = reuse.get(line)
            if row is None:
                parts = _fields_of(line, len(fields), suffixed=True)
                if parts is None:
                    continue
                row = make(_queue_values(*parts))
            seen[line] = row
            rows.append(row)
        reuse.clear()
        reuse.update(seen)
        return rows


def parse_squeue_validated(
    text: str,
    fields: Sequence[str] = SQUEUE_FIELDS,
    *,
    into: type[E] = QueueEntry,  # type: ignore[assignment]  # default of a TypeVar: PEP 696
) -> list[E]:
    """The general path: any field order, each row validated by pydantic."""
    rows = _rows(text, fields, _SQUEUE, suffixed=True)
    return [into.from_values(into.model_validate(_queue_fields(row)).__dict__) for row in rows]


def parse_sacct(
    text: str,
    fields: Sequence[str] = SACCT_FIELDS,
    *,
    into: type[A] = AccountingEntry,  # type: ignore[assignment]  # default of a TypeVar: PEP 696
) -> list[A]:
    """Parse ``sacct_command`` output: one entry per allocation, its steps folded in
    (largest MaxRSS, summed TotalCPU).

    The standard field list takes the fast path (positional fields, the common id shapes
    without the id parser, a step kept as its fields); `parse_sacct_general` reads any
    field order and is the reference both are tested against."""
    if tuple(fields) != SACCT_FIELDS:
        return parse_sacct_general(text, fields, into=into)

    def lines() -> Iterator[tuple[str, bool, list[str]]]:
        for parts in _split(text, len(fields), suffixed=False):
            base, dot, step = parts[0].partition(".")
            if not (base.isdigit() or _array_element(base)) or (dot and not step.isalnum()):
                jid = parse_job_id(parts[0])  # other shapes, and refuses what is no id
                base, dot = jid.base, "." if jid.step is not None else ""
            yield base, bool(dot), parts

    with _young_collection_once():
        return _fold(lines(), into)


def _fold(lines: Iterable[tuple[str, bool, list[str]]], into: type[A]) -> list[A]:
    """One entry per allocation from (base id, is a step, fields in SACCT_FIELDS' order):
    a step's TotalCPU is summed and its MaxRSS kept if the largest, and its fields are let
    go at once; the allocation line may or may not hold its steps' sum: the larger wins."""
    jobs: dict[str, dict[str, Any]] = {}  # base id -> the allocation's typed values
    step_cpu: dict[str, float] = {}  # base id -> its steps' TotalCPU, summed
    step_rss: dict[str, int] = {}  # base id -> its steps' largest MaxRSS
    for base, is_step, parts in lines:
        if not is_step:
            jobs[base] = _allocation_values(parts)
            continue
        if (cpu := parse_duration(parts[_CPU_TIME])) is not None:
            step_cpu[base] = step_cpu.get(base, 0) + cpu
        if (rss := _mem(parts[_MAX_RSS])) is not None and rss > step_rss.get(base, -1):
            step_rss[base] = rss
    make = into.from_values
    for base, values in jobs.items():
        if base in step_cpu:
            values["cpu_time_s"] = max(values["cpu_time_s"] or 0, step_cpu[base])
        if base in step_rss and step_rss[base] > (values["max_rss_bytes"] or -1):
            values["max_rss_bytes"] = step_rss[base]
    return [make(values) for values in jobs.values()]


_CPU_TIME, _MAX_RSS = (list(_SACCT.values()).index(key) for key in ("cpu_time", "max_rss"))


def _array_element(base: str) -> bool:
    job, _, task = base.partition("_")
    return job.isdigit() and task.isdigit()


def _allocation_values(parts: list[str]) -> dict[str, Any]:
    """The typed values of an allocation line (SACCT_FIELDS' order), before its steps are
    folded in (`_fold`)."""
    (
        job, name, user, account, partition, qos, state, exit_code, elapsed, time_limit,
        submit_time, start_time, end_time, nodes, nodelist, tres, cpu_time, max_rss, comment,
    ) = parts  # fmt: skip
    array_job, _, task = job.partition("_")
    if not task.isdigit():  # a plain job, or a shape the id parser reads
        array_job = task = ""
    values = _queue_values(
        job, array_job, task, "", "", name, user, state, "", partition, qos, account,
        nodes, nodelist, tres, "", "", elapsed, time_limit, submit_time, start_time, comment,
    )  # fmt: skip
    values["exit_code"], values["signal"] = _exit_code(exit_code)
    values["end_time"] = parse_timestamp(end_time)
    values["cpus"], values["mem_bytes"] = _cpus_mem(tres)
    values["cpu_time_s"] = parse_duration(cpu_time)
    values["max_rss_bytes"] = _mem(max_rss)
    return values


_exit_code = functools.lru_cache(maxsize=1024)(parse_exit_code)
_mem = functools.lru_cache(maxsize=8192)(parse_mem)


@functools.lru_cache(maxsize=4096)
def _cpus_mem(tres: str) -> tuple[int | None, int | None]:
    values = _tres(tres)
    return _leading_int(values.get("cpu", "")), parse_mem(values.get("mem", ""))


def parse_sacct_general(
    text: str,
    fields: Sequence[str] = SACCT_FIELDS,
    *,
    into: type[A] = AccountingEntry,  # type: ignore[assignment]  # default of a TypeVar: PEP 696
) -> list[A]:
    """`parse_sacct` for any field order (fields it does not know are dropped): each line
    put in the standard order, its id read by the id parser, then the same fold."""
    keys = tuple(_SACCT.values())

    def lines() -> Iterator[tuple[str, bool, list[str]]]:
        for row in _rows(text, fields, _SACCT, suffixed=False):
            jid = parse_job_id(row.get("job", ""))
            yield jid.base, jid.step is not None, [row.get(key, "") for key in keys]

    return _fold(lines(), into)


_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z][\w:/()-]*)=", re.MULTILINE)


def _counts(text: str) -> list[int]:
    parts = text.split("/")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        raise ValueError(f"expected allocated/idle/other/total counts, got {text!r}")
    return [int(p) for p in parts]


def parse_sinfo(text: str) -> list[PartitionInfo]:
    """Parse ``sinfo_command`` output."""
    result = []
    for name, avail, limit, nodes, cpus, gres, nodelist in _split(
        text, len(SINFO_FIELDS), suffixed=False
    ):
        na, ni, no, nt = _counts(nodes)
        ca, ci, co, ct = _counts(cpus)
        result.append(
            PartitionInfo(
                partition=name.rstrip("*"),
                is_default=name.endswith("*"),
                avail=avail,
                time_limit_s=_seconds(limit),
                nodes_alloc=na,
                nodes_idle=ni,
                nodes_other=no,
                nodes_total=nt,
                cpus_alloc=ca,
                cpus_idle=ci,
                cpus_other=co,
                cpus_total=ct,
                gres=_text(gres),
                gpus_per_node=_gres_gpus(gres) if _text(gres) else None,
                nodelist=nodelist,
            )
        )
    return result
