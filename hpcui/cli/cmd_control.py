"""hold, release, requeue, update, resubmit: control over any job of the user."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from hpcui.cli import EXIT_OK, exit_code_for
from hpcui.cli import output as out
from hpcui.cli.common import cluster_name, connect, split_job_ref
from hpcui.errors import UsageError

if TYPE_CHECKING:
    from hpcui.jobs.control import Verb


def cmd_hold(args: argparse.Namespace) -> int:
    return _verb(args, "hold")


def cmd_release(args: argparse.Namespace) -> int:
    return _verb(args, "release")


def cmd_requeue(args: argparse.Namespace) -> int:
    return _verb(args, "requeue")


def _verb(args: argparse.Namespace, verb: Verb) -> int:
    """One scheduler call per cluster named (hpcui.jobs.control.fan_out, as the app); each
    job's outcome reported on its own."""
    refs = [split_job_ref(ref, cluster_name(args)) for ref in args.jobs]
    return report_fan_out(args, verb, refs)


def report_fan_out(args: argparse.Namespace, verb: Verb, refs: list[tuple[str | None, str]]) -> int:
    """`verb` over jobs of any clusters, one scheduler call per cluster (hpcui.jobs.control);
    a line per job (or `--json` rows), the first failure's exit code."""
    from hpcui.cli.models import ActionOutput
    from hpcui.jobs.control import DONE, fan_out

    results: list[ActionOutput] = []
    code = EXIT_OK
    for outcome in fan_out(verb, refs, lambda name: connect(name).control):
        error = outcome.error
        if error is not None:
            code = code or exit_code_for(error)
            print(f"hpcui: {error}", file=sys.stderr)
        for job_id in outcome.job_ids:
            message = DONE[verb] if error is None else str(error)
            results.append(
                ActionOutput(
                    cluster=outcome.cluster, job_id=job_id, ok=error is None, message=message
                )
            )
            if error is None and not args.json:
                print(f"{DONE[verb]} {job_id} on {outcome.cluster}")
    if args.json:
        out.emit_json(list[ActionOutput], results)
    return code


def cmd_update(args: argparse.Namespace) -> int:
    name, job_id = split_job_ref(args.job, cluster_name(args))
    cluster = connect(name)
    cluster.control.set_time_limit(job_id, args.time)
    limit = cluster.control.details(job_id).time_limit_s
    msg = f"time limit now {out.duration(limit) if limit else 'unlimited'}"
    out.action_done(args.json, cluster.name, job_id, msg)
    return EXIT_OK


def cmd_resubmit(args: argparse.Namespace) -> int:
    """The job's own script (Slurm keeps it while it knows the job), maybe edited, submitted
    from the job's working directory: what `sbatch` there would do."""

    name, job_id = split_job_ref(args.job, cluster_name(args))
    cluster = connect(name)
    details = cluster.control.details(job_id)
    script = cluster.control.batch_script(job_id)
    if args.print:
        sys.stdout.write(script)
        return EXIT_OK
    if args.edit:
        from hpcui.services.terminal import edit_text

        script = edit_text(script, suffix=".sh")
        if not script.strip():
            raise UsageError("The edited script is empty: nothing was submitted.")
    new_id = cluster.control.resubmit(
        script, work_dir=details.work_dir, name=details.name or job_id
    )
    msg = f"submitted as {new_id} (from {details.work_dir})"
    if args.json:  # the JSON names the new job; the line says which job it came from
        out.action_done(True, cluster.name, new_id, msg)
    else:
        out.action_done(False, cluster.name, job_id, msg)
    return EXIT_OK
