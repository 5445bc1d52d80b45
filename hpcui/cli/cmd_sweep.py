"""sweep: start one, show its table, resume what failed, cancel it, list them."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hpcui.cli import EXIT_OK
from hpcui.cli import output as out
from hpcui.cli.common import cluster_name, connect, resource_kwargs
from hpcui.errors import UsageError

if TYPE_CHECKING:
    from hpcui.sweeps.sweep import Sweep

ACTIONS = ("show", "resume", "cancel", "list")


def cmd_sweep(args: argparse.Namespace) -> int:
    if args.target == "list":
        return _list(args)
    if args.target in ACTIONS:
        if not args.sweep_name:
            raise UsageError(f"`hpcui sweep {args.target}` needs the sweep's NAME "
                             "(`hpcui sweep list` shows them).")  # fmt: skip
        return {"show": _show, "resume": _resume, "cancel": _cancel}[args.target](args)
    return _start(args)


def _configs(args: argparse.Namespace) -> dict[str, Any]:
    from hpcui.sweeps.space import parse_grid_option

    if sum(bool(x) for x in (args.grid, args.configs, args.random)) > 1:
        raise UsageError("Give one of --grid, --configs or --random.")
    if args.random:
        return {"random": _random_space(args.random), "seed": args.seed}
    if args.grid:
        grid: dict[str, Any] = {}
        for text in args.grid:
            name, values = parse_grid_option(text)
            if name in grid:
                raise UsageError(f"--grid {name} is given twice: list its values once.")
            grid[name] = values
        return {"grid": grid}
    if args.configs:
        text = args.configs
        if text.startswith("@"):
            try:
                text = Path(text[1:]).expanduser().read_text(encoding="utf-8")
            except OSError as exc:
                raise UsageError(f"--configs {args.configs}: {exc}.") from None
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--configs is not JSON ({exc}).") from None
        if not isinstance(value, list):
            raise UsageError("--configs is a JSON list of objects: '[{\"lr\": 0.1}, ...]'.")
        return {"configs": value}
    raise UsageError("A sweep needs its configurations: --grid NAME=V1,V2 (repeatable), "
                     "--configs JSON|@FILE or --random JSON.")  # fmt: skip


def _random_space(text: str) -> dict[str, Any]:
    """--random's JSON as space.expand takes it: {"uniform": [a, b]} is its (a, b) tuple."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--random is not JSON ({exc}).") from None
    if not isinstance(value, dict) or "n" not in value:
        raise UsageError('--random is a JSON object with the draws\' count: \'{"lr": {"log": '
                         '[1e-5, 1e-2]}, "n": 50}\'.')  # fmt: skip
    return {
        k: tuple(v["uniform"]) if isinstance(v, dict) and set(v) == {"uniform"}
        and isinstance(v["uniform"], list) else v
        for k, v in value.items()
    }  # fmt: skip


def _start(args: argparse.Namespace) -> int:
    from hpcui.submission.targets import is_function_spec, load_function, script_call
    from hpcui.sweeps.sweep import start

    if args.sweep_name:
        raise UsageError(f"Unexpected {args.sweep_name!r}: the new sweep is named with --name.")
    res = resource_kwargs(args)
    name = res.pop("name", None)  # the sweep's, and so its jobs' name
    if not name:
        raise UsageError("A sweep needs a name to come back to: --name NAME (e.g. lr-scan).")
    spaces = _configs(args)
    mode: Literal["call", "script"] = "call"
    if is_function_spec(args.target):
        fn, call_args = load_function(args.target), []
    else:
        call = script_call(args.target, [])
        fn, call_args, mode = call.fn, call.args, "script"
    cluster = connect(cluster_name(args))
    sweep = start(cluster, fn, name=name, args=call_args, mode=mode,
                  calls_per_task=args.calls_per_task, **spaces, **res)  # fmt: skip
    return _report(args, sweep)


def _report(args: argparse.Namespace, sweep: Sweep) -> int:
    from hpcui.cli.models import SweepOutput

    counts = sweep.counts()
    record = SweepOutput(
        cluster=sweep.cluster.name, name=sweep.name, elements=len(sweep.spec.elements),
        submitted=sweep.last_submitted, counts=counts,
    )  # fmt: skip
    if args.json:
        out.emit_json(SweepOutput, record)
        return EXIT_OK
    said = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    print(f"sweep {sweep.name} on {sweep.cluster.name}: {record.elements} configurations ({said})")
    if record.submitted:
        print(f"submitted {len(record.submitted)}: {_ids_line(record.submitted)}")
    else:
        print("submitted nothing: every configuration has a job (done, queued or running)")
    return EXIT_OK


def _ids_line(ids: list[str]) -> str:
    return " ".join(ids) if len(ids) <= 12 else f"{' '.join(ids[:12])} ... ({len(ids)})"


def _resume(args: argparse.Namespace) -> int:
    from hpcui.sweeps.sweep import get

    sweep = get(connect(cluster_name(args)), args.sweep_name)
    res = resource_kwargs(args)
    if args.for_state:
        sweep.resume(by_state={args.for_state: res})
    else:
        sweep.resume(**res)
    return _report(args, sweep)


def _cancel(args: argparse.Namespace) -> int:
    from hpcui.sweeps.sweep import get

    sweep = get(connect(cluster_name(args)), args.sweep_name)
    ids = sweep.cancel()
    if args.json:
        json.dump({"cluster": sweep.cluster.name, "name": sweep.name, "cancelled": ids},
                  sys.stdout, indent=2)  # fmt: skip
        print()
    else:
        print(f"sweep {sweep.name}: cancelled {len(ids)} ({_ids_line(ids) or 'none was live'})")
    return EXIT_OK


def _show(args: argparse.Namespace) -> int:
    from hpcui.cli.models import SweepTable
    from hpcui.sweeps import table
    from hpcui.sweeps.sweep import get

    sweep = get(connect(cluster_name(args)), args.sweep_name)
    rows = sweep.results(metrics=not args.no_metrics)
    if args.filter:
        rows = table.filter_rows(rows, args.filter)
    if args.sort:
        rows = table.sort_rows(rows, args.sort)
    if args.json:
        out.emit_json(SweepTable, SweepTable(cluster=sweep.cluster.name, name=sweep.name,
                                             columns=table.columns(rows), rows=rows))  # fmt: skip
    elif args.csv:
        sys.stdout.write(table.to_csv(rows))
    else:
        _print_table(rows, table.columns(rows))
    return EXIT_OK


def _print_table(rows: list[dict[str, Any]], cols: list[str]) -> None:
    from hpcui.sweeps import table

    shown = [c for c in cols if c != "key"]
    at = shown.index("state") if "state" in shown else None
    out.table(shown, [[table.cell_text(c, r.get(c)) for c in shown] for r in rows],
              colours={at: out.state} if at is not None else None)  # fmt: skip


def _list(args: argparse.Namespace) -> int:
    from hpcui.cli.models import SweepRow
    from hpcui.sweeps import store

    rows = []
    for cluster, name in store.names(getattr(args, "cluster", None)):
        spec = store.load(cluster, name)
        if spec is not None:
            rows.append(SweepRow(cluster=cluster, name=name, function=spec.function,
                                 elements=len(spec.elements)))  # fmt: skip
    if args.json:
        out.emit_json(list[SweepRow], rows)
    elif not rows:
        print("no sweeps on this machine (start one: hpcui sweep MODULE:FN --grid ... --name NAME)")
    else:
        for r in rows:
            print(f"{r.cluster}  {r.name}  {r.elements} configurations  {r.function}")
    return EXIT_OK
