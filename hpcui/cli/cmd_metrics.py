"""metrics: the numbers a training loop printed, per job, for scripts (--json, --csv)."""

from __future__ import annotations

import argparse
import csv
import re
import sys
from typing import TYPE_CHECKING, TextIO

from hpcui.cli import EXIT_OK
from hpcui.cli import output as out
from hpcui.cli.common import cluster_name, connect, split_job_ref
from hpcui.errors import UsageError

if TYPE_CHECKING:
    from hpcui.metrics import Metrics


def cmd_metrics(args: argparse.Namespace) -> int:
    from hpcui.metrics import read_metrics

    if args.json and args.csv:
        raise UsageError("Choose one of --json and --csv.")
    try:
        re.compile(args.pattern or "")
    except re.error as exc:
        raise UsageError(f"--pattern is not a regular expression: {exc}.") from None
    found: list[Metrics] = []
    for ref in args.jobs:
        name, job_id = split_job_ref(ref, cluster_name(args))
        found.append(
            read_metrics(
                connect(name),
                job_id,
                stream="stderr" if args.stderr else "stdout",
                rank=args.rank,
                pattern=args.pattern or "",
            )
        )
    if args.json:
        from hpcui.metrics import Metrics

        out.emit_json(list[Metrics], found)
    elif args.csv:
        write_csv(found, sys.stdout)
    else:
        for i, m in enumerate(found):
            if i:
                print()
            _summary(m)
    return EXIT_OK


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
