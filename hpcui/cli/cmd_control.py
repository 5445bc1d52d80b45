"""hold, release, requeue, update, resubmit: control over any job of the user."""

from __future__ import annotations

import argparse
import sys

from hpcui.cli import EXIT_OK, exit_code_for
from hpcui.cli import output as out
from hpcui.cli.common import cluster_name, connect, split_job_ref

_DONE = {"hold": "held", "release": "released", "requeue": "requeued"}


def cmd_hold(args: argparse.Namespace) -> int:
    return _verb(args, "hold")


def cmd_release(args: argparse.Namespace) -> int:
    return _verb(args, "release")


def cmd_requeue(args: argparse.Namespace) -> int:
    return _verb(args, "requeue")


def _verb(args: argparse.Namespace, verb: str) -> int:
    """One scheduler call per cluster named; each job's outcome reported on its own."""
    from hpcui.cli.models import ActionOutput
    from hpcui.errors import HpcuiError

    by_cluster: dict[str | None, list[str]] = {}
    for ref in args.jobs:
        name, job_id = split_job_ref(ref, cluster_name(args))
        by_cluster.setdefault(name, []).append(job_id)
    results: list[ActionOutput] = []
    code = EXIT_OK
    for name, ids in by_cluster.items():
        try:
            cluster = connect(name)
            getattr(cluster, verb)(ids)
        except HpcuiError as exc:
            code = code or exit_code_for(exc)
            print(f"hpcui: {exc}", file=sys.stderr)
            results += [
                ActionOutput(cluster=name or "", job_id=j, ok=False, message=str(exc)) for j in ids
            ]
            continue
        for job_id in ids:
            results.append(
                ActionOutput(cluster=cluster.name, job_id=job_id, ok=True, message=_DONE[verb])
            )
            if not args.json:
                print(f"{_DONE[verb]} {job_id} on {cluster.name}")
    if args.json:
        out.emit_json(list[ActionOutput], results)
    return code


def cmd_update(args: argparse.Namespace) -> int:
    name, job_id = split_job_ref(args.job, cluster_name(args))
    cluster = connect(name)
    cluster.set_time_limit(job_id, args.time)
    limit = cluster.job_details(job_id).time_limit_s
    msg = f"time limit now {out.duration(limit) if limit else 'unlimited'}"
    out.action_done(args.json, cluster.name, job_id, msg)
    return EXIT_OK


def cmd_resubmit(args: argparse.Namespace) -> int:
    """The job's own script (Slurm keeps it while it knows the job), maybe edited, submitted
    from the job's working directory: what `sbatch` there would do."""
    from hpcui.errors import UsageError

    name, job_id = split_job_ref(args.job, cluster_name(args))
    cluster = connect(name)
    details = cluster.job_details(job_id)
    script = cluster.batch_script(job_id)
    if args.print:
        sys.stdout.write(script)
        return EXIT_OK
    if args.edit:
        from hpcui.terminal import edit_text

        script = edit_text(script, suffix=".sh")
        if not script.strip():
            raise UsageError("The edited script is empty: nothing was submitted.")
    new_id = cluster.resubmit(script, work_dir=details.work_dir, name=details.name or job_id)
    msg = f"submitted as {new_id} (from {details.work_dir})"
    if args.json:  # the JSON names the new job; the line says which job it came from
        out.action_done(True, cluster.name, new_id, msg)
    else:
        out.action_done(False, cluster.name, job_id, msg)
    return EXIT_OK
