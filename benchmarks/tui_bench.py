"""TUI figures (issue 8): first paint, 10,000-job refreshes, RSS. Prints, asserts nothing.

    python -m benchmarks.tui_bench [--jobs 10000] [--runs 5]

Everything runs headless (``App.run_test``, 140x36) on the ``local`` cluster from a config
and registry in a temp dir (HPCUI_CONFIG / HPCUI_DATA_DIR), so no network is touched.

- first paint: from ``HpcuiApp()`` to the end of the first ``render_lines`` of the Jobs
  screen's ``#live`` table (imports are done once before and reported on their own);
- refresh: the two halves of ``JobsScreen.refresh_table`` — ``merge_rows`` (QueueJob ->
  JobRow) and ``JobTable.apply`` (cell updates in one ``batch_update``) — plus the time
  until the table has painted again. Measured for 10,000 jobs onto an empty table, 10,000
  with 50 changed (state and elapsed time), and 10,000 with every elapsed time ticking;
- RSS: VmRSS (and peak ru_maxrss) with the 10,000 jobs shown.

The jobs are the captured squeue lines of tests/fixtures/slurm-22.05.8-dev (parsed with
``parse_squeue``) repeated with fresh job ids, so rows have the real shapes. Each figure is
the median (and min) of ``--runs`` repetitions (the empty-table apply: of fewer, it is slow).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import re
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests/fixtures/slurm-22.05.8-dev/squeue_hpcui_format.txt"
SIZE = (140, 36)
NOW = datetime(2026, 11, 22, 14, 0, tzinfo=UTC)  # fixed: rows are deterministic


def setup_env(tmp: Path) -> None:
    cfg = tmp / "hpcui.toml"
    cfg.write_text(f'[clusters.local]\nscheduler = "local"\nremote_base = "{tmp}/base"\n')
    os.environ["HPCUI_CONFIG"] = str(cfg)
    os.environ["HPCUI_DATA_DIR"] = str(tmp / "data")


def rss_mb() -> tuple[float, float]:
    """(current VmRSS, peak ru_maxrss) in MB."""
    current = 0.0
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                current = int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak_mb = peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024
    return current, peak_mb


_DIGITS = re.compile(r"^\d+")


def synthetic_jobs(n: int) -> list[Any]:
    """``n`` QueueJobs: the captured lines over and over, each copy with new job ids."""
    from hpcui.backends.slurm.queue import parse_squeue
    from hpcui.sitestate.jobs import QueueJob

    base = [QueueJob.from_entry(e) for e in parse_squeue(FIXTURE.read_text())]
    nums = [int(_DIGITS.match(j.job_id).group()) for j in base]  # type: ignore[union-attr]
    lo, span = min(nums), max(nums) - min(nums) + 1
    jobs = []
    copy = 0
    while len(jobs) < n:
        for job in base:
            if len(jobs) == n:
                break
            shift = 100_000 + copy * span - lo

            def bump(text: str | None, shift: int = shift) -> str | None:
                if text is None:
                    return None
                return _DIGITS.sub(lambda m: str(int(m.group()) + shift), text, count=1)

            jobs.append(
                job.model_copy(
                    update={"job_id": bump(job.job_id), "array_job_id": bump(job.array_job_id)}
                )
            )
        copy += 1
    assert len({j.job_id for j in jobs}) == n, "job ids must be unique"
    return jobs


def changed_jobs(jobs: list[Any], count: int, flip: bool) -> list[Any]:
    """``jobs`` with ``count`` of them (spread evenly) changed: state and elapsed time.
    ``flip`` False gives ``jobs`` back, so alternating calls each change the same rows."""
    if not flip:
        return jobs
    from hpcui.backends.states import JobState

    step = max(1, len(jobs) // count)
    pick = set(range(0, step * count, step))
    out = []
    for i, job in enumerate(jobs):
        if i in pick:
            state = JobState.COMPLETING if job.state is JobState.RUNNING else JobState.RUNNING
            job = job.model_copy(
                update={"state": state, "nodelist": "vm", "elapsed_s": (job.elapsed_s or 0) + 61}
            )
        out.append(job)
    return out


def ticked(jobs: list[Any], seconds: int) -> list[Any]:
    return [j.model_copy(update={"elapsed_s": (j.elapsed_s or 0) + seconds}) for j in jobs]


class PaintProbe:
    """Counts paints of the ``#live`` JobTable (end of each ``render_lines``)."""

    def __init__(self) -> None:
        from hpcui.tui.job_table import JobTable

        self.count = 0
        self.last = 0.0
        original = JobTable.render_lines
        probe = self

        def render_lines(self: Any, crop: Any) -> Any:
            lines = original(self, crop)
            if self.id == "live":
                probe.count += 1
                probe.last = time.perf_counter()
            return lines

        JobTable.render_lines = render_lines  # type: ignore[method-assign]

    async def next_paint(self, pilot: Any, after: int, timeout: float = 60.0) -> float:
        deadline = time.monotonic() + timeout
        while self.count <= after:
            if time.monotonic() > deadline:
                raise RuntimeError("the jobs table never painted")
            await pilot.pause(0.001)
        return self.last


def fresh_clusters() -> None:
    import hpcui.clusters.api

    hpcui.clusters.api._clusters = {}  # type: ignore[attr-defined]


async def first_paint(probe: PaintProbe) -> float:
    from hpcui.tui.app import HpcuiApp
    from hpcui.tui.screens.jobs import JobsScreen

    fresh_clusters()
    seen = probe.count
    t0 = time.perf_counter()
    app = HpcuiApp()
    async with app.run_test(size=SIZE) as pilot:
        painted = await probe.next_paint(pilot, seen)
        assert isinstance(app.screen, JobsScreen)
    return painted - t0


def stats(values: list[float]) -> str:
    med = statistics.median(values)
    return f"{med * 1000:9.1f} {min(values) * 1000:9.1f} {len(values):4d}"


async def refreshes(probe: PaintProbe, n: int, runs: int) -> dict[str, Any]:
    from hpcui.tui.app import HpcuiApp
    from hpcui.tui.job_table import JobTable
    from hpcui.tui.rows import collapse_arrays, merge_rows

    jobs = synthetic_jobs(n)
    out: dict[str, Any] = {"merge": [], "fold": [], "empty": [], "empty+paint": []}
    fresh_clusters()
    seen = probe.count
    app = HpcuiApp()
    async with app.run_test(size=SIZE) as pilot:
        await probe.next_paint(pilot, seen)
        screen: Any = app.screen
        await pilot.pause(0.3)  # let the local connection and first registry read settle
        screen.on_screen_suspend()  # no background registry refreshes between timings
        screen.hpcui_only = False
        table = screen.query_one("#live", JobTable)
        out["rss_empty"] = rss_mb()

        def refresh(queue: list[Any]) -> tuple[float, float, float, tuple[int, int, int], int]:
            """What refresh_table does, timed in halves (and when apply started)."""
            screen.queues = {"bench": queue}
            t0 = time.perf_counter()
            # the screen's own reuse: rows of unchanged queue rows are kept between refreshes
            screen.rows = merge_rows(
                screen.queues, [], hpcui_only=False, now=NOW, reuse=screen._row_cache
            )
            t_fold = time.perf_counter()
            # as refresh_table: the filter, then each array folded into one row
            screen.table_rows = collapse_arrays(
                {k: r for k, r in screen.rows.items() if screen.shows(r)},
                screen.expanded,
                screen._array_cache,
            )
            t1 = time.perf_counter()
            out["fold"].append(t1 - t_fold)
            result = table.apply(screen.table_rows)
            t2 = time.perf_counter()
            return t_fold - t0, t2 - t1, t1, result, probe.count

        async def timed(name: str, queue: list[Any], prepare: Callable[[], None] | None) -> None:
            if prepare is not None:
                prepare()
                await pilot.pause(0.05)
            gc.collect()
            merge, apply, start, result, seen = refresh(queue)
            painted = await probe.next_paint(pilot, seen)
            out["merge"].append(merge)
            out.setdefault(name + ":merge", []).append(merge)
            out.setdefault(name, []).append(apply)
            out.setdefault(name + "+paint", []).append(painted - start)
            out.setdefault(name + ":result", result)

        for _ in range(max(1, min(runs, 3))):  # ~seconds each
            await timed(
                "empty",
                jobs,
                lambda: (table.forget(), screen._row_cache.clear(), screen._array_cache.clear()),
            )
        # every job is on screen: as its own row, or inside its array's folded row
        assert table.row_count == len(screen.table_rows), table.row_count
        assert sum(len(r.members) or 1 for r in screen.table_rows.values()) == n
        out["rows_shown"] = table.row_count
        await pilot.pause(0.2)
        gc.collect()
        out["rss_full"] = rss_mb()

        current = jobs
        for i in range(runs):
            current = changed_jobs(jobs, 50, flip=i % 2 == 0)
            await timed("changed50", current, None)
        refresh(jobs)  # back to the base (untimed): each tick then changes only elapsed times
        await pilot.pause(0.05)
        for i in range(runs):
            current = ticked(jobs, i + 1)
            await timed("tick_all", current, None)
        assert table.row_count == out["rows_shown"]
        # a filter key: the screen's own path (the rows stay; only what is visible changes)
        for _ in range(runs):
            for word in ("running", "", "train", ""):
                gc.collect()
                seen = probe.count
                t0 = time.perf_counter()
                screen.text_filter = word
                screen.refresh_table(remerge=False)
                t1 = time.perf_counter()
                painted = await probe.next_paint(pilot, seen)
                out.setdefault("filter", []).append(t1 - t0)
                out.setdefault("filter+paint", []).append(painted - t0)
                out.setdefault("filter:shown", set()).add(table.row_count)
    return out


#: the targets this table was rebuilt for (issue 21), printed beside the figures
GOALS = {"empty": "< 300", "changed50": "< 100"}


def array_folds(runs: int) -> tuple[list[float], list[float]]:
    """collapse_arrays on 10 arrays of 1,000 elements (10,000 rows), each refresh with the
    same element rows: without its cache (every array row rebuilt) and with it."""
    from hpcui.backends.states import JobState
    from hpcui.tui.rows import JobRow, collapse_arrays, state_text

    rows = {}
    for a in range(10):
        for i in range(1000):
            jid = f"{5000 + a}_{i}"
            st = JobState.RUNNING if i % 3 else JobState.PENDING
            cells = {"id": jid, "state": state_text(st)}
            rows[f"b:{jid}"] = JobRow(f"b:{jid}", "b", jid, st, True, cells)
    plain, cached, cache = [], [], {}  # type: ignore[var-annotated]
    for _ in range(max(runs, 10)):
        t = time.perf_counter()
        collapse_arrays(rows, set())
        plain.append(time.perf_counter() - t)
        t = time.perf_counter()
        collapse_arrays(rows, set(), cache)
        cached.append(time.perf_counter() - t)
    return plain, cached


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds (the suite)")
    args = parser.parse_args(argv)
    if args.quick:
        args.jobs, args.runs = 300, 1

    tmp = Path(tempfile.mkdtemp(prefix="hpcui-tui-bench-"))
    # `local` keeps no queue: its watcher's one expected warning per app is noise here
    logging.getLogger("hpcui.sitestate.watcher").setLevel(logging.ERROR)
    setup_env(tmp)
    t = time.perf_counter()
    import textual

    import hpcui.tui.app  # noqa: F401

    imports = time.perf_counter() - t
    probe = PaintProbe()

    paints = [asyncio.run(first_paint(probe)) for _ in range(args.runs)]
    r = asyncio.run(refreshes(probe, args.jobs, args.runs))

    n = f"{args.jobs:,}"
    print(f"hpcui TUI benchmark: Textual {textual.__version__}, Python {sys.version.split()[0]},")
    print(f"  {os.cpu_count()} CPUs, headless {SIZE[0]}x{SIZE[1]}, {n} jobs from {FIXTURE.name}")
    print()
    print(f"{'figure':66} {'median ms':>9} {'min ms':>9} {'runs':>4}")
    print(f"{'import textual + hpcui.tui.app (once, cold)':66} {imports * 1000:9.1f}")
    print(f"{'first paint: HpcuiApp() -> Jobs table painted':66} {stats(paints)}")
    print(
        f"{'  each run (the first one also imports lazily)':66} "
        + " ".join(f"{p * 1000:.0f}" for p in paints)
    )
    print(
        f"{'merge_rows: ' + n + ' QueueJob -> JobRow (all refreshes below)':66} {stats(r['merge'])}"
    )
    print(
        f"{'filter + collapse_arrays (all refreshes below; ' + str(r['rows_shown']) + ' rows)':66} "
        f"{stats(r['fold'])}"
    )
    plain, cached = array_folds(args.runs)
    print(f"{'collapse_arrays: 10 arrays x 1,000 elements, rows unchanged':66} {stats(plain)}")
    print(f"{'  with its cache (the array rows of the last refresh reused)':66} {stats(cached)}")
    rows = [
        ("empty", f"{n} jobs onto an empty table"),
        ("changed50", f"{n} jobs, 50 changed"),
        ("tick_all", f"{n} jobs, every elapsed time ticking"),
    ]
    for key, label in rows:
        added, removed, cells = r[key + ":result"]
        what = f"+{added} -{removed} cells {cells}"
        print(f"{'apply: ' + label + f' ({what})':66} {stats(r[key])}")
        print(f"{'  apply + repaint':66} {stats(r[key + '+paint'])}")
        print(
            f"{'  merge_rows before it (rows of unchanged jobs reused)':66} {stats(r[key + ':merge'])}"
        )
        if key in GOALS:
            print(f"{'    goal (issue 21)':66} {GOALS[key]:>9}")
    shown = ", ".join(f"{k:,}" for k in sorted(r["filter:shown"]))
    print(f"{'filter key on ' + n + ' rows (showing ' + shown + ')':66} {stats(r['filter'])}")
    print(f"{'  filter + repaint':66} {stats(r['filter+paint'])}")
    print(f"{'    goal (issue 21; was 4,800 ms for 4,000 rows)':66} {'< 100':>9}")
    print()
    for key, label in (("rss_empty", "app up, table empty"), ("rss_full", f"{n} jobs shown")):
        current, peak = r[key]
        print(f"RSS, {label}: VmRSS {current:.0f} MB (peak ru_maxrss {peak:.0f} MB)")


if __name__ == "__main__":
    main()
