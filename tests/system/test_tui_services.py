"""Issue 33 in the app: the Job screen forwards a port of a running job (P, the port typed)
and copies its URL; B on a job that is no service says how to forward instead. Pilot on
the `local` box: the job serves HTTP on this machine, reached through the app's forward."""

from __future__ import annotations

import asyncio
import socket
import time
import urllib.request

from hpcui.backends.states import JobState
from hpcui.tui.app import HpcuiApp
from hpcui.tui.files_modal import TextPromptModal
from hpcui.tui.screens.job import JobScreen
from tests.support.pilot import wait_for


def serve_for(port: int, seconds: float) -> str:
    """The job: an HTTP server on 127.0.0.1:`port` for `seconds`."""
    import http.server
    import threading

    server = http.server.HTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    time.sleep(seconds)
    server.shutdown()
    return "served"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> str:
    for _ in range(40):  # the server binds a moment after the job starts
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                return resp.read().decode()
        except OSError:
            time.sleep(0.25)
    raise AssertionError(f"{url} did not answer")


def test_the_job_screen_forwards_a_typed_port_and_copies_its_url(local_box):
    port = free_port()

    async def go() -> tuple[str, str, str, list[str]]:
        app = HpcuiApp()
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for(pilot, lambda: app.hub.conns["local"].status == "connected")
            cluster = app.hub.cluster("local")
            assert cluster is not None
            job = cluster.submit(serve_for, port, 60, name="web")
            try:
                await wait_for(pilot, lambda: job.state is JobState.RUNNING, timeout=60)
                app.open_job("local", job.job_id)
                await wait_for(pilot, lambda: isinstance(app.screen, JobScreen))
                await pilot.press("B")  # not a service hpcui started: it says what to do
                await wait_for(
                    pilot,
                    lambda: any("forward its port with P" in n.message for n in app._notifications),
                )
                await pilot.press("P")
                await wait_for(pilot, lambda: isinstance(app.screen, TextPromptModal))
                await pilot.press(*str(port), "enter")
                await wait_for(pilot, lambda: app.clipboard.startswith("http://127.0.0.1:"), 30)
                url = app.clipboard
                page = await asyncio.to_thread(get, url)
                details = str(app.screen.query_one("#details").render())
                listed = [ln for ln in details.splitlines() if ln.startswith("forwarded")]
                said = [n.message for n in app._notifications if "URL copied" in n.message]
            finally:
                cluster.control.cancel([job.job_id])
        return url, page, said[-1], listed

    url, page, said, listed = asyncio.run(go())
    assert "Directory listing" in page
    assert listed == [f"forwarded   {url[len('http://') :].rstrip('/')} -> 127.0.0.1:{port}"]
    assert f"-> 127.0.0.1:{port} (job " in said and url.rstrip("/").split(":")[-1] in said


def test_jupyter_from_the_submit_screen_says_what_is_missing(local_box):
    """ctrl+o on Submit starts JupyterLab with the form's resources; where the cluster's
    Python has none (this test's environment), the app says the fix instead."""
    from hpcui.tui.screens.submit import SubmitScreen

    async def go() -> list[str]:
        app = HpcuiApp()
        opened: list[str] = []
        app.open_url = lambda url, **_: opened.append(url)  # type: ignore[method-assign]
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for(pilot, lambda: app.hub.conns["local"].status == "connected")
            await pilot.press("3")
            await wait_for(pilot, lambda: isinstance(app.screen, SubmitScreen))
            await pilot.press("ctrl+o")
            await wait_for(
                pilot, lambda: any("not installed" in n.message for n in app._notifications), 30
            )
            said = [n.message for n in app._notifications if "not installed" in n.message]
        assert opened == []
        return said

    [said] = asyncio.run(go())
    assert "JupyterLab is not installed in local's Python" in said
    assert "pip install jupyterlab" in said
