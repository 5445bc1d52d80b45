"""Issue 49, defect 13, in the app at 80x24 (and wide): the footer leaves whole keys out
instead of cutting the last ("h Histor"), the Jobs table keeps six columns, the Metrics
key is in the Job screen's footer, the first Tab in Submit goes to "what to run", and
the exclusive checkbox is not cut ("X exclusive no"). Pilot tests over the replayed site
of the snapshot tests."""

from __future__ import annotations

import asyncio

from rich.cells import cell_len

from hpcui.tui.app import HpcuiApp
from tests.unit.test_tui_snapshots import _job, _jobs, _submit, replay  # noqa: F401

SMALL = (80, 24)


def footer(app: HpcuiApp) -> list[str]:
    keys = app.screen.query_one("FittingFooter").query("FooterKey")
    return [f"{k.key_display} {k.description}" for k in keys]


def fits(keys: list[str], width: int) -> bool:
    return sum(cell_len(k) + 1 for k in keys) <= width


def test_each_footer_fits_80_columns_with_its_main_keys(replay):  # noqa: F811
    async def go() -> dict[str, list[str]]:
        seen = {}
        for name, reach in (("jobs", _jobs), ("job", _job), ("submit", _submit)):
            app = HpcuiApp()
            async with app.run_test(size=SMALL) as pilot:
                await reach(pilot)
                await pilot.pause(0.2)
                seen[name] = footer(app)
        return seen

    seen = asyncio.run(go())
    for name, keys in seen.items():
        assert fits(keys, SMALL[0]), (name, keys)
        assert keys[:2] == ["? Help", "q Quit"], (name, keys)
    assert "h History" in seen["jobs"]  # was cut to "h Histor"
    assert {"m Metrics", "c Cancel", "u Usage"} <= set(seen["job"]), seen["job"]
    assert "1-6 Views" in seen["submit"]


def test_the_metrics_key_is_in_the_wide_job_footer_too(replay):  # noqa: F811
    async def go() -> list[str]:
        app = HpcuiApp()
        async with app.run_test(size=(140, 36)) as pilot:
            await _job(pilot)
            return footer(app)

    keys = asyncio.run(go())
    assert "m Metrics" in keys and "w Wrap" in keys  # nothing left out when it fits


def test_the_jobs_table_keeps_six_columns_at_80(replay):  # noqa: F811
    async def go() -> list[str]:
        app = HpcuiApp()
        async with app.run_test(size=SMALL) as pilot:
            await _jobs(pilot)
            return app.screen.query_one("#live").fitted()

    shown = asyncio.run(go())
    assert [c for c in shown if c != "sel"] == ["id", "name", "state", "why", "gpus", "time"]


def test_submit_first_tab_goes_to_what_to_run_and_exclusive_reads_whole(replay):  # noqa: F811
    async def go() -> tuple[str | None, str, str | None]:
        app = HpcuiApp()
        async with app.run_test(size=SMALL) as pilot:
            await _submit(pilot)
            await pilot.press("tab")
            first = app.focused.id if app.focused else None
            box = app.screen.query_one("#res-exclusive")
            text = str(box.render())
            await pilot.press("tab")
            second = app.focused.id if app.focused else None
        return first, text, second

    first, text, second = asyncio.run(go())
    assert first == "target", first  # was the cluster select
    assert second == "args"
    assert "yes" in text and "exclusive no" not in text
