"""Issue 35, "quieter logs": the runtime's own INFO lines hidden in the CLI and the app,
its warnings and the job's own lines kept, lines split across chunks handled."""

from __future__ import annotations

import asyncio

from hpcui.logs.follow import QuietRuntime, is_runtime_line
from hpcui.tui.widgets import LogPanel

#: lines as a job's log has them (a dev-cluster job's <id>_0_log.out)
START = "submitit INFO (2026-11-26 08:25:56,746) - Starting with JobEnvironment(job_id=2696, hostname=node1, local_rank=0(1), node=0(1), global_rank=0(1))"
LOADING = "submitit INFO (2026-11-26 08:25:56,747) - Loading pickle: /home/hpcuser/.hpcui/jobs/6cac868ddd024b8f/2696_submitted.pkl"
WARN = "submitit WARNING (2026-11-26 08:25:57,001) - Bypassing signal SIGTERM"
MINE = "epoch 1 loss=0.25"


def test_only_the_runtimes_info_lines_count():
    assert is_runtime_line(START) and is_runtime_line(LOADING)
    assert not is_runtime_line(WARN) and not is_runtime_line(MINE)
    assert not is_runtime_line("print('submitit INFO (x) - ')")


def test_chunks_split_mid_line_are_filtered_whole():
    text = f"{START}\n{MINE}\n{LOADING}\n{WARN}\nlast without newline"
    quiet = QuietRuntime()
    out = "".join(quiet.feed(text[i : i + 7]) for i in range(0, len(text), 7)) + quiet.flush()
    assert out == f"{MINE}\n{WARN}\nlast without newline"


def test_the_log_panel_hides_and_shows_them_again():
    from textual.app import App, ComposeResult

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield LogPanel(id="p")

    async def go() -> tuple[list[str], list[str], str]:
        app = One()
        async with app.run_test(size=(120, 20)) as pilot:
            panel = app.query_one(LogPanel)
            panel.add_lines([START, MINE, LOADING, WARN])
            panel.set_quiet(True)
            await pilot.pause()
            hidden = [strip.text for strip in panel.log_widget.lines]
            status = str(panel.query_one("#log-status").render())
            panel.set_quiet(False)
            await pilot.pause()
            return hidden, [strip.text for strip in panel.log_widget.lines], status

    hidden, shown, status = asyncio.run(go())
    assert [line.rstrip() for line in hidden] == [MINE, WARN]
    assert [line.rstrip() for line in shown] == [START, MINE, LOADING, WARN]
    assert "runtime lines hidden" in status
