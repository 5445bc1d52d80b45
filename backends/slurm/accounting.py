"""Slurm's accounting: the ``sacct`` command line and its parser, one allocation per
entry with its steps folded in, built from one field tuple (``SACCT_FIELDS``).

Why sacct without ``-X``: MaxRSS and TotalCPU are measured per step; the allocation's
own line has no MaxRSS, and whether its TotalCPU includes the steps' is not something to
rely on. One call returns the allocation and its steps, and ``parse_sacct`` folds the
steps into one AccountingEntry (largest MaxRSS; the larger of the line's TotalCPU and
the steps' sum).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from hpcui.backends.records import AccountingEntry
from hpcui.backends.required_fields import require_columns
from hpcui.backends.scheduler_text import parse_duration, parse_mem
from hpcui.backends.slurm.fields import (
    ENV,
    job_selectors,
    keyed_rows,
    leading_int,
    parse_exit_code,
    parse_timestamp,
    split_fields,
    tres_values,
    young_collection_once,
)
from hpcui.backends.slurm.jobids import parse_job_id
from hpcui.backends.slurm.queue import queue_values

A = TypeVar("A", bound=AccountingEntry)

# Slurm's field name -> record key. The keys, in order, are the field list.
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
SACCT_FIELDS: tuple[str, ...] = tuple(_SACCT)


def sacct_command(job_ids: Sequence[str] | None = None, since: str | None = None) -> list[str]:
    """``sacct`` for ``parse_sacct``: allocations and their steps.

    ``since`` is passed to ``--starttime`` (e.g. ``2024-01-01T00:00:00``). Without it
    sacct starts at midnight today, or at the epoch when ``job_ids`` are given.
    """
    argv = [*ENV, "sacct", "--parsable2", "--noheader", f"--format={','.join(SACCT_FIELDS)}"]
    if job_ids is not None:
        argv.append(f"--jobs={job_selectors(job_ids)}")
    if since is not None:
        argv.append(f"--starttime={since}")
    return argv


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
        for parts in split_fields(text, len(fields), suffixed=False):
            base, dot, step = parts[0].partition(".")
            if not (base.isdigit() or _array_element(base)) or (dot and not step.isalnum()):
                jid = parse_job_id(parts[0])  # other shapes, and refuses what is no id
                base, dot = jid.base, "." if jid.step is not None else ""
            yield base, bool(dot), parts

    with young_collection_once():
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
    values = queue_values(
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
    values = tres_values(tres)
    return leading_int(values.get("cpu", "")), parse_mem(values.get("mem", ""))


def parse_sacct_general(
    text: str,
    fields: Sequence[str] = SACCT_FIELDS,
    *,
    into: type[A] = AccountingEntry,  # type: ignore[assignment]  # default of a TypeVar: PEP 696
) -> list[A]:
    """`parse_sacct` for any field order (fields it does not know are dropped): each line
    put in the standard order, its id read by the id parser, then the same fold. Fields
    without the job's id or state are refused, naming them (`JobIDRaw` is not `JobID`)."""
    require_columns(fields, _SACCT, ("job", "state"), "This sacct output")
    keys = tuple(_SACCT.values())

    def lines() -> Iterator[tuple[str, bool, list[str]]]:
        for row in keyed_rows(text, fields, _SACCT, suffixed=False):
            jid = parse_job_id(row.get("job", ""))
            yield jid.base, jid.step is not None, [row.get(key, "") for key in keys]

    return _fold(lines(), into)
