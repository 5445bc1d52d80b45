"""metrics: the numbers a training loop printed, per job, for scripts (--json, --csv)."""

from __future__ import annotations

import argparse
import csv
import re
import sys
from typing import TYPE_CHECKING, Literal, TextIO

from hpcui.cli import EXIT_OK
from hpcui.cli import output as out
from hpcui.cli.common import cluster_name, connect, split_job_ref
from hpcui.errors import UsageError

if TYPE_CHECKING:
    from hpcui.metrics import Metrics


def cmd_metrics(args: argparse.Namespace) -> int:
    from hpcui.metrics import read_metrics, read_metrics_file, read_ranks

    if args.json and args.csv:
        raise UsageError("Choose one of --json and --csv.")
    try:
        re.compile(args.pattern or "")
    except re.error as exc:
        raise UsageError(f"--pattern is not a regular expression: {exc}.") from None
    if args.all_ranks and args.rank:
        raise UsageError("Choose one of --rank and --all-ranks.")
    if args.file and (args.all_ranks or args.rank or args.stderr or args.pattern):
        raise UsageError("--file reads that one file: leave out --rank, --all-ranks, --stderr "
                         "and --pattern (they choose among the job's logs).")  # fmt: skip
    stream: Literal["stdout", "stderr"] = "stderr" if args.stderr else "stdout"
    found: list[Metrics] = []
    by_job: list[list[Metrics]] = []
    for ref in args.jobs:
        name, job_id = split_job_ref(ref, cluster_name(args))
        if args.file:  # a logger's own file (Lightning's CSVLogger), not the log
            found.append(read_metrics_file(connect(name), job_id, args.file))
            continue
        if args.all_ranks:  # one Metrics per rank, labelled `cluster:id rank N`
            ranks = read_ranks(connect(name), job_id, stream=stream, pattern=args.pattern or "")
            by_job.append(ranks)
            found += ranks
            continue
        found.append(
            read_metrics(
                connect(name), job_id, stream=stream, rank=args.rank, pattern=args.pattern or ""
            )
        )
    if args.json:
        from hpcui.metrics import Metrics

        out.emit_json(list[Metrics], found)
    elif args.csv:
        write_csv(found, sys.stdout)
    elif args.all_ranks:
        for i, ranks in enumerate(by_job):
            if i:
                print()
            _ranks(ranks)
    else:
        for i, m in enumerate(found):
            if i:
                print()
            _summary(m)
    return EXIT_OK


def _ranks(ranks: list[Metrics]) -> None:
    """Rank 0 beside the others: per metric its last value on rank 0, and the lowest and
    highest last value of the other ranks with the rank that printed it."""
    if not ranks:
        return
    job = ranks[0].job.rsplit(" rank ", 1)[0]
    names: list[str] = []
    for m in ranks:
        names += [n for n in m.names if n not in names]
    if not names:
        print(f"{job}: no metrics in any rank's log yet")
        return
    print(out.style(job, "bold") + f" · {len(ranks)} ranks · last values, rank 0 vs the others")
    rows = []
    for n in names:
        last = {i: s.y[-1] for i, m in enumerate(ranks) if (s := m.get(n)) is not None and s.y}
        others = {i: v for i, v in last.items() if i != 0}
        low = min(others, key=others.__getitem__) if others else None
        high = max(others, key=others.__getitem__) if others else None
        rows.append([
            n,
            f"{last[0]:.4g}" if 0 in last else "-",
            f"{others[low]:.4g} (rank {low})" if low is not None else "-",
            f"{others[high]:.4g} (rank {high})" if high is not None else "-",
            f"{len(last)}/{len(ranks)}",
        ])  # fmt: skip
    out.table(["METRIC", "RANK 0", "OTHERS MIN", "OTHERS MAX", "RANKS"], rows, right=(1, 2, 3))


def write_csv(found: list[Metrics], stream: TextIO) -> None:
    """Wide CSV, one row per (job, x): ``job,<x>,loss,acc,...``; empty where a record had
    no value for that metric. One x column: the jobs' x name when they agree, else ``x``."""
    names: list[str] = []
    for m in found:
        names += [n for n in m.names if n not in names]
    x_names = {m.x_name for m in found}
    x_col = x_names.pop() if len(x_names) == 1 else "x"
    writer = csv.writer(stream)
    writer.writerow(["job", x_col, *names])
    for m in found:
        rows: dict[float, dict[str, float]] = {}
        order: list[float] = []
        for s in m.series:
            for x, y in zip(s.x, s.y):
                if x not in rows:
                    rows[x] = {}
                    order.append(x)
                rows[x][s.name] = y  # the last value printed at that x
        for x in sorted(order):
            writer.writerow([m.job, _num(x), *(_num(rows[x].get(n)) for n in names)])


def _num(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if value.is_integer() else repr(value)


def _summary(m: Metrics) -> None:
    if not m.series:
        print(
            f"{m.job}: no metrics in the log yet (hpcui reads key=value, key: value and JSON "
            "lines; --pattern REGEX reads any other form)"
        )
        return
    print(out.style(f"{m.job}", "bold") + f" · against {m.x_name} · {len(m.series)} metrics")
    out.table(
        ["METRIC", "POINTS", f"LAST {m.x_name.upper()}", "FIRST", "LAST", "MIN", "MAX"],
        [
            [s.name, len(s.y), f"{s.x[-1]:g}", f"{s.y[0]:.4g}", f"{s.y[-1]:.4g}",
             f"{min(s.y):.4g}", f"{max(s.y):.4g}"]
            for s in m.series
        ],
        right=range(1, 7),
    )  # fmt: skip
