"""Issue 59's Sweep screen, Pilot on the `local` box with a real 12-configuration sweep (real
processes; one configuration raises): 12 rows, sorted by a metric, filtered, one element
opened on the Job screen, one metric of every element on one plot with configurations as
the legend. With HPCUI_SCREENSHOTS set it writes screenshots/sweep.svg."""

from __future__ import annotations

import asyncio
import os

from textual.widgets import DataTable

from hpcui.sweeps import table
from hpcui.tui.app import HpcuiApp
from hpcui.tui.metrics_view import CompareMetrics, MetricsPlot
from hpcui.tui.screens.job import JobScreen
from hpcui.tui.screens.sweep import SweepScreen
from tests.conftest import ROOT
from tests.support.pilot import wait_for


def fit(lr: float, seed: int) -> dict:
    if (lr, seed) == (0.3, 2):
        raise ValueError("diverged")
    loss = 1.0
    for step in range(1, 6):
        loss *= 1 - lr / (1 + seed)
        print(f"step {step} loss {loss:.4f} acc {1 - loss:.3f}", flush=True)
    return {"loss": round(loss, 4)}


def cells(grid: DataTable, column: str) -> list[str]:
    return [str(grid.get_cell(row, column)) for row in grid.rows]


def test_the_sweep_screen_sorts_filters_opens_and_plots(local_box):
    import hpcui

    grid_spec = {"lr": [0.05, 0.1, 0.2, 0.3], "seed": [0, 1, 2]}
    sweep = hpcui.sweep(fit, grid=grid_spec, name="lr-seed", cluster="local", time="5m")
    assert sweep.wait(timeout=120) == {"COMPLETED": 11, "FAILED": 1}
    expected = {(r["lr"], r["seed"]): r for r in sweep.results()}

    async def go() -> dict[str, object]:
        seen: dict[str, object] = {}
        app = HpcuiApp()
        async with app.run_test(size=(140, 36)) as pilot:
            await wait_for(pilot, lambda: app.hub.conns["local"].status == "connected")
            await pilot.press("6")
            await wait_for(pilot, lambda: isinstance(app.screen, SweepScreen))
            screen = app.screen
            assert isinstance(screen, SweepScreen)
            grid = screen.grid
            await wait_for(pilot, lambda: grid.row_count == 12, 60)
            info = str(screen.query_one("#sweep-info").render())
            seen["info"] = info
            seen["columns"] = list(screen.columns)
            # sort by the loss metric: the cursor on its column, s (ascending), s again
            grid.move_cursor(column=screen.columns.index("metric.loss"))
            await pilot.press("s")
            seen["ascending"] = cells(grid, "metric.loss")
            await pilot.press("s")
            seen["descending"] = cells(grid, "metric.loss")
            if os.environ.get("HPCUI_SCREENSHOTS"):
                app.save_screenshot(filename="sweep.svg", path=str(ROOT / "screenshots"))
            # filter: the failed one only, then numbers
            await pilot.press("slash")
            await pilot.press(*"state=failed")
            await wait_for(pilot, lambda: grid.row_count == 1, 10)
            seen["failed_error"] = cells(grid, "error")
            await pilot.press("ctrl+a", "ctrl+k")  # empty the box
            await pilot.press(*"lr>0.15 seed<2")
            await wait_for(pilot, lambda: grid.row_count == 4, 10)
            seen["filtered"] = sorted(zip(cells(grid, "lr"), cells(grid, "seed"), strict=True))
            await pilot.press("enter", "escape")
            await wait_for(pilot, lambda: grid.row_count == 12, 10)
            # plot the loss of every element that printed one (the failed one did not):
            # one line per configuration, labelled by it
            await pilot.press("p")
            await wait_for(pilot, lambda: isinstance(app.screen, CompareMetrics), 10)
            plot = app.screen.query_one(MetricsPlot)
            await wait_for(pilot, lambda: len(plot.drawn) == 11, 30)
            seen["legend"] = list(plot.drawn)
            seen["plot_label"] = str(app.screen.query_one("#compare-label").render())
            await pilot.press("escape")
            # open the element under the cursor: the top row, sorted by loss descending
            await wait_for(pilot, lambda: isinstance(app.screen, SweepScreen), 10)
            grid.move_cursor(row=0)
            top = screen.shown[0]
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, JobScreen), 10)
            seen["opened"] = (app.current_job, top["job_id"], top["lr"], top["seed"])
        return seen

    seen = asyncio.run(go())
    assert "lr-seed" in str(seen["info"]) and "12 configurations" in str(seen["info"])
    assert "COMPLETED 11" in str(seen["info"]) and "FAILED 1" in str(seen["info"])
    cols = seen["columns"]
    assert isinstance(cols, list)
    assert cols[:3] == ["lr", "seed", "state"] and "result.loss" in cols and "key" not in cols
    losses = sorted(r["metric.loss"] for r in expected.values() if "metric.loss" in r)
    shown = [table.cell_text("metric.loss", v) for v in losses]
    # the failed element printed no loss: last both ways
    assert seen["ascending"] == [*shown, "-"]
    assert seen["descending"] == [*shown[::-1], "-"]
    assert seen["failed_error"] == ["ValueError: diverged"]
    assert seen["filtered"] == [("0.2", "0"), ("0.2", "1"), ("0.3", "0"), ("0.3", "1")]
    legend = seen["legend"]
    assert isinstance(legend, list) and "lr=0.05 seed=0" in legend and len(set(legend)) == 11
    assert "loss across 11 of 12 jobs" in str(seen["plot_label"])
    current, job_id, lr, seed = seen["opened"]  # type: ignore[misc]
    assert current == ("local", job_id)
    assert expected[(lr, seed)]["job_id"] == job_id
    top_loss = max(r["metric.loss"] for r in expected.values() if "metric.loss" in r)
    assert expected[(lr, seed)]["metric.loss"] == top_loss
