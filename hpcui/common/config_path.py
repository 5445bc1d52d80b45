"""Where the config file is: one place for the app, the CLI and the agent's thin client,
which may import nothing beyond the standard library (so not platformdirs). It gives the
paths platformdirs' `user_config_dir("hpcui")` gives on Linux and macOS."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def config_path() -> Path:
    """`HPCUI_CONFIG`, else `$XDG_CONFIG_HOME/hpcui/config.toml` (`~/.config/...`), on
    macOS `~/Library/Application Support/hpcui/config.toml`."""
    env = os.environ.get("HPCUI_CONFIG")
    if env:
        return Path(env).expanduser()
    home = Path.home()
    if sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        xdg = os.environ.get("XDG_CONFIG_HOME", "").strip()
        base = Path(xdg).expanduser() if xdg else home / ".config"
    return base / "hpcui" / "config.toml"
