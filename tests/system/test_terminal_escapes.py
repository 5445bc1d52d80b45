"""A job's output never drives the terminal: OSC 52 (clipboard), OSC 0 (title) and
`ESC[2J ESC[H` in a log are dropped by the app's log panel and by `hpcui logs` to a real
terminal (a pty), while colours stay and `--raw` passes the bytes as they are."""

from __future__ import annotations

import asyncio
import os
import select
import subprocess
import sys
from pathlib import Path

from hpcui.common.terminal_text import safe_text

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4K\x07"
TITLE = "\x1b]0;pwned\x1b\\"
CLEAR = "\x1b[2J\x1b[H"
RED = "\x1b[31mred\x1b[0m"
HOSTILE = f"before {CLIPBOARD}{TITLE}{CLEAR}after {RED}\x07\x9b2J\tend\r\n"


def test_safe_text_keeps_text_and_colours_only():
    assert safe_text(HOSTILE) == f"before after {RED}\tend\r\n"
    assert safe_text(HOSTILE, colours=False) == "before after red\tend\r\n"
    assert safe_text("\x1bc reset") == " reset"  # ESC c: a full terminal reset
    assert safe_text("tqdm 50%|#####     |\r") == "tqdm 50%|#####     |\r"
    # a sequence cut between two reads: each piece is dropped or shown as text
    first, second = "x\x1b]52;c;AAAA", "BBBB\x07y"
    assert "\x1b" not in safe_text(first) + safe_text(second)
    assert "\x07" not in safe_text(second)


def test_the_log_panel_shows_no_escape():
    from textual.app import App

    from hpcui.tui.widgets import LogPanel

    class One(App[None]):
        def compose(self):
            yield LogPanel(id="log")

    async def go():
        app = One()
        async with app.run_test(size=(80, 10)) as pilot:
            panel = app.query_one(LogPanel)
            panel.feed(HOSTILE.replace("\r\n", "\n") + "second line\n")
            await pilot.pause(0.1)
            rows = [strip.text for strip in panel.log_widget.lines]
            styles = [seg.style for strip in panel.log_widget.lines for seg in strip]
            return rows, styles

    rows, styles = asyncio.run(go())
    assert rows[0].startswith("before after red") and rows[1] == "second line"
    assert not any(c in "".join(rows) for c in "\x1b\x07\x9b")
    assert any(s is not None and s.color is not None for s in styles)  # red stays red


def test_hpcui_logs_to_a_terminal_drops_escapes_and_raw_keeps_them(local_box, tmp_path):
    from hpcui.clusters.api import connect

    cluster = connect("local")
    job = cluster.submit(print, HOSTILE, kwargs={"end": ""})
    job.result(timeout=120)
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(Path(__file__).parents[2])}

    def through_pty(*args: str) -> bytes:
        master, slave = os.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "hpcui.cli", "logs", f"local:{job.job_id}", *args],
            stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE, env=env,
        )  # fmt: skip
        os.close(slave)
        out = b""
        while True:
            ready, _, _ = select.select([master], [], [], 30)
            if not ready:
                break
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not data:
                break
            out += data
        proc.wait(timeout=30)
        os.close(master)
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
        return out

    shown = through_pty()
    assert b"before after" in shown and b"\x1b]" not in shown and b"\x1b[2J" not in shown
    assert b"\x1b[31mred" in shown  # colours are styles: kept
    raw = through_pty("--raw")
    assert b"\x1b]52;c;" in raw and b"\x1b[2J" in raw
