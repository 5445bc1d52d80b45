"""Issue 35, "metrics worth looking at", in the app. Pilot on the `local` box with real local
jobs that print as training loops do: the Job screen's Metrics tab plots several metrics
against the step with axes (textual-plotext), a regex adds a series, and two jobs selected
on the Jobs screen compare one metric on one plot."""

from __future__ import annotations

import asyncio

from textual.widgets import Input, TabbedContent

from hpcui.tui.app import HpcuiApp
from hpcui.tui.job_table import JobTable
from hpcui.tui.metrics_view import CompareMetrics, MetricsPlot
from hpcui.tui.screens.job import JobScreen
from tests.support.pilot import wait_for


def train(lr: float) -> float:
    loss = 1.0
    for step in range(1, 21):
        loss *= 1 - lr
        print(f"step={step} loss={loss:.4f} acc: {100 * (1 - loss):.1f}% lr={lr}", flush=True)
        print(f"[{step * 64}/1280 samples]", flush=True)
    return loss


def plot_text(plot: MetricsPlot) -> str:
    return plot.plt.uncolorize(plot.plt.build())


def test_metrics_tab_plots_several_metrics_and_two_jobs_compare(local_box):
    async def go() -> dict[str, object]:
        seen: dict[str, object] = {}
        app = HpcuiApp()
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: app.hub.conns["local"].status == "connected")
            cluster = app.hub.cluster("local")
            assert cluster is not None
            fast = cluster.submit(train, 0.2, name="fast")
            slow = cluster.submit(train, 0.05, name="slow")
            for job in (fast, slow):
                await asyncio.to_thread(job.wait, 60)
            app.open_job("local", fast.job_id)
            await wait_for(pilot, lambda: isinstance(app.screen, JobScreen))
            screen = app.screen
            await wait_for(pilot, lambda: bool(screen.query("#log")), 10)
            await wait_for(pilot, lambda: len(screen.panel.lines) >= 40, 30)
            await pilot.press("m")
            tabs = screen.query_one(TabbedContent)
            await wait_for(pilot, lambda: tabs.active == "tab-metrics")
            plot = screen.query_one("#metrics-plot", MetricsPlot)
            await wait_for(pilot, lambda: len(plot.drawn) == 3, 10)
            seen["drawn"] = list(plot.drawn)
            seen["plot"] = plot_text(plot)
            seen["label"] = str(screen.query_one("#metrics-label").render())
            await pilot.press("m")  # again: the regex box
            box = screen.query_one("#metric-re", Input)
            await wait_for(pilot, lambda: box.has_focus)
            await pilot.press(*r"\[(?P<samples>\d+)/", "enter")
            await wait_for(pilot, lambda: "samples" in plot.drawn, 10)
            seen["with_regex"] = list(plot.drawn)
            seen["box_after"] = box.display

            await pilot.press("1")
            table = app.screen.query_one("#live", JobTable)
            for job in (fast, slow):
                key = f"local:{job.job_id}"
                await wait_for(pilot, lambda key=key: key in table.shown, 20)
                table.move_cursor(row=table.get_row_index(key))
                await pilot.press("space")
            await pilot.press("M")
            await wait_for(pilot, lambda: isinstance(app.screen, CompareMetrics))
            compare = app.screen
            cplot = compare.query_one("#compare-plot", MetricsPlot)
            await wait_for(pilot, lambda: len(cplot.drawn) == 2, 20)
            seen["compare_drawn"] = list(cplot.drawn)
            seen["compare_label"] = str(compare.query_one("#compare-label").render())
            seen["compare_plot"] = plot_text(cplot)
            await pilot.press("right_square_bracket")
            seen["next_label"] = str(compare.query_one("#compare-label").render())
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, CompareMetrics))
            seen["ids"] = (fast.job_id, slow.job_id)
        return seen

    seen = asyncio.run(go())
    assert seen["drawn"] == ["loss", "acc", "lr"]  # loss first, each its own panel
    plot = seen["plot"]
    assert "loss 0.0115" in plot and "acc 98.8" in plot  # titles with the last values
    assert plot.count("step") == 3 and "┤" in plot and "┬" in plot  # x labels, both axes
    assert seen["label"].startswith("against step · loss 0.0115 · acc 98.8 · lr 0.2")
    assert "samples" in seen["with_regex"] and seen["box_after"] is False
    fast, slow = seen["ids"]
    assert sorted(seen["compare_drawn"]) == sorted([f"local:{fast}", f"local:{slow}"])
    assert seen["compare_label"].startswith("loss across 2 of 2 jobs")
    assert f"local:{fast}" in seen["compare_plot"] and "step" in seen["compare_plot"]
    assert seen["next_label"].startswith("acc across 2 of 2 jobs")
