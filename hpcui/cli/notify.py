"""A desktop notification where this machine has one, else the terminal bell
(`hpcui wait --notify`). Standard library only."""

from __future__ import annotations

import shutil
import subprocess
import sys


def _applescript(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def desktop(title: str, body: str) -> bool:
    """Shown by the desktop (macOS `osascript`, Linux `notify-send`); False when neither
    is here or it failed."""
    if sys.platform == "darwin" and shutil.which("osascript"):
        argv = ["osascript", "-e", f"display notification {_applescript(body)} with title "
                f"{_applescript(title)}"]  # fmt: skip
    elif shutil.which("notify-send"):
        argv = ["notify-send", "--app-name=hpcui", title, body]
    else:
        return False
    try:
        return subprocess.run(argv, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def bell() -> None:
    """The terminal bell, on stderr (stdout may be a pipe of --json)."""
    sys.stderr.write("\a")
    sys.stderr.flush()


def tell(title: str, body: str) -> None:
    if not desktop(title, body):
        bell()
