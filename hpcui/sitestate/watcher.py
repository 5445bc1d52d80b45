"""One queue poll shared by every screen: ONE scheduler call per refresh, however many watch.

squeue/qstat load the controller, the man pages ask users not to poll them in tight
loops, and Slurm 23.02+ may rate-limit a user. So a cluster has one QueueWatcher; TUI
screens, CLI watchers and scripts subscribe callbacks to it, and its thread runs only
while somebody is subscribed. The interval adapts: fast while the queue changes, slower
while it is idle, at least 10x the time the last call took (a slow controller gets
breathing room) and backing off hard on errors and rate limiting.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable
from datetime import datetime

from pydantic import ConfigDict

from hpcui.backends.model import Model
from hpcui.common.clock import REAL, Clock
from hpcui.sitestate.jobs import QueueJob

__all__ = ["QueueSnapshot", "QueueWatcher", "Subscription", "is_rate_limited"]

log = logging.getLogger(__name__)

FAST_S = 2.0  # while jobs change state
SLOW_S = 60.0  # idle ceiling
MAX_S = 300.0  # error / rate-limit ceiling
GROWTH = 1.5  # idle backoff per unchanged refresh
SLOW_FACTOR = 10.0  # interval >= this x the duration of the last call
RATE_LIMIT_MIN_S = 30.0

# What controllers say when they are overloaded or throttling a user (Slurm's
# "Rate limit exceeded", "Too many ...", socket timeouts; PBS "Server busy").
_RATE_LIMIT = re.compile(
    r"rate.?limit|too many|socket timed out|timed out|try again|server busy|resource temporarily",
    re.IGNORECASE,
)


def is_rate_limited(message: str) -> bool:
    """Whether an error message means "ask less often" rather than "broken"."""
    return bool(_RATE_LIMIT.search(message))


class QueueSnapshot(Model):
    """What one refresh saw. On error ``jobs`` keeps the last good list (``stale``)."""

    model_config = ConfigDict(frozen=True)

    jobs: list[QueueJob]
    taken_at: datetime  # UTC, when the call returned
    took_s: float
    changed: bool  # a job appeared, left, or changed state/reason/nodes since the last one
    error: str | None = None
    stale: bool = False
    next_refresh_s: float

    @property
    def active(self) -> list[QueueJob]:
        """Pending/running/completing jobs (squeue also lists recently ended ones)."""
        return [j for j in self.jobs if not j.state.is_final]

    def ours(self) -> list[QueueJob]:
        return [j for j in self.jobs if j.hpcui]


Callback = Callable[[QueueSnapshot], None]


class Subscription:
    """Handle returned by ``QueueWatcher.subscribe``; ``cancel()`` or use as a context."""

    def __init__(self, watcher: QueueWatcher, callback: Callback) -> None:
        self.watcher, self.callback = watcher, callback

    def cancel(self) -> None:
        self.watcher.unsubscribe(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


def _signature(jobs: Iterable[QueueJob]) -> frozenset[tuple[str, str, str, str]]:
    """What counts as a change: elapsed time ticks every second and must not."""
    return frozenset((j.job_id, j.state_raw, j.reason, j.nodelist) for j in jobs)


class QueueWatcher:
    """Shares ONE ``fetch()`` (one scheduler call) per refresh among all subscribers."""

    def __init__(
        self,
        fetch: Callable[[], list[QueueJob]],
        *,
        fast_s: float = FAST_S,
        slow_s: float = SLOW_S,
        max_s: float = MAX_S,
        name: str = "",
        clock: Clock = REAL,
    ) -> None:
        self.fetch = fetch
        self.clock = clock
        self.fast_s, self.slow_s, self.max_s = fast_s, slow_s, max_s
        self.name = name
        self.interval = fast_s  # what the loop waits next: max(_base, 10x the last call)
        self._base = fast_s  # the change/idle/error-driven part, free of one slow call
        self.fetches = 0  # calls made to fetch (= scheduler calls)
        self.errors = 0
        self.latest: QueueSnapshot | None = None
        self.last_exception: Exception | None = None  # what the last failed fetch raised
        self._subs: list[Subscription] = []
        self._lock = threading.Lock()  # subscribers, latest
        self._fetch_lock = threading.Lock()  # one fetch in flight; others wait and share it
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._signature: frozenset[tuple[str, str, str, str]] | None = None
        self._generation = 0  # completed fetches; lets waiting callers share one

    # -- public ----------------------------------------------------------------------------

    def subscribe(self, callback: Callback) -> Subscription:
        """Call ``callback(snapshot)`` after every refresh until cancelled.

        A new subscriber gets the latest snapshot at once (no extra scheduler call) when
        there is one; the background thread starts with the first subscriber.
        """
        sub = Subscription(self, callback)
        with self._lock:
            self._subs.append(sub)
            latest = self.latest
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name=f"hpcui-queue-{self.name}", daemon=True
                )
                self._thread.start()
        if latest is not None:
            self._deliver(sub, latest)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)
        self._wake.set()  # the loop exits when nobody is left

    @property
    def subscribers(self) -> int:
        with self._lock:
            return len(self._subs)

    def refresh(self, *, max_age_s: float = 0.0) -> QueueSnapshot:
        """A snapshot at most ``max_age_s`` old; callers that arrive while a call is in
        flight wait for it and share its answer instead of making another."""
        if (snap := self._fresh(max_age_s)) is not None:
            return snap
        generation = self._generation
        with self._fetch_lock:
            # Someone else refreshed while we waited for the lock: share theirs.
            if self._generation != generation and self.latest is not None:
                return self.latest
            snap = self._refresh_locked()
            self._generation += 1
        self._broadcast(snap)
        return snap

    def close(self) -> None:
        """Drop every subscriber; the thread ends (Cluster.close should call this)."""
        with self._lock:
            self._subs.clear()
        self._wake.set()

    def poke(self) -> None:
        """Refresh soon and fast again (after a submit or cancel)."""
        self.interval = self._base = self.fast_s
        self._wake.set()

    # -- internals -------------------------------------------------------------------------

    def _fresh(self, max_age_s: float) -> QueueSnapshot | None:
        snap = self.latest
        if snap is None or snap.error is not None or max_age_s <= 0:
            return None
        age = (self.clock.now() - snap.taken_at).total_seconds()
        return snap if age <= max_age_s else None

    def _refresh_locked(self) -> QueueSnapshot:
        started = self.clock.monotonic()
        self.fetches += 1
        try:
            jobs = self.fetch()
        except Exception as exc:  # reported in the snapshot; the loop keeps going
            took = self.clock.monotonic() - started
            self.errors += 1
            self.last_exception = exc
            limited = is_rate_limited(str(exc))
            grow = 4.0 if limited else 2.0
            floor = RATE_LIMIT_MIN_S if limited else 2 * self.fast_s
            self._base = min(self.max_s, max(self._base * grow, floor))
            self.interval = min(self.max_s, max(self._base, SLOW_FACTOR * took))
            log.warning("queue refresh on %s failed: %s", self.name or "cluster", exc)
            prev = self.latest
            snap = QueueSnapshot(
                jobs=prev.jobs if prev else [],
                taken_at=self.clock.now(),
                took_s=took,
                changed=False,
                error=str(exc),
                stale=True,
                next_refresh_s=self.interval,
            )
        else:
            took = self.clock.monotonic() - started
            sig = _signature(jobs)
            changed = sig != self._signature
            self._signature = sig
            if changed:
                self._base = self.fast_s
            else:
                self._base = min(self.slow_s, max(self._base, self.fast_s) * GROWTH)
            # a slow call widens this wait only: the first call (SSH connect) must not
            # inflate every later one
            self.interval = min(self.max_s, max(self._base, SLOW_FACTOR * took))
            snap = QueueSnapshot(
                jobs=jobs,
                taken_at=self.clock.now(),
                took_s=took,
                changed=changed,
                next_refresh_s=self.interval,
            )
        with self._lock:
            self.latest = snap
        return snap

    def _broadcast(self, snap: QueueSnapshot) -> None:
        with self._lock:
            subs = list(self._subs)
        for sub in subs:
            self._deliver(sub, snap)

    @staticmethod
    def _deliver(sub: Subscription, snap: QueueSnapshot) -> None:
        try:
            sub.callback(snap)
        except Exception:  # one broken screen must not starve the others
            log.exception("queue subscriber %r failed", sub.callback)

    def _loop(self) -> None:
        while True:
            with self._lock:
                if not self._subs:
                    self._thread = None
                    return
            self.refresh(max_age_s=self.interval / 2)  # a manual refresh just now counts
            self._wake.clear()
            self.clock.wait(self._wake, self.interval)
