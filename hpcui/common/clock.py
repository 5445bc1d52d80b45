"""The time the polling loops read and wait on, so tests can move it instead of sleeping.

QueueWatcher and StatusService take a `clock=`; everything else reads the real one.
Standard library only (a leaf).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime


class Clock:
    """Real time: monotonic seconds, the UTC wall clock, waits on an event."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        """Until `event` is set (True) or `timeout` seconds passed (False)."""
        return event.wait(timeout)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


#: the clock of every loop that is not handed another
REAL = Clock()
