"""A clock that moves only when the test says: the polling loops' waits end on `run_for`,
not on real seconds, so a test of backoff, settling or idle polling sleeps for nothing."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from hpcui.common.clock import Clock

#: real seconds a test waits for a loop to come back to its wait (a bound, not a timing)
LOOP_TIMEOUT_S = 10.0
#: real seconds between looks at an event while a wait blocks (Event.set() tells no one else)
_LOOK_S = 0.002


class FakeClock(Clock):
    def __init__(self, start: float = 1000.0) -> None:
        self._t = start
        self._start = start
        self._wall = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
        self._cond = threading.Condition()
        self.waits = 0  # waits (and sleeps) begun by any thread, ever

    def monotonic(self) -> float:
        with self._cond:
            return self._t

    def now(self) -> datetime:
        return self._wall + timedelta(seconds=self.monotonic() - self._start)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        with self._cond:
            deadline = None if timeout is None else self._t + timeout
            self.waits += 1
            self._cond.notify_all()
            while not event.is_set() and (deadline is None or self._t < deadline):
                self._cond.wait(_LOOK_S)
            return event.is_set()

    def sleep(self, seconds: float) -> None:
        self.wait(threading.Event(), seconds)

    def advance(self, seconds: float) -> None:
        """Time passes; waits whose time is up end (their loops go on by themselves)."""
        with self._cond:
            self._t += seconds
            self._cond.notify_all()

    def until_waits(self, count: int) -> None:
        """Block until `count` waits have begun in all: the loop is idle again."""
        with self._cond:
            if not self._cond.wait_for(lambda: self.waits >= count, LOOP_TIMEOUT_S):
                raise AssertionError(
                    f"the loop began {self.waits} waits, not {count}, within "
                    f"{LOOP_TIMEOUT_S:.0f} s (real): it is stuck or ended"
                )

    def run_for(self, seconds: float) -> None:
        """Advance and block until a loop begins its next wait (what was due has run)."""
        with self._cond:
            begun = self.waits
        self.advance(seconds)
        self.until_waits(begun + 1)
