"""Regenerate screenshots/ from the real app, with real jobs on the dev cluster.

    HPCUI_CONFIG=.devcluster/hpcui.toml python scripts/screenshots.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def add(a, b):
    return a + b


def boom():
    raise RuntimeError("demo failure")


def nap():
    import time as _t

    _t.sleep(120)


async def shoot(out: Path) -> None:
    from hpcui.tui.app import HpcuiApp

    app = HpcuiApp("dev")
    async with app.run_test(size=(110, 24)) as pilot:
        await pilot.pause(1.5)
        app.save_screenshot(filename=out.name, path=str(out.parent))


def main() -> None:
    os.environ.setdefault("HPCUI_DATA_DIR", tempfile.mkdtemp(prefix="hpcui-shots-"))
    import hpcui

    dev = hpcui.connect("dev")
    ok = dev.submit(add, 1, 2, name="add")
    bad = dev.submit(boom, name="boom")
    running = dev.submit(nap, name="train-ddp", time="10m")
    dev.map(add, range(3), range(3), name="sweep")
    ok.wait(120)
    bad.wait(120)
    time.sleep(1)
    out = ROOT / "screenshots" / "jobs.svg"
    out.parent.mkdir(exist_ok=True)
    asyncio.run(shoot(out))
    running.cancel()
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
