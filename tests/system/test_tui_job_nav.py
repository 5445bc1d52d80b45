"""Issue 35, defect 7: the Job screen's navigation. Pilot on the `local` box with real
local jobs: every tab has a key, Tab never lands in a hidden box, a new job opens on its
log without the last job's tab or search, and at 80x24 the log gets the rows."""

from __future__ import annotations

import asyncio

from textual.widgets import Input, TabbedContent

from hpcui.tui.app import HpcuiApp
from hpcui.tui.screens.job import JobScreen
from tests.support.pilot import wait_for


def talk(n: int) -> str:
    for i in range(n):
        print(f"line {i}", flush=True)
    return "done"


def test_tabs_keys_a_new_job_on_its_log_and_the_rows_at_80x24(local_box):
    async def go() -> dict[str, object]:
        seen: dict[str, object] = {}
        app = HpcuiApp()
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.hub.conns["local"].status == "connected")
            cluster = app.hub.cluster("local")
            assert cluster is not None
            first = cluster.submit(talk, 40, name="first")
            second = cluster.submit(talk, 3, name="second")
            for job in (first, second):
                await asyncio.to_thread(job.wait, 60)
            app.open_job("local", first.job_id)
            await wait_for(pilot, lambda: isinstance(app.screen, JobScreen))
            screen = app.screen
            await wait_for(pilot, lambda: bool(screen.query("#log")), 10)  # composed
            await wait_for(pilot, lambda: len(screen.panel.lines) >= 40, 30)
            await pilot.pause(0.2)
            seen["log_rows"] = screen.panel.log_widget.content_region.height
            tabs = screen.query_one(TabbedContent)
            for key, tab in (("d", "details"), ("s", "script"), ("r", "result"), ("l", "logs")):
                await pilot.press(key)
                await wait_for(pilot, lambda tab=tab: tabs.active == f"tab-{tab}")
            await pilot.press("tab")  # the hidden metric and search boxes take no focus
            seen["tab_focus"] = type(screen.focused).__name__ if screen.focused else None
            await pilot.press("slash", *"line 3", "enter")
            await pilot.press("u")
            await wait_for(pilot, lambda: tabs.active == "tab-usage")
            app.open_job("local", second.job_id)
            await wait_for(pilot, lambda: screen.key == ("local", second.job_id))
            await wait_for(pilot, lambda: len(screen.panel.lines) >= 3, 30)
            seen["second_tab"] = tabs.active
            seen["second_search"] = (
                screen.panel.search,
                screen.query_one("#log-search", Input).value,
            )
        return seen

    seen = asyncio.run(go())
    assert seen["log_rows"] >= 14, (
        seen
    )  # 17 now; was 10: the boxes and the empty plot took the rest
    assert seen["tab_focus"] != "Input"
    assert seen["second_tab"] == "tab-logs" and seen["second_search"] == ("", "")
