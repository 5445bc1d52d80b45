"""One status service per cluster: ONE batched scheduler call per poll for all tracked jobs.

Polls fast right after a submit or a change and backs off while nothing changes (and
when the controller is slow), like Dolphie's refresh loop. Waiters block on a condition
instead of polling themselves, so N waiting jobs cost one scheduler call per interval.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from hpcui.backends.states import JobState
from hpcui.common.clock import REAL, Clock
from hpcui.errors import HpcuiError
from hpcui.schedulers.base import JobStatus, Scheduler

if TYPE_CHECKING:
    from hpcui.jobs.end_push import EndPush

log = logging.getLogger(__name__)

FAST_S = 0.25
SLOW_S = 30.0
BACKOFF = 1.5
#: A job the scheduler stopped listing is judged by its job folder after this long: done
#: when it left a result, lost only after LOST_S (accounting can lag behind the job).
VANISHED_S = 5.0
LOST_S = 60.0
#: NODE_FAIL and PREEMPTED end a job only when Slurm does not requeue it (JobRequeue=1 or
#: --requeue do): such a state is the end once it held this long, polled meanwhile.
SETTLE_S = 15.0
#: after a pushed end, the scheduler is asked every FAST_S (not backing off, not held to
#: 5x its answer time) this long: Slurm says COMPLETED ~0.3-0.6 s after the result file
HOT_S = 3.0


class StatusService:
    def __init__(
        self,
        scheduler: Scheduler,
        *,
        on_update: Callable[[dict[str, JobStatus]], None] | None = None,
        resolve_vanished: Callable[[list[str]], dict[str, JobStatus]] | None = None,
        fast_s: float = FAST_S,
        slow_s: float = SLOW_S,
        clock: Clock = REAL,
    ) -> None:
        self.scheduler = scheduler
        self.clock = clock
        self.on_update = on_update
        self.resolve_vanished = resolve_vanished
        self.fast_s, self.slow_s = fast_s, slow_s
        self.interval = fast_s
        self.polls = 0
        self._states: dict[str, JobStatus] = {}
        self._tracked: dict[str, float] = {}  # job id -> time it was last seen by the scheduler
        self._ended_at: dict[str, float] = {}  # job id -> when it entered a may-requeue end
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stop = False
        self._kick = threading.Event()
        self._poll_lock = threading.Lock()
        self._paused = 0
        self.last_poll_calls = 0  # scheduler calls the last poll made (must be 1)
        self.last_error: HpcuiError | None = None
        self.answered_at: float | None = None  # monotonic time of the last scheduler answer
        #: hpcui.jobs.end_push.EndPush: the login node says when a result appears (None: polls)
        self.end_push: EndPush | None = None
        self._nudged = False
        self._hot_until = 0.0

    # -- public ----------------------------------------------------------------------------

    def track(self, job_ids: Iterable[str], state: JobState = JobState.PENDING) -> None:
        now = self.clock.monotonic()
        with self._cond:
            for jid in job_ids:
                self._states.setdefault(jid, JobStatus(state))
                self._tracked.setdefault(jid, now)
        self.interval = self.fast_s
        self._ensure_thread()
        self._kick.set()

    def nudge(self) -> None:
        """A job's end was pushed: ask the scheduler now, and fast until it says so."""
        self.interval = self.fast_s
        self._hot_until = self.clock.monotonic() + HOT_S
        self._nudged = True
        self._kick.set()

    def get(self, job_id: str) -> JobStatus | None:
        with self._cond:
            return self._states.get(job_id)

    def settled(self, job_id: str) -> bool:
        """Ended for good: a final state that the scheduler can no longer undo."""
        with self._cond:
            return self._settled(job_id, self.clock.monotonic())

    def _settled(self, job_id: str, now: float) -> bool:
        status = self._states.get(job_id)
        if status is None or not status.state.is_final:
            return False
        if not status.state.may_requeue:
            return True
        # first seen now if it came that way (track() of a record, or an unchanged answer)
        return now - self._ended_at.setdefault(job_id, now) >= SETTLE_S

    def _unsettled(self, now: float) -> list[str]:
        """Tracked jobs not ended for good (the poll's list: cheap for 10,000 final jobs)."""
        return [
            j
            for j, s in self._states.items()
            if not s.state.is_final or (s.state.may_requeue and not self._settled(j, now))
        ]

    def wait(self, job_ids: list[str], timeout: float | None = None) -> dict[str, JobStatus]:
        """Block until every job is in a final state (or timeout); returns their states."""
        self.track(job_ids)
        deadline = None if timeout is None else self.clock.monotonic() + timeout
        with self._cond:
            while True:
                states = {j: self._states[j] for j in job_ids}
                now = self.clock.monotonic()
                if all(self._settled(j, now) for j in job_ids):
                    return states
                left = None if deadline is None else deadline - self.clock.monotonic()
                if left is not None and left <= 0:
                    return states
                self._cond.wait(timeout=1.0 if left is None else min(left, 1.0))

    def poll_once(self) -> dict[str, JobStatus]:
        """One scheduler call for every tracked, unfinished job. Returns what changed."""
        with self._poll_lock:
            before = self.scheduler.calls
            try:
                return self._poll()
            finally:
                self.last_poll_calls = self.scheduler.calls - before

    def _poll(self) -> dict[str, JobStatus]:
        with self._cond:
            pending = self._unsettled(self.clock.monotonic())
        if not pending:
            return {}
        started = self.clock.monotonic()
        found = dict(self.scheduler.status(pending))
        self.answered_at = self.clock.monotonic()
        self.polls += 1
        took = self.clock.monotonic() - started
        now = self.clock.monotonic()
        gone = []
        with self._cond:
            for jid in pending:
                if jid in found:
                    self._tracked[jid] = now
                elif now - self._tracked.get(jid, now) > VANISHED_S:
                    gone.append(jid)
        if gone and self.resolve_vanished is not None:
            judged = self.resolve_vanished(gone)
            for jid, status in judged.items():
                if status.reason == "result" or now - self._tracked.get(jid, now) > LOST_S:
                    found[jid] = status
        changed: dict[str, JobStatus] = {}
        with self._cond:
            for jid in pending:
                new = found.get(jid)
                if new is not None and new != self._states.get(jid):
                    self._states[jid] = new
                    changed[jid] = new
                    if new.state.may_requeue:
                        self._ended_at.setdefault(jid, now)
                    else:
                        self._ended_at.pop(jid, None)
            self._cond.notify_all()
        if changed and self.on_update is not None:
            self.on_update(changed)
        # Adaptive interval: fast while things change, slower while idle or when slow.
        if changed:
            self.interval = self.fast_s
        else:
            self.interval = min(self.slow_s, self.interval * BACKOFF)
        self.interval = max(self.interval, 5 * took)
        if now < self._hot_until:  # an end was pushed: the scheduler says so any moment
            self.interval = max(self.fast_s, took)
        if any(now - t < SETTLE_S for t in self._ended_at.values()):
            # an end that a requeue may undo: look again before it settles
            self.interval = min(self.interval, SETTLE_S / 4)
        return changed

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No background polls inside this block (benchmarks measure the submit path alone)."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    def close(self) -> None:
        self._stop = True
        self._kick.set()
        if self.end_push is not None:
            self.end_push.close()

    # -- loop ------------------------------------------------------------------------------

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stop = False
            self._thread = threading.Thread(target=self._loop, name="hpcui-status", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop:
            if self.clock.wait(self._kick, self.interval) and not self._nudged:
                # Just submitted: nothing happens within a few hundred ms, and polling at
                # once would compete with the submit round trip itself.
                self.clock.sleep(self.fast_s)
            self._kick.clear()
            self._nudged = False
            if self._stop:
                return
            if self._paused:
                continue
            try:
                self.poll_once()
                self.last_error = None
            except HpcuiError as exc:
                self.last_error = exc
                log.warning("status poll failed: %s", exc)
                self.interval = min(self.slow_s, max(self.interval * 2, 2.0))
            except Exception:  # keep the loop alive; report through logs
                log.exception("status poll crashed")
                self.interval = min(self.slow_s, max(self.interval * 2, 2.0))
            with self._cond:
                unsettled = self._unsettled(self.clock.monotonic())
                if not unsettled:
                    self._cond.notify_all()
            if self.end_push is not None:
                try:
                    self.end_push.follow(unsettled)
                except Exception:  # the poll goes on without the push
                    log.exception("end push failed")
