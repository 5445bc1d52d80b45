"""jobs, show, result, wait, cancel, stop: everything about jobs that already exist
(their logs: `hpcui.cli.cmd_logs`)."""

from __future__ import annotations

import argparse
import contextvars
import pprint
import sys
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from hpcui.backends.states import JobState
from hpcui.cli import EXIT_JOB_FAILED, EXIT_OK, EXIT_TIMEOUT, exit_code_for
from hpcui.cli import output as out
from hpcui.cli.cmd_control import report_fan_out
from hpcui.cli.common import (
    cluster_list,
    cluster_name,
    connect,
    get_job,
    split_job_ref,
)
from hpcui.cli.notify import tell
from hpcui.errors import HpcuiError, JobError, JobTimeoutError, UsageError

if TYPE_CHECKING:
    from hpcui.cli.models import ResultOutput
    from hpcui.jobs.job import Job


def cmd_jobs(args: argparse.Namespace) -> int:
    if args.registry:
        return _registry_jobs(args)
    names = cluster_list(cluster_name(args))
    if names is not None:
        return _jobs_of_clusters(args, names)
    cluster = connect(cluster_name(args))
    rows = _job_rows(args, cluster, notes=not args.json)
    if args.json:
        from hpcui.cli.models import output_type

        out.emit_json(output_type(args), rows)
        return EXIT_OK
    _print_jobs(args, [("", r) for r in rows])
    if not rows:
        hint = "" if args.all else " (--all includes jobs not submitted by hpcui)"
        out.note(f"no jobs {_where(args)} on {cluster.name}{hint}")
    return EXIT_OK


def _where(args: argparse.Namespace) -> str:
    return "in the history" if args.history else "in the queue"


def _job_rows(args: argparse.Namespace, cluster: Any, *, notes: bool) -> list[Any]:
    from hpcui.sitestate.jobs import jobs_from_records

    caps = cluster.capabilities
    rows: list[Any]
    if not (caps.history if args.history else caps.queue):
        # plain processes keep no queue or accounting: hpcui's registry is the list
        if notes:
            what = "accounting" if args.history else "queue"
            out.note(f"{cluster.name} keeps no {what}: listing hpcui's own jobs from its registry")
        since_s = timedelta(days=args.history).total_seconds() if args.history else None
        records = cluster.records()
        rows = jobs_from_records(records, history=bool(args.history), since_s=since_s)
    elif args.all_users:
        if args.history:
            raise UsageError("--all-users lists the queue: leave out --history.")
        rows = cluster.site.queue(all_users=True)
    elif args.history:
        rows = cluster.site.history(timedelta(days=args.history))
        said = "" if args.all else cluster.site.unmarked_note(rows)
        if notes and said:
            out.note(said)
    else:
        rows = cluster.site.queue()
    if not (args.all or args.all_users):
        rows = [r for r in rows if r.hpcui]
    if args.state:
        rows = [r for r in rows if r.state.value in args.state]
    return rows


def _jobs_of_clusters(args: argparse.Namespace, names: list[str]) -> int:
    """Several clusters at once, asked in parallel; one that fails is reported and the
    others still listed (exit status: the first failure's)."""
    from concurrent.futures import ThreadPoolExecutor

    from hpcui.cli.models import cluster_row_type

    def fetch(name: str) -> list[Any]:
        return _job_rows(args, connect(name), notes=False)

    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        # each worker keeps this call's context (in the agent: whose terminal to ask)
        futures = {name: pool.submit(contextvars.copy_context().run, fetch, name) for name in names}
    failed: list[tuple[str, BaseException]] = []
    listed: dict[str, list[Any]] = {}
    for name, fut in futures.items():
        if (exc := fut.exception()) is not None:
            failed.append((name, exc))
        else:
            listed[name] = fut.result()
    rows = [(name, r) for name, found in _one_per_site(listed).items() for r in found]
    for name, exc in failed:
        out.note(f"{name}: {exc}")
    if args.json:
        row = cluster_row_type(args)
        out.emit_json(list[row], [row(**r.model_dump(), cluster=name) for name, r in rows])  # type: ignore[valid-type]  # a model made at run time
    else:
        _print_jobs(args, rows)
        if not rows and not failed:
            out.note(f"no jobs {_where(args)} on {', '.join(names)}")
    return exit_code_for(failed[0][1]) if failed else EXIT_OK


def _one_per_site(listed: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Two tables for one login list the same jobs: each once (hpcui.sitestate.same_site)."""
    from hpcui.config import load_config
    from hpcui.sitestate.same_site import (
        one_per_site,
        shared_sites,
    )
    from hpcui.store.registry import job_records

    configs = load_config().clusters
    groups = shared_sites({n: c for n, c in configs.items() if n in listed})
    if not groups:
        return listed  # no registry read for the usual one table per site
    return one_per_site(listed, groups, job_records().list(limit=1_000_000))


def _print_jobs(args: argparse.Namespace, rows: list[tuple[str, Any]]) -> None:
    """The table; with several clusters the id reads CLUSTER:JOBID (what other commands take)."""

    def ref(name: str, job_id: str) -> str:
        return f"{name}:{job_id}" if name else job_id

    if not args.expand:  # an array of 300 tasks is one row, as in the app; a chain too
        rows = _folded(rows, history=bool(args.history))
        if not args.history:
            rows = _chains_folded(rows, cluster_name(args))
    if args.history:
        out.table(
            ["JOBID", "NAME", "STATE", "EXIT", "ELAPSED", "NODES", "PARTITION", "END"],
            [
                (
                    ref(name, r.job_id),
                    r.name,
                    r.state.value,
                    "-" if r.exit_code is None else r.exit_code,
                    out.duration(r.elapsed_s),
                    r.nodes,
                    r.partition,
                    out.when(r.end_time),
                )
                for name, r in rows
            ],
            colours={2: lambda s: out.STATE_COLOURS.get(s)},
            right=(3, 5),
        )
    else:
        users = getattr(args, "all_users", False)
        out.table(
            [
                "JOBID",
                *(["USER"] if users else []),
                "NAME",
                "STATE",
                "TIME",
                "LIMIT",
                "NODES",
                "PARTITION",
                "NODELIST(REASON)",
            ],
            [
                (
                    ref(name, r.job_id),
                    *([r.user] if users else []),
                    r.name,
                    r.state.value,
                    out.duration(r.elapsed_s),
                    out.duration(r.time_limit_s),
                    r.nodes,
                    r.partition,
                    where_or_why(r),
                )
                for name, r in rows
            ],
            colours={2 + users: lambda s: out.STATE_COLOURS.get(s)},
            right=tuple(c + users for c in (3, 4, 5)),
        )


def _folded(rows: list[tuple[str, Any]], *, history: bool) -> list[tuple[str, Any]]:
    """Each cluster's arrays of FOLD_MIN or more tasks as one row: `401_[0-299]`, one state
    for all, the counts by state where the reason or the end would be."""
    from hpcui.sitestate.arrays import Folded, fold

    out: list[tuple[str, Any]] = []
    folded = fold(
        rows,
        lambda item: item[1].job_id,
        lambda item: item[1].state,
        group=lambda item, array_id: f"{item[0]}:{array_id}",
    )
    for item in folded:
        if not isinstance(item, Folded):
            out.append(item)
            continue
        summary, (name, first) = item.summary, item.members[0]
        if history:
            row = first.model_copy(update={"job_id": summary.label, "state": summary.state,
                                           "name": f"{first.name} ({summary.tally})",
                                           "exit_code": None, "end_time": None,
                                           "elapsed_s": None})  # fmt: skip
        else:
            row = first.model_copy(update={"job_id": summary.label, "state": summary.state,
                                           "nodelist": "", "reason": summary.tally,
                                           "elapsed_s": None})  # fmt: skip
        out.append((name, row))
    return out


def _chains_folded(rows: list[tuple[str, Any]], default: str | None) -> list[tuple[str, Any]]:
    """Each chain's segments as one row: its segment now, named `NAME · chain k/N`
    (hpcui.sitestate.chains; the registry says which jobs are segments)."""
    from hpcui.config import load_config
    from hpcui.sitestate.chains import fold_chains, segments_of
    from hpcui.store.registry import job_records

    segments = segments_of(job_records().list(limit=10_000))
    if not segments:
        return rows
    here = default or load_config().default or ""
    folded = fold_chains(
        rows, lambda item: (item[0] or here, item[1].job_id), lambda item: item[1].state, segments
    )
    return [
        (name, r if seg is None else r.model_copy(update={"name": f"{r.name} · {seg.label()}"}))
        for (name, r), seg, _members in folded
    ]


def _registry_jobs(args: argparse.Namespace) -> int:
    from hpcui.cli.models import RegistryJob, output_type
    from hpcui.store.registry import job_records

    recs = job_records().list(cluster_name(args))
    if args.state:
        recs = [r for r in recs if r.state.value in args.state]
    rows = [
        RegistryJob(
            **r.model_dump(exclude={"meta", "submitted_at", "updated_at"}),
            submitted_at=datetime.fromtimestamp(r.submitted_at),
            updated_at=datetime.fromtimestamp(r.updated_at),
        )
        for r in recs
    ]
    if args.json:
        out.emit_json(output_type(args), rows)
        return EXIT_OK
    out.table(
        ["CLUSTER", "JOBID", "NAME", "STATE (last seen)", "SUBMITTED"],
        [
            (r.cluster, r.job_id or "-", r.name, r.state.value, out.when(r.submitted_at))
            for r in rows
        ],
        colours={3: lambda s: out.STATE_COLOURS.get(s)},
    )
    return EXIT_OK


def where_or_why(r: Any) -> str:
    """squeue's NODELIST(REASON) column: the nodes of a started job, why a waiting one
    waits ("(waiting)" for one the scheduler has not looked at again yet, not "()")."""
    if r.nodelist and r.state.value != "PENDING":
        return str(r.nodelist)
    if r.reason:
        return f"({r.reason})"
    return "(waiting)" if r.state.value == "PENDING" else ""


def cmd_show(args: argparse.Namespace) -> int:
    """One job, hpcui's or any other of the user's, as the core's JobView says it."""
    from hpcui.cli.models import ShowOutput

    name, job_id = split_job_ref(args.job, cluster_name(args))
    view = connect(name).view(job_id)
    if args.json:
        out.emit_json(ShowOutput, view)
        return EXIT_OK
    state = view.state.value  # the field starts with it: coloured as every face colours it
    out.key_values(
        [(k, out.state(state) + v[len(state) :] if k == "state" else v) for k, v in view.fields()]
    )
    return EXIT_OK


#: how often `wait` looks whether its running jobs will finish before their limit (a log
#: read and a scheduler call each), the first time sooner
FINISH_LOOK_S, FIRST_FINISH_LOOK_S = 60.0, 10.0


def _warn_late(pending: list[Any], warned: set[str], args: argparse.Namespace) -> None:
    """Say once per job, as it becomes clear, that a running job will not finish in time
    (from the progress its log printed: hpcui.jobs.finish), on the desktop with --notify."""
    for job in pending:
        if job.job_id in warned or job.state is not JobState.RUNNING:
            continue
        try:
            finish = job.cluster.will_finish(job.job_id)
        except HpcuiError:
            continue
        if finish is None or finish.will_finish is not False:
            continue
        warned.add(job.job_id)
        said = f"{job.cluster.name}:{job.job_id} {job.name} will not finish in time: " + (
            finish.line(job.job_id)
        )
        if not args.json:
            print(said, flush=True)
        if args.notify:
            tell("hpcui: a job will not finish", said)


def cmd_wait(args: argparse.Namespace) -> int:
    """Until every job named ends (or --timeout): one line per end as it happens, told on
    the desktop (or by the bell) with --notify; exit 0 when all completed, 5 when one did
    not, 6 when time ran out first."""
    from hpcui.cli.models import WaitOutput

    jobs = [get_job(args, ref, refresh=False) for ref in args.jobs]
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    rows: dict[str, WaitOutput] = {}
    pending = list(jobs)
    warned: set[str] = set()
    next_look = time.monotonic() + FIRST_FINISH_LOOK_S  # some progress printed by then
    while pending:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            break
        if time.monotonic() >= next_look:  # will each running one finish before its limit?
            next_look = time.monotonic() + FIRST_FINISH_LOOK_S  # some progress printed by then
            _warn_late(pending, warned, args)
        by_cluster: dict[str, list[Any]] = {}
        for job in pending:
            by_cluster.setdefault(job.cluster.name, []).append(job)
        step = 2.0 if left is None else min(2.0, left) / max(len(by_cluster), 1)
        for group in by_cluster.values():
            status = group[0].cluster.status
            states = status.wait([j.job_id for j in group], timeout=step)
            for job in group:
                if not status.settled(job.job_id):
                    continue
                pending.remove(job)
                state = states[job.job_id].state
                rows[job.job_id] = WaitOutput(
                    cluster=job.cluster.name, job_id=job.job_id, name=job.name, state=state,
                    ended=True,
                )  # fmt: skip
                said = f"{job.cluster.name}:{job.job_id} {job.name} ended {state.value}"
                if not args.json:
                    print(said, flush=True)
                if args.notify:
                    tell("hpcui: job ended", said)
    for job in pending:
        rows[job.job_id] = WaitOutput(
            cluster=job.cluster.name, job_id=job.job_id, name=job.name, state=job.state,
            ended=False,
        )  # fmt: skip
    ordered = [rows[j.job_id] for j in jobs]
    if args.json:
        out.emit_json(list[WaitOutput], ordered)
    if pending:
        names = ", ".join(f"{j.cluster.name}:{j.job_id} ({j.state.value})" for j in pending)
        out.note(f"still running after {args.timeout:g} s: {names}; `hpcui wait` again later")
        return EXIT_TIMEOUT
    return EXIT_OK if all(r.state.value == "COMPLETED" for r in ordered) else EXIT_JOB_FAILED


def cmd_result(args: argparse.Namespace) -> int:
    from hpcui.cli.models import ResultOutput

    job = get_job(args, args.job, refresh=False)
    res, code = collect_result(job, args.timeout, all_ranks=args.all_ranks)
    if args.json:
        out.emit_json(ResultOutput, res)
    else:
        print_result(res)
    return code


def collect_result(
    job: Job, timeout: float | None, *, all_ranks: bool = False
) -> tuple[ResultOutput, int]:
    """The job's outcome as a record and an exit code (5 when it failed, 6 timeout).

    A job failure is an answer here, not a crash: it is returned so --json can print it.
    """
    from hpcui.cli.models import (
        ErrorInfo,
        ResultOutput,
        jsonable,
    )

    try:
        value = job.results(timeout) if all_ranks else job.result(timeout)
    except JobTimeoutError:
        ref = job.job_id
        raise JobTimeoutError(
            f"Job {ref} on {job.cluster.name} is still {job.state.value} after {timeout:g} s. "
            f"`hpcui result {ref}` waits again; `hpcui cancel {ref}` ends it.",
            job_id=ref,
        ) from None
    except JobError as exc:
        message = str(exc).split("\n", 1)[0]
        if exc.remote_traceback:  # add the exception line: `ValueError: boom`
            last = [ln for ln in exc.remote_traceback.strip().splitlines() if ln.strip()][-1:]
            message = f"{message.rstrip(':')}: {last[0].strip()}" if last else message
        error = ErrorInfo(
            type=type(exc).__name__,
            message=message,
            remote_traceback=exc.remote_traceback,
            stderr_tail=exc.stderr_tail,
        )
        res = ResultOutput(
            cluster=job.cluster.name, job_id=job.job_id, state=job.state, ok=False, error=error
        )
        print(f"hpcui: {message}", file=sys.stderr)
        detail = exc.remote_traceback or (str(exc).split("\n", 1)[1:] or [""])[0]
        if detail.strip():
            sys.stderr.write(out.style(detail.rstrip(), "dim", stream=sys.stderr) + "\n")
        return res, exit_code_for(exc)
    carried, _ = jsonable(value)
    return (
        ResultOutput(
            cluster=job.cluster.name,
            job_id=job.job_id,
            state=job.state,
            ok=True,
            value=carried,
            value_repr=repr(value),
        ),
        EXIT_OK,
    )


def print_result(res: ResultOutput) -> None:
    """The value as Python shows it (pprint); failures were already reported on stderr."""
    if not res.ok or res.value_repr is None:
        return
    if res.value is not None:  # JSON-shaped: pretty-printed
        sys.stdout.write(pprint.pformat(res.value) + "\n")
    else:
        sys.stdout.write(res.value_repr + "\n")


def cmd_cancel(args: argparse.Namespace) -> int:
    """Any jobs of the user, as scancel/qdel take them: one call per cluster (an id the
    scheduler does not know is a clear error, exit 2)."""
    refs = [split_job_ref(ref, cluster_name(args)) for ref in args.jobs]
    return report_fan_out(args, "cancel", refs)


def cmd_stop(args: argparse.Namespace) -> int:
    job = get_job(args, args.job, refresh=False)
    job.stop()
    msg = (
        "stop file written: the job ends at its next hpcui.distributed.stop_requested() "
        "check (jobs that never call it keep running; use `hpcui cancel`)"
    )
    out.action_done(args.json, job.cluster.name, job.job_id, msg)
    return EXIT_OK
