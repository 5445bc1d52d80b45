"""Slurm's queue: the ``squeue`` command line and its parser, built from one field tuple
(``SQUEUE_FIELDS``) so they cannot drift apart. The parser takes the tuple as an argument
too, which is how the verbatim captures in tests/fixtures (taken with other field lists)
are read. Accounting (sacct) is in ``accounting``, partitions (sinfo) in ``partitions``.

Why ``squeue -O 'Field:|,...'``: ``squeue --json`` changed shape in 21.08/22.05, 23.02
and 23.11 and ignored filters before 23.02, while the ``-O`` names have held from 20.11
to 25.x (matched case-insensitively). ``Field:|`` means width 0 (printed in full, never
truncated) with ``|`` appended, so every line ends in ``|``. ``-O`` and not ``-o``
because only ``-O`` has ``tres-alloc`` and ``tres-per-job``, needed to count GPUs
however they were requested. ``--array`` prints one line per array task (no
``123_[4-99]`` ranges, no truncated task lists); ``--states=all`` keeps recently ended
jobs, the fallback where accounting is off. Comment is last: a ``|`` in it stays in it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from hpcui.backends.records import AccountingEntry, QueueEntry
from hpcui.backends.required_fields import require_columns
from hpcui.backends.slurm.fields import (
    ENV,
    NO_TEXT,
    SEP,
    compose_job_id,
    fields_of,
    job_gpus,
    job_selectors,
    keyed_rows,
    leading_int,
    parse_timestamp,
    plain_user,
    seconds,
    slurm_state,
    split_fields,
    tres_values,
    young_collection_once,
)
from hpcui.backends.slurm.jobids import parse_job_id
from hpcui.backends.states import JobState

E = TypeVar("E", bound=QueueEntry)
A = TypeVar("A", bound=AccountingEntry)
#: what an AccountingEntry knows beyond a QueueEntry (None where only squeue answered)
_USAGE = tuple(k for k in AccountingEntry.model_fields if k not in QueueEntry.model_fields)

# Slurm's field name -> record key. The keys, in order, are the field list.
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
SQUEUE_FIELDS: tuple[str, ...] = tuple(_SQUEUE)
_SQUEUE_KEYS: tuple[str, ...] = tuple(_SQUEUE.values())  # `queue_values`'s arguments


def _queue_fields(row: Mapping[str, str]) -> dict[str, Any]:
    """Typed values of one squeue/sacct row ({record key: text})."""
    return queue_values(*(row.get(key, "") for key in _SQUEUE_KEYS))


def queue_values(
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
    task = "" if array_task in NO_TEXT else array_task
    if task.isdigit():  # an array element: its id is in two columns already
        job_id, array_job_id, array_task_id = f"{array_job}_{task}", array_job, int(task)
    elif not task and job.isdigit() and het_offset in NO_TEXT:  # a plain job
        job_id, array_job_id, array_task_id = job, None, None
    else:
        job_id = compose_job_id(
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
    no = NO_TEXT
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
        "elapsed_s": seconds(elapsed),
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
    no = NO_TEXT
    count = int(nodes) if nodes.isdigit() else (leading_int(nodes) or 0)
    return (
        plain_user(user),
        slurm_state(state),
        "" if reason in no else reason,
        "" if partition in no else partition,
        "" if qos in no else qos,
        "" if account in no else account,
        count,
        job_gpus(tres_values(tres), tres_per_job, tres_per_node, count),
        seconds(time_limit),
    )


def as_accounting(entry: QueueEntry, into: type[A]) -> A:
    """A queue row as a history row whose outcome and usage are unknown (no accounting)."""
    return into.from_values({**entry.__dict__, **dict.fromkeys(_USAGE)})


# ------------------------------------------------------------------- command lines


def squeue_command(job_ids: Sequence[str] | None = None, me: bool = True) -> list[str]:
    """``squeue`` for ``parse_squeue``: your jobs (``me``), optionally only ``job_ids``.

    Asked about one id it no longer knows, squeue exits 1 with "Invalid job id
    specified"; several ids just omit the unknown ones.
    """
    fmt = ",".join(f"{field}:{SEP}" for field in SQUEUE_FIELDS)
    argv = [*ENV, "squeue", "--noheader", "--array", "--states=all", f"--Format={fmt}"]
    if me:
        argv.append("--me")
    if job_ids is not None:
        argv.append(f"--jobs={job_selectors(job_ids)}")
    return argv


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
    fields are `queue_values`'s arguments and the typed values become rows without a
    second validation; malformed values are refused by the value parsers either way
    (`parse_squeue_validated` is the reference both are tested against). ``reuse``: the
    rows of the previous call by line (a refresh repeats most lines verbatim: pending
    jobs, array elements); it is left holding this call's lines only.
    """
    if tuple(fields) != SQUEUE_FIELDS:
        return parse_squeue_validated(text, fields, into=into)
    make = into.from_values
    with young_collection_once():
        if reuse is None:
            return [
                make(queue_values(*parts))
                for parts in split_fields(text, len(fields), suffixed=True)
            ]
        rows: list[E] = []
        seen: dict[str, Any] = {}
        for line in text.splitlines():
            row = reuse.get(line)
            if row is None:
                parts = fields_of(line, len(fields), suffixed=True)
                if parts is None:
                    continue
                row = make(queue_values(*parts))
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
    """The general path: any field order, each row validated by pydantic; fields without
    the job's id or state are refused, naming them."""
    require_columns(fields, _SQUEUE, ("job", "state"), "This squeue output")
    rows = keyed_rows(text, fields, _SQUEUE, suffixed=True)
    return [into.from_values(into.model_validate(_queue_fields(row)).__dict__) for row in rows]
