"""submit, run, script: a new job (or the script it would be), from the command line."""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hpcui.cli import EXIT_OK
from hpcui.cli import output as out
from hpcui.cli.common import cluster_name, connect, resource_kwargs
from hpcui.errors import HpcuiError, JobTimeoutError, ResourceAdvice

if TYPE_CHECKING:
    from hpcui.backends.records import StartEstimate
    from hpcui.clusters.cluster import Cluster
    from hpcui.jobs.job import Job
    from hpcui.request.cost import Cost
    from hpcui.sitestate.budget import Budget


def cmd_submit(args: argparse.Namespace) -> int:
    from hpcui.submission.targets import (
        json_value,
        load_function,
    )

    call_args = json_value(args.args, "--args", list)
    call_kwargs = json_value(args.kwargs, "--kwargs", dict)
    fn = load_function(args.function)
    cluster = connect(cluster_name(args))
    return _submit(args, cluster, fn, call_args, call_kwargs, resource_kwargs(args))


def cmd_run(args: argparse.Namespace) -> int:
    from hpcui.submission.targets import script_call

    script_args = list(args.script_args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    call = script_call(args.script, script_args)
    res = resource_kwargs(args)
    res.setdefault("name", call.name)
    cluster = connect(cluster_name(args))
    return _submit(args, cluster, call.fn, call.args, call.kwargs, res)


def _submit(
    args: argparse.Namespace,
    cluster: Cluster,
    fn: Callable[..., Any],
    call_args: list[Any],
    call_kwargs: dict[str, Any],
    res: dict[str, Any],
) -> int:
    from hpcui.cli.cmd_jobs import (
        collect_result,
        print_result,
    )
    from hpcui.cli.models import SubmitOutput
    from hpcui.request.plan import explain

    if res.get("launcher") == "auto":  # chosen from the code's imports, and said
        from hpcui.submission.frameworks import choose_launcher, code_text

        res["launcher"], why = choose_launcher(code_text(fn, call_args))
        if not args.quiet:  # to stderr: a --json document on stdout stays whole
            out.note(why)
    alloc = cluster.plan(
        **res
    )  # validated before the network; advice is shown, not printed by core
    summary, *rest = explain(alloc).splitlines()
    if args.estimate:  # like sbatch --test-only: nothing is submitted
        from hpcui.cli.models import EstimateOutput

        estimates = cluster.estimate_start(**res)
        cost, ledger = estimate_cost(cluster, int(res.get("chain") or 1), res)
        if args.json:
            out.emit_json(
                EstimateOutput,
                EstimateOutput(
                    cluster=cluster.name, summary=summary, estimates=estimates, cost=cost,
                    ledger=ledger.binding_of(cost) if ledger and cost else [],
                ),
            )  # fmt: skip
        else:
            out.note(f"{summary} (nothing submitted)")
            print_estimates(estimates)
            print_cost(cost, ledger)
        return EXIT_OK
    advice = [a.message for a in alloc.advice]
    if not args.json and not args.quiet:
        for line in rest:
            (out.warn if line.startswith("advice:") else out.note)(line)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", ResourceAdvice)  # past runs used far less: said
        job = cluster.submit(fn, *call_args, kwargs=call_kwargs, **res)
    sizing = [str(w.message) for w in said if issubclass(w.category, ResourceAdvice)]
    advice += sizing
    if not args.json and not args.quiet:
        for line in sizing:
            out.warn(f"advice: {line}")
    record = SubmitOutput(
        cluster=cluster.name,
        job_id=job.job_id,
        name=job.name,
        folder=job.folder,
        num_tasks=job.num_tasks,
        state=job.state,
        allocation=summary,
        advice=advice,
        segments=getattr(job, "ids", []),
    )
    if args.quiet and not args.json:
        print(job.job_id, flush=True)
    elif not args.json:
        chained = (
            f" as a chain of {len(record.segments)} ({', '.join(record.segments)}, each after "
            "the one before)"
            if record.segments
            else ""
        )
        print(
            f"submitted job {job.job_id} on {cluster.name}{chained} ({job.name}: {summary})",
            flush=True,
        )
    if not (args.wait or args.follow):
        if args.json:
            out.emit_json(SubmitOutput, record)
        return EXIT_OK
    if args.follow:
        # the log goes where it does not break the JSON document on stdout
        target = sys.stderr if args.json else sys.stdout
        for chunk in job.logs("stdout", 0, follow=True, timeout=args.timeout):
            target.write(chunk.text)
            target.flush()
    else:
        _progress(job, args.timeout, quiet=args.quiet or args.json)
    result, code = collect_result(job, args.timeout)
    record.result = result
    record.state = result.state
    if args.command == "run" and not args.follow and not args.json and not args.quiet:
        _print_output(job)  # a script's result is its output: shown at the end
    if args.json:
        out.emit_json(SubmitOutput, record)
    elif not args.quiet and args.command == "submit":  # `run` returns 0: nothing to show
        print_result(result)
    return code


def _print_output(job: Job) -> None:
    """`run --wait`: the script's output (rank 0's stdout) once it ended, made safe for a
    terminal as `hpcui logs` does."""
    from hpcui.common.terminal_text import safe_text

    tty = sys.stdout.isatty()
    for chunk in job.logs("stdout", 0):
        sys.stdout.write(safe_text(chunk.text) if tty else chunk.text)
    sys.stdout.flush()


def _progress(job: Job, timeout: float | None, *, quiet: bool) -> None:
    """State and elapsed time on stderr until the job ends: one line rewritten on a
    terminal, a line per state change otherwise (CI logs). The status service polls
    adaptively in the background; this loop only reads its answer."""

    tty = sys.stderr.isatty()
    start = time.monotonic()
    last = None
    while True:
        state = job.state
        elapsed = time.monotonic() - start
        if not quiet:
            line = f"{job.job_id} {state.value} {out.duration(elapsed)}"
            if tty:
                shown = out.state(state.value, sys.stderr)
                sys.stderr.write(f"\r{job.job_id} {shown} {out.duration(elapsed)}\x1b[K")
                sys.stderr.flush()
            elif state != last:
                print(line, file=sys.stderr, flush=True)
        last = state
        if state.is_final:
            break
        if timeout is not None and elapsed >= timeout:
            if tty and not quiet:
                sys.stderr.write("\n")
            raise JobTimeoutError(
                f"Job {job.job_id} on {job.cluster.name} is still {state.value} after {timeout:g} s. "
                f"`hpcui result {job.job_id}` waits again; `hpcui cancel {job.job_id}` ends it.",
                job_id=job.job_id,
            )
        time.sleep(0.5)
    if tty and not quiet:
        sys.stderr.write("\n")


def cmd_script(args: argparse.Namespace) -> int:
    from hpcui.cli.models import ScriptOutput

    cluster = connect(cluster_name(args))
    preview = cluster.preview_script(array_size=args.array, **resource_kwargs(args))
    text, summary = preview.script, preview.summary
    estimates = (
        cluster.estimate_start(array_size=args.array, **resource_kwargs(args))
        if args.estimate
        else []
    )
    if args.json:
        out.emit_json(
            ScriptOutput,
            ScriptOutput(
                cluster=cluster.name, allocation=preview.allocation, summary=summary,
                script=text, estimates=estimates,
            ),
        )  # fmt: skip
        return EXIT_OK
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()
    for line in summary.splitlines():
        (out.warn if line.startswith("advice:") else out.note)(f"# {line}")
    if args.estimate:
        print_estimates(estimates)
        print_cost(*estimate_cost(cluster, args.array or 1, resource_kwargs(args)))
    return EXIT_OK


def estimate_cost(
    cluster: Cluster, jobs: int, res: dict[str, Any]
) -> tuple[Cost | None, Budget | None]:
    """The request's cost and the ledger it is checked against (None: no ledger here, or
    it could not be read - said, not fatal: an estimate is advice)."""
    cost = cluster.cost(jobs, **res)
    if cost is None or not cluster.capabilities.budget:
        return cost, None  # an unknown cost is checked against nothing: no round trip
    try:
        return cost, cluster.site.budget()
    except HpcuiError as exc:
        out.note(f"budget: not read ({exc})")
        return cost, None


def print_cost(cost: Cost | None, ledger: Budget | None) -> None:
    from hpcui.sitestate.budget import cost_lines

    for line in cost_lines(cost, ledger):
        out.note(line)


def print_estimates(estimates: list[StartEstimate]) -> None:
    """One line per partition on stderr: when (and where) it would start, or why not said."""
    from hpcui.submission.estimate import NOW_S, wait_s  # the CLI imports when it runs

    for e in estimates:
        where = e.partition or "(default partition)"
        wait = wait_s(e)
        if e.start is None or wait is None:
            out.note(f"start in {where}: no estimate ({e.said})")
            continue
        soon = "now" if wait < NOW_S else f"in {out.duration(int(wait))}"
        out.note(f"start in {where}: {soon} ({e.start:%Y-%m-%d %H:%M}) on {e.nodes}")
