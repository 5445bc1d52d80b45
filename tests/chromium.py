"""Headless Chromium driven over the DevTools protocol (aiohttp's websocket client, a
dependency of textual-serve already): the web view's test and its screenshot
(scripts/screenshots.py) share it. Every wait has a deadline; callers kill what they
start with `stop` in `finally`."""

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

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


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


async def drive(
    browser_ws: str,
    url: str,
    timeout: float,
    app_text: tuple[str, ...],
    *,
    size: tuple[int, int] | None = None,
    settle_s: float = 0.0,
) -> dict[str, object]:
    """Open `url` in a new tab (`size`: the window in CSS pixels); wait for the websocket,
    the first app bytes and `app_text` in the frames the page received; then, after
    `settle_s`, take a PNG screenshot of the page (seen["png"])."""
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
            if size is not None:
                await call(
                    "Emulation.setDeviceMetricsOverride",
                    {"width": size[0], "height": size[1], "deviceScaleFactor": 1, "mobile": False},
                    sid,
                )
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
                if seen["first_byte"] and all(w in text for w in app_text):
                    break
                try:  # let events arrive between polls
                    collect(json.loads((await ws.receive(timeout=0.3)).data))
                except TimeoutError:
                    pass
            await asyncio.sleep(settle_s)
            shot = await call("Page.captureScreenshot", {"format": "png"}, sid)
            seen["png"] = base64.b64decode(shot["data"])
    return seen


def start_serve(port: int, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`hpcui serve` on 127.0.0.1:`port`, in its own process group (for `stop`)."""
    return subprocess.Popen(
        [sys.executable, "-m", "hpcui.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def start_browser(profile: Path) -> subprocess.Popen[bytes]:
    assert CHROMIUM, "chromium is not installed: run scripts/install-deps"
    return subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
