"""Regenerate screenshots/ from the real app, with real jobs on the dev cluster.

    HPCUI_CONFIG=.devcluster/hpcui.toml python scripts/screenshots.py

One SVG per screen: jobs.svg (live table; the 20-element sweep folded into one row),
jobs-80x24.svg (the same at 80x24: columns chosen by width), help.svg, history.svg, job.svg (a training-like job's
log), job-metrics.svg (its Metrics tab: four metrics against the step, with axes),
jobs-compare.svg (the loss of two runs on one plot, the Jobs screen's M), job-usage.svg (its Usage tab: 4 GPUs, the dev nodes' stand-in
nvidia-smi), submit.svg (form with the live batch-script preview), cluster.svg
(connection, quota, partitions, modules); top.svg is `hpcui top JOB` in a terminal;
web-jobs.png is the Jobs screen in headless Chromium through `hpcui serve` (1280x720).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SIZE = (140, 36)


def add(a, b):
    return a + b


def boom():
    raise RuntimeError("demo failure")


def nap():
    import time as _t

    _t.sleep(120)


def train(steps: int = 60, speed: float = 15.0) -> float:
    """Prints metrics as training loops do (key=value, and a JSON line at each evaluation),
    so the Job screen's Metrics tab and the comparison have something to plot."""
    import json
    import math
    import time as _t

    loss = 2.5
    for step in range(steps):
        loss = 0.2 + 2.3 * math.exp(-step / speed) + 0.05 * math.sin(step)
        acc = 0.95 - 0.8 * math.exp(-step / (speed * 1.5))
        lr = 3e-4 * min(1.0, (step + 1) / 10) * (0.5 + 0.5 * math.cos(math.pi * step / steps))
        print(
            f"epoch {step // 20} step={step} loss={loss:.4f} acc={acc:.3f} lr={lr:.2e}", flush=True
        )
        if step % 10 == 9:
            print(json.dumps({"step": step, "val_loss": round(loss * 1.1 + 0.05, 4)}), flush=True)
        _t.sleep(0.5)
    return loss


async def _until(pilot, cond, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        await pilot.pause(0.2)


async def shoot(out: Path, train_id: str, other_id: str) -> None:
    from hpcui.tui.app import HpcuiApp
    from hpcui.tui.job_table import JobTable
    from hpcui.tui.metrics_view import MetricsPlot
    from hpcui.tui.widgets import LogPanel

    app = HpcuiApp("dev", connect=["dev"])
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.hub.conns["dev"].status == "connected", 60)
        table = app.screen.query_one("#live", JobTable)
        await _until(pilot, lambda: f"dev:{train_id}" in table.shown, 60)
        table.set_sort("id", reverse=True)
        table.move_cursor(row=0)
        key = f"dev:{train_id}"
        await _until(pilot, lambda: str(table.shown[key].get("gpu_pct", "")).endswith("%"), 60)
        await pilot.pause(1.0)
        app.save_screenshot(filename="jobs.svg", path=str(out))

        await pilot.press("h")
        history = app.screen.query_one("#history", JobTable)
        await _until(pilot, lambda: history.row_count > 0, 60)
        history.set_sort("id", reverse=True)
        await pilot.pause(0.5)
        app.save_screenshot(filename="history.svg", path=str(out))
        await pilot.press("h")

        app.open_job("dev", train_id)
        await pilot.pause(0.5)
        panel = app.screen.query_one(LogPanel)
        await _until(pilot, lambda: len(panel.lines) >= 30, 120)
        await pilot.pause(0.5)
        app.save_screenshot(filename="job.svg", path=str(out))

        await pilot.press("m")  # the Metrics tab: loss, acc, lr, val_loss against the step
        plot = app.screen.query_one("#metrics-plot", MetricsPlot)
        await _until(pilot, lambda: len(plot.drawn) >= 4, 60)
        await pilot.pause(1.5)
        app.save_screenshot(filename="job-metrics.svg", path=str(out))

        await pilot.press("u")
        usage = app.screen.query_one("#usage")
        await _until(pilot, lambda: "GPUs idle" in str(usage.render()), 60)
        await pilot.pause(0.5)
        app.save_screenshot(filename="job-usage.svg", path=str(out))

        await pilot.press("1")  # two runs side by side: select both, M
        table = app.screen.query_one("#live", JobTable)
        for job_id in (train_id, other_id):
            table.move_cursor(row=table.get_row_index(f"dev:{job_id}"))
            await pilot.press("space")
        await pilot.press("M")
        compare = app.screen
        await _until(pilot, lambda: bool(compare.query("#compare-plot")), 10)
        cplot = compare.query_one("#compare-plot", MetricsPlot)
        await _until(pilot, lambda: len(cplot.drawn) == 2, 60)
        await pilot.pause(1.0)
        app.save_screenshot(filename="jobs-compare.svg", path=str(out))
        await pilot.press("escape")
        table.marked.clear()

        await pilot.press("3")
        form = app.screen
        form.query_one("#target").value = "examples.ddp_or_fsdp:experiment"
        form.query_one("#args").value = '["ddp"]'
        form.query_one("#res-gpus").value = "2"
        form.query_one("#res-time").value = "30m"
        await _until(pilot, lambda: "--time=" in form.preview_text, 10)
        # the scheduler's start estimate and the cost against the ledger (a worker's answer)
        await _until(pilot, lambda: "\ncost:" in form.estimate_text, 30)
        await pilot.pause(0.5)
        app.save_screenshot(filename="submit.svg", path=str(out))

        await pilot.press("4")
        parts = app.screen.query_one("#partitions")
        await _until(pilot, lambda: parts.row_count > 0, 60)
        await pilot.pause(1.0)
        app.save_screenshot(filename="cluster.svg", path=str(out))

        await pilot.press("question_mark")
        await pilot.pause(1.0)
        app.save_screenshot(filename="help.svg", path=str(out))
        await pilot.press("escape", "1")
        await pilot.resize_terminal(80, 24)  # a small tmux pane: the columns that matter
        await pilot.pause(1.5)
        app.save_screenshot(filename="jobs-80x24.svg", path=str(out))


def top_svg(out: Path, job_id: str) -> None:
    """`hpcui top JOB` as a terminal shows it, recorded as an SVG."""
    import subprocess

    from rich.console import Console
    from rich.text import Text

    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "hpcui.cli",
            "top",
            job_id,
            "-c",
            "dev",
            "--count",
            "2",
            "--interval",
            "5",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    last = "hpcui top" + res.stdout.split("hpcui top")[-1]  # the second look: with verdicts
    console = Console(record=True, width=100, file=open(os.devnull, "w"))
    console.print(Text(f"$ hpcui top {job_id} -c dev\n", style="bold"))
    console.print(Text(last))
    console.save_svg(str(out / "top.svg"), title="hpcui top")


def web_png(out: Path) -> None:
    """The web view (`hpcui serve`) as Chromium draws it."""
    from tests.chromium import (
        devtools_url,
        drive,
        free_port,
        start_browser,
        start_serve,
        stop,
        wait_http,
    )

    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    server = browser = None
    try:
        server = start_serve(port)
        wait_http(url, timeout=20)
        browser = start_browser(Path(tempfile.mkdtemp(prefix="hpcui-chromium-")))
        seen = asyncio.run(
            drive(
                devtools_url(browser, timeout=20),
                url,
                60,
                ("● dev", "hpcui jobs", "RUNNING"),
                size=(1280, 720),
                settle_s=3.0,
            )
        )
    finally:
        stop(browser)
        stop(server)
    (out / "web-jobs.png").write_bytes(seen["png"])  # type: ignore[arg-type]


def main() -> None:
    os.environ.setdefault("HPCUI_DATA_DIR", tempfile.mkdtemp(prefix="hpcui-shots-"))
    import hpcui

    dev = hpcui.connect("dev")
    ok = dev.submit(add, 1, 2, name="add")
    bad = dev.submit(boom, name="boom")
    running = dev.submit(nap, name="nap", time="10m")
    dev.map(add, range(20), range(20), name="sweep")  # 20 elements: one folded row
    trainer = dev.submit(train, 200, name="train", time="20m", gpus=4)
    slower = dev.submit(train, 200, 40.0, name="train-lowlr", time="20m", gpus=2)
    ok.wait(120)
    bad.wait(120)
    time.sleep(1)
    out = ROOT / "screenshots"
    out.mkdir(exist_ok=True)
    try:
        asyncio.run(shoot(out, trainer.job_id, slower.job_id))
        top_svg(out, trainer.job_id)
        web_png(out)
    finally:
        running.cancel()
        trainer.cancel()
        slower.cancel()
    shots = [*out.glob("*.svg"), *out.glob("*.png")]
    print(f"wrote {', '.join(sorted(p.name for p in shots))} in {out}")


if __name__ == "__main__":
    main()
