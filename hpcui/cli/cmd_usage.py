"""`hpcui usage JOB` (one look, kept) and `hpcui top [JOB]` (live, like nvtop for your job)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, TextIO

from hpcui.cli import EXIT_OK, EXIT_USAGE
from hpcui.cli import output as out
from hpcui.cli.common import cluster_name, connect, split_job_ref
from hpcui.common.formatting import figure, usage_bar

if TYPE_CHECKING:
    from hpcui.clusters.cluster import Cluster
    from hpcui.jobs.usage import UsageReport, UsageSample

#: `top` without a job looks at this many of your running jobs at most
TOP_JOBS = 8
BAR = 20


def bar(pct: float | None, width: int = BAR, stream: TextIO | None = None) -> str:
    """formatting.usage_bar in ASCII (`[#####.....]`, pipes and any terminal), in its
    colour where the stream shows colour; the app draws the same bar."""
    cells, colour = usage_bar(pct, width, "#", ".")
    return "[" + out.style(cells, colour, stream=stream) + "]"


def render(sample: UsageSample, report: UsageReport, stream: TextIO) -> None:
    """One job's look: a bar per GPU, the tasks, the history's summary, the verdicts."""
    from hpcui.jobs.usage import gpu_figures, task_line

    stream.write(out.style(f"job {sample.job_id} on {sample.cluster}", "bold", stream=stream))
    stream.write(f"  ({report.samples} sample(s) over {report.span_s:.0f} s)\n")
    for g in sample.gpus:
        stream.write(
            f"  {g.node} GPU{g.index}  {bar(g.util_pct, stream=stream)} "
            f"{figure(g.util_pct, '%'):>4}  "
            f"{gpu_figures(g)}\n"
        )
    for t in sample.tasks:
        stream.write(f"  {task_line(t)}\n")
    for n in sample.notes:
        stream.write(out.style(f"  note: {n}", "dim", stream=stream) + "\n")
    for v in report.verdicts:
        stream.write(out.style(f"  ! {v}", "yellow", stream=stream) + "\n")


def cmd_usage(args: argparse.Namespace) -> int:
    from hpcui.jobs.usage import UsageReport

    name, job_id = split_job_ref(args.job, cluster_name(args))
    cluster = connect(name)  # any job of yours, not only hpcui's: no registry needed
    now = cluster.usage.look([job_id])[job_id]  # one look now (kept if the job runs)
    report = cluster.usage.report(job_id)
    if args.json:
        out.emit_json(UsageReport, report)
        return EXIT_OK
    if report.sample is None:
        out.note(
            f"job {job_id} on {cluster.name}: no usage figures "
            f"({'; '.join(now.notes) or 'it is not running'}), and none were kept while it "
            "ran (`hpcui top` or `hpcui usage` while a job runs keeps its samples)."
        )
        return EXIT_OK
    render(report.sample, report, sys.stdout)
    if report.summary:
        print()
        out.table(
            ["NODE", "GPU", "SAMPLES", "MEAN %", "PEAK %", "MEAN MEM", "PEAK MEM", "TOTAL"],
            [
                (
                    s.node,
                    s.index,
                    s.samples,
                    figure(s.mean_util_pct),
                    figure(s.peak_util_pct),
                    figure(s.mean_mem_mib),
                    figure(s.peak_mem_mib),
                    figure(s.mem_total_mib),
                )
                for s in report.summary
            ],
            right=range(1, 8),
        )
    return EXIT_OK


def _running(cluster: Cluster) -> list[str]:
    from hpcui.backends.states import JobState

    if not cluster.capabilities.queue:  # the local cluster: hpcui's own jobs
        recs = cluster.records(limit=200)
        ids = [r.job_id for r in recs if r.job_id and not r.state.is_final]
        states = cluster.scheduler.status(ids) if ids else {}
        return [j for j in ids if states.get(j) and states[j].state is JobState.RUNNING][:TOP_JOBS]
    jobs = [j for j in cluster.site.queue() if j.state is JobState.RUNNING]
    return [j.job_id for j in jobs][-TOP_JOBS:]


def cmd_top(args: argparse.Namespace) -> int:
    if args.job:
        name, job_id = split_job_ref(args.job, cluster_name(args))
        cluster = connect(name)
        wanted: list[str] | None = [job_id]
    else:
        cluster = connect(cluster_name(args))
        wanted = None
    tty = sys.stdout.isatty()
    shown = 0
    try:
        while args.count is None or shown < args.count:
            ids = wanted if wanted is not None else _running(cluster)
            samples = cluster.usage.look(ids) if ids else {}
            if tty:
                sys.stdout.write("\x1b[H\x1b[2J")
            stamp = time.strftime("%H:%M:%S")
            print(out.style(f"hpcui top · {cluster.name} · {stamp}", "bold"))
            if not ids:
                print("no running job to look at")
            for jid, sample in samples.items():
                render(sample, cluster.usage.report(jid), sys.stdout)
                finish = cluster.will_finish(jid) if sample.gpus or sample.tasks else None
                if finish is not None:  # from the progress its log printed
                    print(f"will it finish: {finish.line(jid)}")
            sys.stdout.flush()
            shown += 1
            if wanted is not None and all(not s.gpus and not s.tasks for s in samples.values()):
                print(f"job {job_id} is not running (any more): nothing left to watch")
                return EXIT_OK
            if args.count is None or shown < args.count:
                time.sleep(args.interval)
    except KeyboardInterrupt:
        return EXIT_OK
    return EXIT_OK if shown else EXIT_USAGE
