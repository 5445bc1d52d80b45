"""Will a running job finish before its limit? The progress its log printed
(hpcui.logs.progress) against the scheduler's elapsed time and limit. The rate is the progress
bar's own where it prints one; else what this machine's earlier looks at the job saw
(kept per job, the last 10 minutes: `show`, `top` and the app each add a look); else what
was done since the job started. Each answer says which."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from hpcui.backends.records import JobDetails
from hpcui.backends.states import JobState
from hpcui.common.formatting import hms
from hpcui.errors import HpcuiError
from hpcui.logs.progress import Finish, Progress, read_progress, will_finish
from hpcui.transport.base import Transport

log = logging.getLogger(__name__)

#: how far back an earlier look still times the rate
WINDOW_S = 600.0
#: what of each log is read: the newest progress is at its end
TAIL_BYTES = 64 * 1024


def log_paths(handle: Any) -> list[str]:
    """Where a job's rank-0 output goes: stderr first (progress bars draw there)."""
    if getattr(handle, "hpcui_job", False):
        paths = handle.paths
        return [paths.log(0, "stderr"), paths.log(0, "stdout")]
    details = getattr(handle, "details", None)
    found = [getattr(details, "stderr", ""), getattr(details, "stdout", "")]
    return list(dict.fromkeys(p for p in found if p))


def tail(transport: Transport, path: str, limit: int = TAIL_BYTES) -> str:
    size = transport.stat_size(path)
    if not size:
        return ""
    data = transport.read_file(path, offset=max(0, size - limit), length=limit)
    return data.decode("utf-8", "replace")


def progress_of(transport: Transport, handle: Any) -> Progress | None:
    """The newest progress in the job's logs: a drawn bar wins over a counted line."""
    found = [read_progress(tail(transport, p)) for p in log_paths(handle)]
    bars = [p for p in found if p is not None and p.source != "counted"]
    counted = [p for p in found if p is not None]
    return (bars or counted)[0] if bars or counted else None


class FinishWatch:
    """One cluster's answers, with the looks kept under `root` (0600 files, one per job)."""

    def __init__(self, root: Path, cluster: str, transport: Transport) -> None:
        self.root, self.cluster, self.transport = root, cluster, transport

    def running(self, handle: Any, details: JobDetails | None) -> Finish | None:
        """A look at a job the scheduler describes as running (`details`: its start and
        limit); None for any other, and where the logs cannot be read."""
        if details is None or details.state is not JobState.RUNNING:
            return None
        start = details.start_time
        elapsed = (datetime.now() - start).total_seconds() if start else None
        try:
            return self.look(handle, elapsed_s=elapsed, limit_s=details.time_limit_s)
        except (HpcuiError, OSError) as exc:
            log.debug("no progress read for %s: %s", handle.job_id, exc)
            return None

    def of_queue(
        self, rows: Iterable[Any], handle_of: Callable[[str], Any], most: int = 10
    ) -> dict[str, Finish]:
        """Running hpcui jobs of a queue listing (its elapsed time and limit: no scheduler
        call of its own), at most `most`, one log read each: the app's column and notice."""
        out: dict[str, Finish] = {}
        for row in rows:
            if len(out) >= most:
                break
            if row.state is not JobState.RUNNING or not row.hpcui:
                continue
            try:
                finish = self.look(
                    handle_of(row.job_id), elapsed_s=row.elapsed_s, limit_s=row.time_limit_s
                )
            except (HpcuiError, OSError) as exc:
                log.debug("no progress read for %s: %s", row.job_id, exc)
                continue
            if finish is not None:
                out[row.job_id] = finish
        return out

    def look(
        self,
        handle: Any,
        *,
        elapsed_s: float | None,
        limit_s: float | None,
        now: float | None = None,
    ) -> Finish | None:
        progress = progress_of(self.transport, handle)
        if progress is None:
            return None
        now = time.time() if now is None else now
        earlier = self._keep(str(handle.job_id), now, progress)
        finish = will_finish(progress, elapsed_s=elapsed_s, limit_s=limit_s)
        if progress.rate_per_s is None and progress.left_s is None and earlier is not None:
            t0, done0 = earlier
            rate = (progress.done - done0) / (now - t0)
            left = None if finish is None else finish.limit_left_s
            basis = f"{progress.done - done0:,.0f} {progress.unit} in the last {hms(int(now - t0))}"
            return Finish(max(progress.total - progress.done, 0) / rate, left, basis, progress)
        return finish

    def _keep(self, job_id: str, now: float, p: Progress) -> tuple[float, float] | None:
        """Add this look; the oldest look of the window that saw less done (same total)."""
        path = self.root / self.cluster / f"{job_id.replace('/', '_')}.json"
        try:
            looks = [tuple(x) for x in json.loads(path.read_text())]
        except (OSError, ValueError):
            looks = []
        looks = [x for x in looks if len(x) == 3 and now - x[0] <= WINDOW_S and x[2] == p.total]
        earlier = next(((t, d) for t, d, _ in looks if d < p.done and now - t >= 5), None)
        looks.append((now, p.done, p.total))
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(looks[-200:], fh)
        return earlier
