"""The app walked through every screen on this machine's local cluster (moved from the
unit suite: a whole-app walk takes seconds)."""

from __future__ import annotations

from hpcui.tui.app import HpcuiApp
from tests.support.pilot import run, wait_for


def test_every_screen_renders(local_box):
    """Snapshot-style: each mode draws its own parts (text checked, not pixels)."""

    def has(svg: str, *words: str) -> bool:
        text = svg.replace("&#160;", " ")
        return all(w.replace(" ", "&#160;") in svg or w in text for w in words)

    expect = {
        "jobs": ("elapsed/limit", "partition/qos", "hpcui jobs"),
        "submit": ("what to run", "#!/bin/bash"),  # the preview comes after a debounce
        "cluster": ("connected", "Quota", "Partitions", "Modules"),
        "help": ("hpcui keys",),
        "history": ("efficiency", "history (24 h)"),
    }

    async def go():
        app = HpcuiApp()
        out = {}

        async def shot(mode: str) -> None:  # until it shows its parts: CI's load is slow
            try:
                await wait_for(pilot, lambda: has(app.export_screenshot(), *expect[mode]), 30)
            except AssertionError:
                pass  # the assertions below say which words are missing
            out[mode] = app.export_screenshot()

        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for(pilot, lambda: app.hub.conns["local"].status == "connected")
            for key, mode in (("1", "jobs"), ("3", "submit"), ("4", "cluster")):
                await pilot.press(key)
                await shot(mode)
            await pilot.press("question_mark")
            await shot("help")
            await pilot.press("escape", "1", "h")
            await shot("history")
        return out

    shots = run(go())
    for mode, words in expect.items():
        assert has(shots[mode], *words), (mode, words)
