"""The app walked through every screen on this machine's local cluster (moved from the
unit suite: a whole-app walk takes seconds)."""

from __future__ import annotations

from hpcui.tui.app import HpcuiApp
from tests.support.pilot import run, wait_for


def test_every_screen_renders(local_box):
    """Snapshot-style: each mode draws its own parts (text checked, not pixels)."""

    async def go():
        app = HpcuiApp()
        out = {}
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for(pilot, lambda: app.hub.conns["local"].status == "connected")
            for key, mode in (("1", "jobs"), ("3", "submit"), ("4", "cluster")):
                await pilot.press(key)
                await pilot.pause(0.6)
                out[mode] = app.export_screenshot()
            await pilot.press("question_mark")
            await pilot.pause(0.3)
            out["help"] = app.export_screenshot()
            await pilot.press("escape", "1", "h")
            await pilot.pause(0.3)
            out["history"] = app.export_screenshot()
        return out

    shots = run(go())

    def has(svg: str, *words: str) -> bool:
        text = svg.replace("&#160;", " ")
        return all(w.replace(" ", "&#160;") in svg or w in text for w in words)

    assert has(shots["jobs"], "elapsed/limit", "partition/qos", "hpcui jobs")
    assert has(shots["submit"], "what to run", "#!/bin/bash")
    assert has(shots["cluster"], "connected", "Quota", "Partitions", "Modules")
    assert has(shots["help"], "hpcui keys")
    assert has(shots["history"], "efficiency", "history (24 h)")
