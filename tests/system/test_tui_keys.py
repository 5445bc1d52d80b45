"""Issue 35, defect 1: keys meant for a field never reach the app. Pilot on the `local` box:
typing a target into the cluster dropdown does not quit; a quit with a typed form asks;
coming back to Submit leaves no field focused (screen keys work); Esc leaves the Cluster
screen's module search."""

from __future__ import annotations

import asyncio

from textual.widgets import Input, Select

from hpcui.tui.app import HpcuiApp
from hpcui.tui.modals import ConfirmModal
from hpcui.tui.screens.cluster import ClusterScreen
from hpcui.tui.screens.jobs import JobsScreen
from hpcui.tui.screens.submit import SubmitScreen
from tests.support.pilot import wait_for


def test_typing_into_the_cluster_dropdown_never_quits(local_box):
    async def go() -> tuple[bool, type]:
        app = HpcuiApp()
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.press("3")
            await wait_for(pilot, lambda: isinstance(app.screen, SubmitScreen))
            app.screen.query_one("#cluster", Select).focus()
            await pilot.pause(0.1)
            await pilot.press(*"work.py:slow_square")
            await pilot.pause(0.2)
            return app.is_running, type(app.screen)

    running, screen = asyncio.run(go())
    assert running and screen is SubmitScreen


def test_a_quit_with_a_typed_form_asks_and_no_keeps_it(local_box):
    async def go() -> tuple[bool, str]:
        app = HpcuiApp()
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.press("3")
            await wait_for(pilot, lambda: isinstance(app.screen, SubmitScreen))
            target = app.screen.query_one("#target", Input)
            target.focus()
            await pilot.press(*"work.py:slow_square", "escape", "q")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal))
            await pilot.press("escape")  # no
            await wait_for(pilot, lambda: isinstance(app.screen, SubmitScreen))
            return app.is_running, target.value

    running, value = asyncio.run(go())
    assert running and value == "work.py:slow_square"


def test_an_empty_form_quits_at_once(local_box):
    async def go() -> bool:
        app = HpcuiApp()
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.press("3")
            await wait_for(pilot, lambda: isinstance(app.screen, SubmitScreen))
            await pilot.press("q")
            await pilot.pause(0.3)
            return app.is_running

    assert asyncio.run(go()) is False


def test_coming_back_to_submit_the_screen_keys_work(local_box):
    """Before: the last field got its focus back and 1 typed '1' into GPUs."""

    async def go() -> tuple[type, str]:
        app = HpcuiApp()
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.press("3")
            await wait_for(pilot, lambda: isinstance(app.screen, SubmitScreen))
            gpus = app.screen.query_one("#res-gpus", Input)
            gpus.focus()
            await pilot.press("8")
            app.switch_mode("jobs")  # left with the field focused (a submit, the mouse)
            await wait_for(pilot, lambda: isinstance(app.screen, JobsScreen))
            await pilot.press("3")
            await wait_for(pilot, lambda: isinstance(app.screen, SubmitScreen))
            await pilot.press("1")
            await wait_for(pilot, lambda: isinstance(app.screen, JobsScreen))
            return type(app.screen), gpus.value

    screen, value = asyncio.run(go())
    assert screen is JobsScreen and value == "8"


def test_esc_leaves_the_module_search(local_box):
    async def go() -> tuple[bool, bool]:
        app = HpcuiApp()
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.press("4")
            await wait_for(pilot, lambda: isinstance(app.screen, ClusterScreen))
            await pilot.press("slash")
            box = app.screen.query_one("#mod-q", Input)
            await wait_for(pilot, lambda: box.has_focus)
            await pilot.press("escape")
            await pilot.pause(0.1)
            left = not box.has_focus
            await pilot.press("1")  # a screen key again, not text in the box
            await wait_for(pilot, lambda: isinstance(app.screen, JobsScreen))
            return left, box.value == ""

    left, empty = asyncio.run(go())
    assert left and empty


def test_one_shows_the_live_table_after_history(local_box):
    """Issue 35, defect 8: after History (5), 1 showed the history still."""

    async def go() -> list[str]:
        app = HpcuiApp()
        seen = []
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, JobsScreen))
            screen = app.screen
            await pilot.press("5")
            await wait_for(pilot, lambda: screen.view == "history")
            seen.append(screen.view)
            await pilot.press("1")
            await wait_for(pilot, lambda: screen.view == "live")
            seen.append(screen.view)
        return seen

    assert asyncio.run(go()) == ["history", "live"]


def test_no_sort_arrow_is_left_when_sorting_goes_off(local_box):
    """Issue 35, defect 8: cycling the sort (s) back to none left ▼ on the last header."""

    async def go() -> tuple[bool, bool]:
        app = HpcuiApp()
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, JobsScreen))
            table = app.screen.table
            await pilot.press("s")
            while table.sort_column != "time":
                await pilot.press("s")
            await pilot.pause(0.1)
            with_arrow = "▲" in app.export_screenshot() or "▼" in app.export_screenshot()
            await pilot.press("s")  # after time: sorting off
            await wait_for(pilot, lambda: table.sort_column is None)
            await pilot.pause(0.1)
            shot = app.export_screenshot()
            return with_arrow, "▲" in shot or "▼" in shot

    with_arrow, still = asyncio.run(go())
    assert with_arrow and not still
