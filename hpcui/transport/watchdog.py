"""Keepalives that expect a reply: a half-open link is found, not waited on forever.

paramiko's own keepalive sends a request that wants no answer, so a peer that stopped
answering (laptop asleep, VPN gone, a black-holed route, a frozen sshd) goes unnoticed
and every call blocks for the whole stall. Like OpenSSH's ServerAliveInterval and
ServerAliveCountMax, this asks `keepalive@openssh.com` with want-reply every `interval`
seconds; after one interval without the reply the link counts as stalled (the faces say
so), after `count_max` it is declared dead and closed, which ends every call blocked on
it with ConnectionLost (the next call reconnects). One request in flight at a time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import paramiko

log = logging.getLogger(__name__)

#: OpenSSH's own keepalive request name: servers answer it (request-failure counts)
REQUEST = "keepalive@openssh.com"


class Watchdog:
    def __init__(
        self,
        conn: paramiko.Transport,
        *,
        interval: float,
        count_max: int,
        on_silence: Callable[[float | None], None],
        on_dead: Callable[[], None],
    ) -> None:
        self.conn = conn
        self.interval, self.count_max = interval, count_max
        self.on_silence = on_silence  # seconds without a reply, None once it answered
        self.on_dead = on_dead
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="hpcui-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _ask(self, replied: threading.Event) -> None:
        try:
            self.conn.global_request(REQUEST, wait=True)  # returns on any reply or close
        except Exception:  # a closing link: the loop sees it
            log.debug("keepalive request ended", exc_info=True)
        replied.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            if not self.conn.is_active():
                return
            replied = threading.Event()
            threading.Thread(
                target=self._ask, args=(replied,), name="hpcui-keepalive", daemon=True
            ).start()
            misses = 0
            while not replied.wait(self.interval):
                if self._stop.is_set() or not self.conn.is_active():
                    return
                misses += 1
                self.on_silence(misses * self.interval)
                if misses >= self.count_max:
                    log.warning("no keepalive reply for %.0f s: closing", misses * self.interval)
                    self.on_dead()
                    return
            if not self.conn.is_active():
                return  # it ended because the link closed, not because it answered
            if misses:
                self.on_silence(None)
