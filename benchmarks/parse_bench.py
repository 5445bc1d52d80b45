"""squeue/sacct at 10,000 lines to the typed rows the faces use, beside the plain-split
baseline computed on the same text in the same run. No cluster needed.

    python -m benchmarks.parse_bench [--lines 10000] [--runs 7]

- baseline: ``dict(zip(keys, line.split("|")))`` per line (no types, no checks);
- cold: ``parse_squeue(text, into=QueueJob)`` as the first refresh of a process does;
- refresh: the same with the previous refresh's rows (``reuse``) and 50 lines changed
  (running jobs' elapsed time), what every later queue refresh costs;
- validated: the general path (pydantic validation per row), the reference the fast
  path is tested against;
- sacct: ``parse_sacct(text, into=HistoryJob)``: allocations with their steps folded;
  ``parse_sacct_general`` (any field order) is its reference.

Each parse is timed in turns with its baseline (median of each, a collection before each
call), so a busy moment of the machine weighs on both alike.

The lines are the captured outputs of tests/fixtures/slurm-22.05.8-dev repeated with
fresh job ids, and distinct elapsed times (a real queue repeats fewer values than copies).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcui.backends.slurm import accounting as sa
from hpcui.backends.slurm import queue as sq
from hpcui.sitestate import HistoryJob, QueueJob

FIXTURES = Path(__file__).resolve().parent.parent / "tests/fixtures/slurm-22.05.8-dev"


def _clock(i: int) -> str:
    return f"{i // 3600}:{i // 60 % 60:02d}:{i % 60:02d}"


def squeue_lines(n: int, *, bump: int = 0, changed: int = 0) -> str:
    """n lines like the captured ones; each job its own id and elapsed time. `changed` of
    them (spread out) have `bump` more seconds elapsed."""
    base = [line for line in (FIXTURES / "squeue_hpcui_format.txt").read_text().splitlines()]
    base = [line for line in base if line.strip()]
    step = max(1, n // changed) if changed else 0
    out = []
    for i in range(n):
        f = base[i % len(base)].split("|")
        group = 100_000 + (i // len(base)) * len(base)
        f[0] = str(100_000 + i)
        f[1] = f[0] if f[2] == "N/A" else str(group)  # array tasks share their array's id
        f[17] = _clock(i % 7200 + (bump if step and i % step == 0 else 0))
        out.append("|".join(f))
    return "\n".join(out) + "\n"


def sacct_lines(n: int) -> str:
    """n allocations (each with its steps, as sacct prints them) like the captured ones."""
    blocks: list[list[str]] = []
    for line in (FIXTURES / "sacct_hpcui_format.txt").read_text().splitlines():
        if not line.strip():
            continue
        if "." in line.split("|", 1)[0]:
            blocks[-1].append(line)
        else:
            blocks.append([line])
    out = []
    for i in range(n):
        for line in blocks[i % len(blocks)]:
            head, rest = line.split("|", 1)
            step = head.split(".", 1)[1] if "." in head else None
            jid = str(200_000 + i)
            out.append(f"{jid}.{step}|{rest}" if step else f"{jid}|{rest}")
    return "\n".join(out) + "\n"


def median_ms(call: Callable[[], Any], runs: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000, result


def paired(call: Callable[[], Any], base: Callable[[], Any], runs: int) -> tuple[float, float, Any]:
    """Median ms of `call` and of `base`, timed in turns so that the machine's mood of the
    moment weighs on both alike; each starts after a collection and frees its rows after
    its clock stops, so neither pays for the other's garbage."""
    took: list[float] = []
    based: list[float] = []
    result = None
    for _ in range(runs):
        for fn, times in ((base, based), (call, took)):
            result = None
            gc.collect()
            t = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - t)
    return statistics.median(took) * 1000, statistics.median(based) * 1000, result


def baseline(text: str, keys: list[str]) -> list[dict[str, str]]:
    return [dict(zip(keys, line.split("|"), strict=False)) for line in text.splitlines()]


def figures(n: int = 10_000, runs: int = 7) -> list[tuple[str, float, float]]:
    """(what, ms, baseline ms) rows."""
    rows = []
    text = squeue_lines(n)
    later = squeue_lines(n, bump=5, changed=50)
    keys = list(sq._SQUEUE.values())
    cold, base, jobs = paired(
        lambda: sq.parse_squeue(text, into=QueueJob), lambda: baseline(text, keys), runs
    )
    assert len(jobs) == n and isinstance(jobs[0], QueueJob)
    rows.append((f"squeue {n:,} lines -> QueueJob, first refresh", cold, base))

    def refresh() -> list[QueueJob]:
        reuse: dict[str, Any] = {}
        sq.parse_squeue(text, into=QueueJob, reuse=reuse)
        t = time.perf_counter()
        out = sq.parse_squeue(later, into=QueueJob, reuse=reuse)
        refresh.took.append(time.perf_counter() - t)  # type: ignore[attr-defined]
        return out

    refresh.took = []  # type: ignore[attr-defined]
    median_ms(refresh, runs)
    took = statistics.median(refresh.took) * 1000  # type: ignore[attr-defined]
    rows.append((f"squeue {n:,} lines, 50 changed, next refresh (reuse)", took, base))
    slow, _ = median_ms(lambda: sq.parse_squeue_validated(text, into=QueueJob), max(3, runs // 2))
    rows.append((f"squeue {n:,} lines, validated path (reference)", slow, base))

    acct = sacct_lines(n)
    acct_keys = list(sa._SACCT.values())
    hist_ms, acct_base, hist = paired(
        lambda: sa.parse_sacct(acct, into=HistoryJob), lambda: baseline(acct, acct_keys), runs
    )
    assert len(hist) == n and isinstance(hist[0], HistoryJob)
    lines = len(acct.splitlines())
    rows.append((f"sacct {n:,} jobs ({lines:,} lines) -> HistoryJob", hist_ms, acct_base))
    general, _ = median_ms(lambda: sa.parse_sacct_general(acct, into=HistoryJob), max(3, runs // 2))
    rows.append((f"sacct {n:,} jobs, any-field-order path (reference)", general, acct_base))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds (the suite)")
    args = parser.parse_args(argv)
    if args.quick:
        args.lines, args.runs = 200, 2
    print(f"{'parse (median of ' + str(args.runs) + ')':56} {'ms':>7} {'baseline':>9} {'ratio':>6}")
    for what, ms, base in figures(args.lines, args.runs):
        print(f"{what:56} {ms:7.1f} {base:9.1f} {ms / base:6.2f}")
    print("goal (issue 21): ratio <= 2 (baseline: plain split into a dict, same text)")


if __name__ == "__main__":
    main()
