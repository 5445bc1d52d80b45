"""A job shown live in a Jupyter notebook: the cell's output updates itself as the job goes.

`Job(dev:364, PENDING)` in a cell never changed. In a Jupyter kernel a Job (or the list
`map` returns) now displays as a small panel — state, how long it has run, the last log
lines, then the result or the traceback — that a daemon thread updates in place
(IPython's `display(..., display_id=True)` and `update()`): the kernel is never blocked,
the next cell runs at once. The thread reads what the cluster's status service polls
anyway (one scheduler call for all tracked jobs) and the log's tail through the local
spool; it ends with the job. Outside Jupyter (a terminal IPython, a plain REPL) it is the
plain text it always was.
"""

from __future__ import annotations

import html
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

from hpcui.backends.states import JobState
from hpcui.errors import HpcuiError, JobFailedError


class Job(Protocol):
    """What a display reads of `hpcui.jobs.job.Job` (a protocol: hpcui.jobs.job imports this module)."""

    cluster: Any
    job_id: str
    name: str

    @property
    def state(self) -> JobState: ...
    @property
    def reason(self) -> str: ...
    def logs(
        self, stream: Any = ..., rank: int | None = ..., *, tail_bytes: int | None = ...
    ) -> Any: ...
    def result(self, timeout: float | None = None) -> Any: ...


#: seconds between updates: quick while the job is fresh, then calmer (hours-long jobs)
FAST_S, SLOW_S, FAST_FOR_S = 2.0, 10.0, 120.0
LOG_LINES = 6
LOG_TAIL_BYTES = 4096
RESULT_CHARS = 400
#: the jobs of a list whose errors are fetched at the end (one read each)
FAILED_SHOWN = 3


def in_jupyter() -> bool:
    """A Jupyter kernel (where an output can be updated), not a terminal IPython."""
    try:
        from IPython import get_ipython  # only present where IPython runs
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def show(jobs: Job | Sequence[Job]) -> LiveView | None:
    """Display `jobs` live in Jupyter (returns the view), else print their plain text."""
    many = isinstance(jobs, Sequence)  # a Job is not one; map's list is
    items: list[Job] = list(jobs) if isinstance(jobs, Sequence) else [jobs]
    if not in_jupyter():
        print(repr(list(items)) if many else repr(items[0]))
        return None
    view = LiveView(items, many=many)
    shown(view)
    return view


def shown(view: Updating) -> None:
    """Display `view` and keep it for `settle()`."""
    view.start()
    _views.append(view)


_views: list[Updating] = []


def settle(timeout: float = 600.0) -> bool:
    """Block until every live display has shown its jobs' end (a notebook run from start to
    end without a person, `jupyter nbconvert --execute`, wants the final outputs saved).
    True when all did within `timeout` seconds."""
    ends = time.monotonic() + timeout
    for view in list(_views):
        if view.thread is not None:
            view.thread.join(max(0.0, ends - time.monotonic()))
    _views[:] = [v for v in _views if v.thread is not None and v.thread.is_alive()]
    return not _views


class Updating:
    """A notebook output that a daemon thread updates in place until `_ended()`: quick
    while fresh, then calmer; only a changed bundle is sent."""

    def __init__(self) -> None:
        self.updates = 0
        self._handle: Any = None
        self._began = time.monotonic()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        from IPython.display import display  # only present where IPython runs

        self._prepare()
        self._handle = display(self._bundle(), raw=True, display_id=True)
        if not self._ended():
            self.thread = threading.Thread(target=self._run, name="hpcui-live", daemon=True)
            self.thread.start()

    def _run(self) -> None:
        last = self._bundle()
        while True:
            wait = FAST_S if time.monotonic() - self._began < FAST_FOR_S else SLOW_S
            time.sleep(wait)
            ended = self._ended()
            self._look()
            if ended:
                self._finish()
            bundle = self._bundle()
            if bundle != last:
                self._handle.update(bundle, raw=True)
                self.updates += 1
                last = bundle
            if ended:
                return

    def _prepare(self) -> None:
        """Before the first display (the first look)."""
        self._look()

    def _finish(self) -> None:
        """Once, when everything has ended, before the last bundle."""

    def _ended(self) -> bool:
        raise NotImplementedError

    def _look(self) -> None:
        raise NotImplementedError

    def _bundle(self) -> dict[str, str]:
        raise NotImplementedError


class LiveView(Updating):
    """One notebook output for one job or a list of jobs, updated until they have ended."""

    def __init__(self, jobs: list[Job], *, many: bool) -> None:
        super().__init__()
        self.jobs = jobs
        self.many = many
        self._first_running: dict[str, float] = {}
        self._seen_running_at_start: set[str] = set()
        self._tail = ""
        self._ending = ""

    def _prepare(self) -> None:
        for job in self.jobs:  # the status service polls them in its own thread
            job.cluster.status.track([job.job_id])
        self._look()
        for job in self.jobs:
            if job.state.value == "RUNNING":
                self._seen_running_at_start.add(job.job_id)

    def _finish(self) -> None:
        self._ending = self._end_text()

    def _ended(self) -> bool:
        return all(job.cluster.status.settled(job.job_id) for job in self.jobs)

    def _look(self) -> None:
        now = time.monotonic()
        for job in self.jobs:
            if job.state.value == "RUNNING":
                self._first_running.setdefault(job.job_id, now)
        if not self.many:
            self._tail = self._log_tail(self.jobs[0])

    @staticmethod
    def _log_tail(job: Job) -> str:
        try:
            text = "".join(c.text for c in job.logs("stdout", 0, tail_bytes=LOG_TAIL_BYTES))
        except HpcuiError:
            return ""  # a dropped link: the next look tries again
        return "\n".join(text.rstrip("\n").splitlines()[-LOG_LINES:])

    def _end_text(self) -> str:
        if not self.many:
            return _outcome(self.jobs[0])
        failed = [j for j in self.jobs if j.state.value != "COMPLETED"]
        return "\n".join(f"{j.job_id}: {_outcome(j)}" for j in failed[:FAILED_SHOWN])

    # -- what is shown ------------------------------------------------------------------------

    def _elapsed(self, job: Job) -> str:
        started = self._first_running.get(job.job_id)
        if started is None:
            return ""
        secs = int(time.monotonic() - started)
        at_least = "≥ " if job.job_id in self._seen_running_at_start else ""
        return f"{at_least}{secs // 60}m{secs % 60:02d}s"

    def _headline(self) -> str:
        if not self.many:
            job = self.jobs[0]
            state = job.state.value
            reason = job.reason if state == "PENDING" else ""
            elapsed = self._elapsed(job)
            return " · ".join(
                p
                for p in (
                    f"{job.cluster.name}:{job.job_id} {job.name}".strip(),
                    state,
                    f"waiting: {reason}" if reason else "",
                    f"ran {elapsed}" if elapsed and job.state.is_final else elapsed,
                )
                if p
            )
        counts = Counter(j.state.value for j in self.jobs)
        done = sum(1 for j in self.jobs if j.state.is_final)
        first = self.jobs[0]
        states = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        return f"{first.cluster.name}: {len(self.jobs)} jobs ({done} ended) · {states}"

    def _bundle(self) -> dict[str, str]:
        head = self._headline()
        body = self._ending or self._tail
        text = head + (f"\n{body}" if body else "")
        colour = _colour(self.jobs)
        html_body = (
            f'<pre style="margin:2px 0;max-height:12em;overflow:auto">{html.escape(body)}</pre>'
            if body
            else ""
        )
        return {
            "text/plain": text,
            "text/html": (
                f'<div class="hpcui-job" style="border-left:4px solid {colour};padding-left:6px">'
                f"<b>{html.escape(head)}</b>{html_body}</div>"
            ),
        }


def _outcome(job: Job) -> str:
    """The result (short) or the error with the remote traceback's end."""
    try:
        value = job.result(timeout=60)
    except JobFailedError as exc:
        tb = (exc.remote_traceback or str(exc)).rstrip().splitlines()
        return "raised on the cluster:\n" + "\n".join(tb[-15:])
    except HpcuiError as exc:
        return str(exc)
    text = repr(value)
    return "returned " + (text if len(text) <= RESULT_CHARS else text[:RESULT_CHARS] + "…")


def _colour(jobs: Sequence[Job]) -> str:
    states = {j.state.value for j in jobs}
    if states - {"COMPLETED", "RUNNING", "PENDING", "COMPLETING", "SUBMITTING"}:
        return "#d9534f"  # something failed, was cancelled, ran out of time
    if states == {"COMPLETED"}:
        return "#5cb85c"
    return "#f0ad4e" if "RUNNING" in states else "#999999"
