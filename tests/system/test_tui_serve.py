"""`hpcui serve` in a real headless Chromium: the page loads textual-serve's client, its
websocket connects, and the app's own screen (Jobs table header) arrives in the browser.

Chromium is driven over the DevTools protocol with aiohttp's websocket client (already a
dependency of textual-serve). Every wait has a deadline; the server and the browser are
killed in `finally`, whatever happens.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.chromium import (
    CHROMIUM,
    devtools_url,
    drive,
    free_port,
    start_browser,
    start_serve,
    stop,
    wait_http,
)

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(autouse=True)
def _chromium_installed() -> None:
    """A failure, not a skip: scripts/install-deps installs Debian's chromium."""
    assert CHROMIUM, "chromium is not installed: run scripts/install-deps"


#: what the app draws on its first screen (the browser's terminal is ~86 columns wide)
APP_TEXT = ("● local", "hpcui jobs · state all", "partition/qos")
#: the header's icon and the footer's lead keys (issue 23, defect 10)
CHROME_TEXT = ("≡", "Help", "Quit")


def test_serve_runs_the_app_in_headless_chromium(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[clusters.local]\nscheduler = "local"\nremote_base = "{tmp_path}/base"\n')
    env = {**os.environ, "HPCUI_CONFIG": str(cfg), "HPCUI_DATA_DIR": str(tmp_path / "data")}
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    server = browser = None
    try:
        server = start_serve(port, env)
        html = wait_http(url, timeout=20)
        assert "/static/js/textual.js" in html  # textual-serve's client
        assert f"ws://127.0.0.1:{port}/ws" in html
        browser = start_browser(tmp_path / "chromium")
        ws_url = devtools_url(browser, timeout=20)
        wanted = (*APP_TEXT, *CHROME_TEXT)  # drawn last on a busy machine: waited for too
        seen = asyncio.run(asyncio.wait_for(drive(ws_url, url, 25, wanted, size=(1280, 720)), 40))
    finally:
        stop(browser)
        stop(server)
    text = "".join(seen["frames"])  # type: ignore[arg-type]
    assert str(seen["ws_created"]).startswith(f"ws://127.0.0.1:{port}/ws?")
    assert seen["terminal"], "the page has no textual terminal element"
    assert seen["first_byte"], "the app never sent its first bytes to the page"
    # the app's Jobs screen, drawn by the hpcui process behind the websocket, with the
    # `local` cluster connected (header) and the live table's header and status line
    missing = [w for w in APP_TEXT if w not in text]
    assert not missing, f"{missing} not in what the page received: {text[-1500:]!r}"
    # issue 23, defect 10: the header's icon is a glyph browser fonts have (not ⭘), Help
    # and Quit lead the footer, and the page's screenshot is a real PNG of it
    assert "≡" in text and "⭘" not in text
    assert "Help" in text and "Quit" in text
    png = seen["png"]
    assert isinstance(png, bytes) and png.startswith(b"\x89PNG") and len(png) > 10_000
