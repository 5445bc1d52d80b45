"""Opening a service's address in the user's browser without handing its token to other
users of this machine: a browser started with the URL in its argv shows it in `ps` to
everyone. A URL with a token goes through a redirect page readable by this user only
(as Jupyter's own `jpserver-*-open.html`), and the browser is given the page's path."""

from __future__ import annotations

import atexit
import contextlib
import html
import json
import os
import secrets
import time
from pathlib import Path

from hpcui.transport.agent.paths import private_dir, runtime_dir

#: a redirect page older than this has been read by its browser
KEEP_S = 120.0


def has_secret(url: str) -> bool:
    return "token=" in url


def redirect_page(url: str, folder: Path | None = None) -> Path:
    """A page that sends the browser to `url`, 0600 in a 0700 folder of this user."""
    where = Path(folder or Path(runtime_dir()) / "open")
    private_dir(str(where.parent), create=True)
    private_dir(str(where), create=True)
    now = time.time()
    for old in where.glob("open-*.html"):  # what earlier opens left
        with contextlib.suppress(OSError):
            if now - old.stat().st_mtime > KEEP_S:
                old.unlink()
    page = where / f"open-{secrets.token_hex(8)}.html"
    target = html.escape(url, quote=True)
    body = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<meta http-equiv='refresh' content='0;url={target}'>"
        f"<script>window.location.replace({json.dumps(url)});</script></head>"
        f"<body><a href='{target}'>Open the server</a></body></html>\n"
    )
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(body)
    atexit.register(_remove, page)
    return page


def _remove(page: Path) -> None:
    with contextlib.suppress(OSError):
        page.unlink()


def open_url(url: str, folder: Path | None = None) -> str:
    """Open `url` in the browser; what the browser's command line got (a token never)."""
    import webbrowser  # the browser is looked up only when one is opened

    shown = redirect_page(url, folder).as_uri() if has_secret(url) else url
    webbrowser.open(shown)
    return shown
