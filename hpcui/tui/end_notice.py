"""Told when a job ends (which of your hpcui jobs ended since the last look), and when a
running one will not finish before its limit.

The registry is the one place every end arrives (the status service writes it, whatever
screen is shown), so the app reads it every few seconds off the UI thread and says each
end once: a notification and the terminal bell, except for the job the Job screen shows
(it shows the end itself). Jobs that were already over when the app started are not news.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, Literal

from hpcui.backends.states import JobState
from hpcui.store.registry import JobRecord

#: how often the app looks (a registry read: milliseconds)
LOOK_S = 3.0


class EndWatch:
    """Remembers which jobs had ended at the last look: an end not seen before is news,
    also of a job that started and ended between two looks."""

    def __init__(self, since: float | None = None) -> None:
        self._since = time.time() if since is None else since  # the app's start
        self._over: set[tuple[str, str]] | None = None

    def look(self, records: Iterable[JobRecord]) -> list[JobRecord]:
        """The records that ended since the last look; on the first, those submitted
        since the app started."""
        over = {(r.cluster, r.job_id): r for r in records if r.job_id and r.state.is_final}
        known = self._over
        if known is None:
            known = {key for key, r in over.items() if r.submitted_at < self._since}
        self._over = known | set(over)
        return [r for key, r in over.items() if key not in known]


def message(record: JobRecord) -> tuple[str, Literal["information", "warning"]]:
    """(text, severity) of the notification for an ended job."""
    ok = record.state is JobState.COMPLETED
    text = f"{record.cluster}:{record.job_id} {record.name} ended {record.state.value}"
    return text, "information" if ok else "warning"


#: how often the app looks whether running jobs will finish (a queue snapshot of the last
#: minute and one log read per running hpcui job, at most FINISH_JOBS per cluster)
FINISH_LOOK_S, FIRST_FINISH_LOOK_S, FINISH_JOBS = 60.0, 10.0, 10


def finish_warning(cluster: str, job_id: str, name: str, finish: Any) -> str:
    """The notice for a running job whose progress says it will not finish in time."""
    named = f" {name}" if name else ""
    return f"{cluster}:{job_id}{named} will not finish before its limit: {finish.line(job_id)}"
