"""Issue 33 in the app: the Job screen forwards a port of a running job (P, the port typed)
and copies its URL; B on a job that is no service says how to forward instead. Pilot on
the `local` box: the job serves HTTP on this machine, reached through the app's forward."""

from __future__ import annotations

import asyncio
import socket
import time
import urllib.request
from pathlib import Path

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


def test_the_files_view_downloads_a_whole_folder(local_box, tmp_path, monkeypatch):
    """Issue 49: `d` on a folder in the job's Files view downloads it whole (was: "folders:
    one file at a time")."""
    from hpcui.tui import job_control
    from hpcui.tui.files_modal import FilesModal

    monkeypatch.setattr(job_control, "DOWNLOADS", tmp_path / "dl")

    async def go() -> tuple[str, list[str]]:
        app = HpcuiApp()
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for(pilot, lambda: app.hub.conns["local"].status == "connected")
            cluster = app.hub.cluster("local")
            assert cluster is not None
            job = cluster.submit(sum, [1, 2], name="run")
            assert job.result(timeout=60) == 3
            run = Path(cluster.files.folder(job.job_id)) / "runs" / "exp1"  # a TensorBoard run
            run.mkdir(parents=True)
            for i in range(30):
                (run / f"events.{i}").write_text(f"event {i}\n")
            app.open_job("local", job.job_id)
            await wait_for(pilot, lambda: isinstance(app.screen, JobScreen))
            await pilot.press("F")
            await wait_for(pilot, lambda: isinstance(app.screen, FilesModal))
            modal = app.screen
            await wait_for(pilot, lambda: any(k.endswith("/runs") for k in modal.entries))
            table = modal.query_one("#files-table")
            runs = next(k for k in modal.entries if k.endswith("/runs"))
            table.move_cursor(row=table.get_row_index(runs))
            await pilot.press("d")
            await wait_for(
                pilot, lambda: any("downloaded" in n.message for n in app._notifications), 30
            )
            said = [n.message for n in app._notifications if "downloaded" in n.message]
            return job.job_id, said

    job_id, said = asyncio.run(go())
    got = sorted(p.name for p in (tmp_path / "dl" / "local" / job_id / "runs" / "exp1").iterdir())
    assert got == sorted(f"events.{i}" for i in range(30))
    assert "30 file(s) copied" in said[-1]


def train_ranked() -> int:
    """A two-rank job whose rank 1 lags (the comparison shows it)."""
    import submitit

    rank = submitit.JobEnvironment().global_rank
    loss = 1.0
    for step in range(1, 4):
        loss *= 0.5 if rank == 0 else 0.9
        print(f"step={step} loss={loss:.4f}", flush=True)
    return rank


def test_the_job_screen_plots_every_rank_on_one_plot(local_box):
    """Issue 49: A on the Job screen draws a metric of every rank (rank 0 beside the
    others); one line per rank."""
    from hpcui.tui.metrics_view import CompareMetrics, MetricsPlot

    async def go() -> tuple[str, list[str], str]:
        app = HpcuiApp()
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for(pilot, lambda: app.hub.conns["local"].status == "connected")
            cluster = app.hub.cluster("local")
            assert cluster is not None
            job = cluster.submit(train_ranked, tasks_per_node=2, name="ranked")
            assert job.results(timeout=60) == [0, 1]
            app.open_job("local", job.job_id)
            await wait_for(pilot, lambda: isinstance(app.screen, JobScreen))
            await wait_for(pilot, lambda: app.screen.num_tasks == 2)
            await pilot.press("A")
            await wait_for(pilot, lambda: isinstance(app.screen, CompareMetrics))
            plot = app.screen.query_one(MetricsPlot)
            await wait_for(pilot, lambda: len(plot.drawn) == 2, 30)
            label = str(app.screen.query_one("#compare-label").render())
            return job.job_id, plot.drawn, label

    job_id, drawn, label = asyncio.run(go())
    assert drawn == [f"local:{job_id} rank 0", f"local:{job_id} rank 1"]
    assert f"loss across 2 of 2 ranks of local:{job_id}" in label
