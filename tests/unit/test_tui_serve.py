"""`hpcui serve` in a real headless Chromium: the page loads textual-serve's client, its
websocket connects, and the app's own screen (Jobs table header) arrives in the browser.

Chromium is driven over the DevTools protocol with aiohttp's websocket client (already a
dependency of textual-serve). Every wait has a deadline; the server and the browser are
killed in `finally`, whatever happens.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.timeout(90)


@pytest.fixture(autouse=True)
def _chromium_installed() -> None:
    """A failure, not a skip: scripts/install-deps installs Debian's chromium."""
    assert CHROMIUM, "chromium is not installed: run scripts/install-deps"


#: what the app draws on its first screen (the browser's terminal is ~86 columns wide)
APP_TEXT = ("● local", "hpcui jobs · state all", "partition/qos")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return resp.read().decode()
        except OSError as exc:
            last = exc
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer in {timeout} s: {last}")


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    """Kill a process group we started: SIGTERM, then SIGKILL after 5 s."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=5)


def devtools_url(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """Chromium prints `DevTools listening on ws://...` on stderr once it is ready."""
    assert proc.stderr is not None
    os.set_blocking(proc.stderr.fileno(), False)
    buf = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        chunk = proc.stderr.read() or b""
        buf += chunk
        m = re.search(rb"DevTools listening on (ws://\S+)", buf)
        if m:
            return m.group(1).decode()
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"chromium did not start: {buf.decode(errors='replace')[-2000:]}")


async def drive(browser_ws: str, url: str, timeout: float) -> dict[str, object]:
    """Open `url` in a new tab; wait for the websocket, the first app bytes and the app's
    text in the frames the page received."""
    import aiohttp

    seen: dict[str, object] = {"ws_created": False, "frames": [], "first_byte": False}
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(browser_ws, max_msg_size=0) as ws:
            next_id = 0

            async def call(method: str, params: dict | None = None, sid: str | None = None):
                nonlocal next_id
                next_id += 1
                msg: dict[str, object] = {"id": next_id, "method": method, "params": params or {}}
                if sid:
                    msg["sessionId"] = sid
                await ws.send_str(json.dumps(msg))
                want = next_id
                while True:
                    reply = json.loads((await ws.receive(timeout=10)).data)
                    collect(reply)
                    if reply.get("id") == want:
                        if "error" in reply:
                            raise AssertionError(f"{method}: {reply['error']}")
                        return reply.get("result", {})

            def collect(event: dict) -> None:
                method = event.get("method")
                if method == "Network.webSocketCreated":
                    seen["ws_created"] = event["params"]["url"]
                elif method == "Network.webSocketFrameReceived":
                    frame = event["params"]["response"]
                    data = frame.get("payloadData", "")
                    if frame.get("opcode") == 2:  # binary: base64 in CDP
                        data = base64.b64decode(data).decode("utf-8", "replace")
                    seen["frames"].append(data)  # type: ignore[union-attr]

            target = await call("Target.createTarget", {"url": "about:blank"})
            attached = await call(
                "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
            )
            sid = attached["sessionId"]
            await call("Network.enable", {}, sid)
            await call("Page.enable", {}, sid)
            await call("Page.navigate", {"url": url}, sid)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                result = await call(
                    "Runtime.evaluate",
                    {
                        "expression": "[document.body.className, "
                        "!!document.querySelector('.textual-terminal')]",
                        "returnByValue": True,
                    },
                    sid,
                )
                classes, terminal = result["result"].get("value") or ["", False]
                seen["first_byte"] = "-first-byte" in classes
                seen["terminal"] = terminal
                text = "".join(seen["frames"])  # type: ignore[arg-type]
                if seen["first_byte"] and all(w in text for w in APP_TEXT):
                    break
                try:  # let events arrive between polls
                    collect(json.loads((await ws.receive(timeout=0.3)).data))
                except asyncio.TimeoutError:
                    pass
    return seen


def test_serve_runs_the_app_in_headless_chromium(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[clusters.local]\nscheduler = "local"\nremote_base = "{tmp_path}/base"\n')
    env = {**os.environ, "HPCUI_CONFIG": str(cfg), "HPCUI_DATA_DIR": str(tmp_path / "data")}
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    server = browser = None
    try:
        server = subprocess.Popen(
            [sys.executable, "-m", "hpcui.cli", "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        html = wait_http(url, timeout=20)
        assert "/static/js/textual.js" in html  # textual-serve's client
        assert f"ws://127.0.0.1:{port}/ws" in html
        browser = subprocess.Popen(
            [
                CHROMIUM,  # type: ignore[list-item]
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={tmp_path / 'chromium'}",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        ws_url = devtools_url(browser, timeout=20)
        seen = asyncio.run(asyncio.wait_for(drive(ws_url, url, timeout=25), 40))
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
