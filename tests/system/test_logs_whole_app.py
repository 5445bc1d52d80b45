"""The app's log panel ends with the whole log after an earlier read: a short job's log
read while it ran (7 lines spooled) and opened in the app after it ended shows all 12
lines (it once showed the 7 the spool held); the API's second read is byte for byte the
file. Real local jobs (the `local` box), a pilot for the app."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from hpcui.tui.app import HpcuiApp
from hpcui.tui.screens.job import JobScreen
from tests.support.pilot import wait_for


def seven_then_five(gate: str) -> str:
    import time as _t
    from pathlib import Path as _P

    for i in range(7):
        print(f"line {i}", flush=True)
    while not _P(gate).exists():
        _t.sleep(0.05)
    for i in range(7, 12):
        print(f"line {i}", flush=True)
    return "done"


def test_a_log_read_while_running_is_whole_in_the_app_after_the_end(local_box, tmp_path):
    gate = tmp_path / "gate"

    async def go() -> tuple[list[str], bytes, bytes]:
        app = HpcuiApp()
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.hub.conns["local"].status == "connected")
            cluster = app.hub.cluster("local")
            assert cluster is not None
            job = cluster.submit(seven_then_five, str(gate), name="short")
            path = Path(job.paths.log(0, "stdout"))
            ends = time.monotonic() + 60
            while path.read_text().count("\n") < 7 if path.exists() else True:
                assert time.monotonic() < ends, "the job never printed its first lines"
                await asyncio.sleep(0.05)
            early = "".join(c.text for c in cluster.logs(job, "stdout", 0))  # spools 7 lines
            assert early.count("\n") >= 7
            gate.touch()
            await asyncio.to_thread(job.wait, 60)
            again = "".join(c.text for c in cluster.logs(job, "stdout", 0)).encode()
            app.open_job("local", job.job_id)
            await wait_for(pilot, lambda: isinstance(app.screen, JobScreen))
            screen = app.screen
            await wait_for(pilot, lambda: bool(screen.query("#log")), 10)
            await wait_for(pilot, lambda: "line 11" in screen.panel.lines, 30)
            return list(screen.panel.lines), again, path.read_bytes()

    lines, again, remote = asyncio.run(go())
    assert again == remote  # the API's second read: the whole file
    shown = [ln for ln in lines if ln.startswith("line ")]
    assert shown == [f"line {i}" for i in range(12)]
