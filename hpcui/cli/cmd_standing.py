"""free and budget: what could start now, and what the user has left."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from hpcui.cli import EXIT_OK
from hpcui.cli import output as out
from hpcui.cli.common import cluster_name, connect
from hpcui.common.formatting import printable


def cmd_free(args: argparse.Namespace) -> int:
    from hpcui.sitestate import FreeReport

    cluster = connect(cluster_name(args))
    report = cluster.site.free()
    if args.json:
        out.emit_json(FreeReport, report)
        return EXIT_OK
    if args.nodes:
        out.table(
            ["NODE", "PARTITION", "STATE", "CPUS FREE", "GPUS FREE", "MEM USED"],
            [
                (
                    n.node,
                    n.partition + ("*" if n.is_default else ""),
                    n.state + ("" if n.responding else " (not responding)"),
                    f"{n.cpus_idle}/{n.cpus_total}",
                    f"{n.gpus_free}/{n.gpus_total}" if n.gpus_total else "-",
                    f"{'?' if n.mem_alloc_mb is None else n.mem_alloc_mb}/{n.mem_mb} MB"
                    if n.mem_mb
                    else "-",
                )
                for n in report.nodes
            ],
            colours={2: _state_colour},
            right=(3, 4, 5),
        )
        return EXIT_OK
    out.table(
        ["PARTITION", "NODES IDLE/MIX/ALLOC/OUT", "CPUS FREE", "GPUS FREE", "MOST ON ONE NODE"],
        [
            (
                p.partition + ("*" if p.is_default else ""),
                f"{p.nodes_idle}/{p.nodes_mixed}/{p.nodes_allocated}/{p.nodes_unavailable}",
                p.cpus_free,
                f"{p.gpus_free}/{p.gpus_total}" if p.gpus_total else "-",
                p.max_gpus_one_node if p.gpus_total else "-",
            )
            for p in report.partitions
        ],
        right=(2, 3, 4),
    )
    return EXIT_OK


def _state_colour(cell: str) -> str | None:
    word = cell.split(" ")[0]
    if word == "idle":
        return "green"
    if word in ("mixed", "allocated", "completing"):
        return "yellow"
    return "red"


if TYPE_CHECKING:
    from hpcui.sitestate import Budget


def cmd_budget(args: argparse.Namespace) -> int:
    from hpcui.sitestate import Standing

    cluster = connect(cluster_name(args))
    st = cluster.site.standing()
    if args.json:
        out.emit_json(Standing, st)
        return EXIT_OK
    if st.note:
        out.note(st.note)
    if st.fair_share:
        out.table(
            ["ACCOUNT", "FAIR SHARE", "SHARES", "USAGE (EFFECTIVE)"],
            [
                (
                    f.account,
                    "-" if f.fair_share is None else f"{f.fair_share:.3f}",
                    "-" if f.norm_shares is None else f"{f.norm_shares:.3f}",
                    "-" if f.effective_usage is None else f"{f.effective_usage:.3f}",
                )
                for f in st.fair_share
            ],
            right=(1, 2, 3),
        )
        print("fair share: 1.0 = nothing used yet, 0.5 = used your share, 0 = far over it")
    if st.pending:
        print()
        out.table(
            [
                "PENDING JOB",
                "PARTITION",
                "PRIORITY",
                "AGE",
                "FAIR SHARE",
                "JOB SIZE",
                "PART.",
                "QOS",
            ],
            [
                (
                    p.job_id,
                    p.partition,
                    *(
                        _num(v)
                        for v in (
                            p.priority,
                            p.age,
                            p.fair_share,
                            p.job_size,
                            p.partition_factor,
                            p.qos,
                        )
                    ),
                )
                for p in st.pending
            ],
            right=(2, 3, 4, 5, 6, 7),
        )
    if st.ledger is not None:
        print_ledger(st.ledger)
    alloc = st.allocation
    if alloc is not None:
        print()
        if alloc.entries:
            out.table(
                ["PROJECT", "RESOURCE", "USED", "ALLOCATED", "LEFT", "UNIT"],
                [
                    (
                        e.project,
                        e.resource,
                        _num(e.used),
                        _num(e.allocated),
                        _num(e.left),
                        e.unit,
                    )
                    for e in alloc.entries
                ],
                colours={4: lambda s: "red" if s.startswith("-") else None},
                right=(2, 3, 4),
            )
        elif alloc.text:
            print(f"{alloc.tool}:")
            for line in alloc.text.splitlines():  # a remote tool's text: no escapes through
                print(printable(line))
        if alloc.error:
            out.note(f"allocation: {alloc.error}")
    elif not st.fair_share and not st.pending and not (st.ledger and st.ledger.lines):
        out.note(
            f"{cluster.name}: nothing to show (no fair share; no allocation tool in its profile)"
        )
    return EXIT_OK


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"


def print_ledger(ledger: Budget) -> None:
    """Spent / in flight / committed / left per limit (hours of each TRES)."""
    if ledger.lines:
        print()
        out.table(
            ["ACCOUNT", "USER", "LIMIT", "SPENT", "IN FLIGHT", "COMMITTED", "LEFT", "UNIT"],
            [
                (
                    ln.account, ln.user or "(all)", _hours(ln.limit), _hours(ln.spent),
                    _hours(ln.in_flight), _hours(ln.committed), _hours(ln.left), ln.unit,
                )
                for ln in ledger.lines
            ],
            colours={6: lambda s: "red" if s.startswith("-") else None},
            right=(2, 3, 4, 5, 6),
        )  # fmt: skip
        print(
            "in flight: the running jobs' use to their time limits (Slurm's TRESRunMins); "
            f"committed: your {ledger.pending_jobs} pending jobs at their limits; "
            f"from {ledger.source}"
        )
    if ledger.note:
        out.note(ledger.note)


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"
