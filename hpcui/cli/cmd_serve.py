"""`hpcui serve`: the same app in a browser tab, served on localhost by textual-serve.

Each browser tab gets its own `python -m hpcui.cli` process (textual-serve runs the
command with Textual's web driver); this module only builds that command line and runs
the server until ctrl+c.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from hpcui.errors import UsageError

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def app_command(cluster: str | None) -> str:
    """The shell command textual-serve starts per browser session: this interpreter's hpcui."""
    parts = [sys.executable, "-m", "hpcui.cli"]
    if cluster:
        parts += ["--cluster", cluster]
    return shlex.join(parts)


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from textual_serve.server import Server
    except ImportError as exc:  # pragma: no cover - a dependency of hpcui
        raise UsageError(
            "`hpcui serve` needs the textual-serve package: pip install 'textual-serve>=1.1'."
        ) from exc
    cluster = getattr(args, "cluster", None)
    if cluster:
        from hpcui.config import load_config

        load_config().cluster(cluster)  # an unknown name fails here, not in the browser
    if args.host not in LOOPBACK:
        print(
            f"hpcui: warning: serving on {args.host} lets anyone who reaches that address use "
            "your cluster connections; prefer 127.0.0.1 and an SSH tunnel.",
            file=sys.stderr,
        )
    url = f"http://{'[' + args.host + ']' if ':' in args.host else args.host}:{args.port}"
    print(f"hpcui: serving the app on {url} (ctrl+c stops)", file=sys.stderr, flush=True)
    server = Server(app_command(cluster), host=args.host, port=args.port, title="hpcui")
    server.serve()
    return 0
