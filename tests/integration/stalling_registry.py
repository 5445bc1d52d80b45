"""A registry that never answers, on loopback: what a slow registry looks like to enroot.

No registry is reachable here (docs/containers.md). A listener on 127.0.0.1 that holds each
connection a while and then closes it keeps `enroot import` running long enough for its
progress to be followed, and then fails it (a real failure of the real runtime).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def stalling_registry(hold_s: float = 2.0) -> Iterator[int]:
    """Its port; each connection is held `hold_s` and closed (60 accepts at most)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.5)
    stop = threading.Event()

    def serve() -> None:
        for _ in range(60):  # bounded
            if stop.is_set():
                return
            try:
                conn, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            stop.wait(hold_s)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()
