"""Where one element of a sweep stands (its newest job), as sweep.py and table.py read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpcui.backends.states import JobState


@dataclass(frozen=True)
class ElementState:
    """One configuration and where it stands: its newest job, how many it had."""

    key: str
    config: dict[str, Any]
    state: JobState | None  # None: never submitted
    job_id: str | None
    attempts: int
    #: where its call sits in its array task when elements were packed (None: alone)
    position: int | None = None

    @property
    def needs_run(self) -> bool:
        """No result and nothing queued or running for it: what resume() submits."""
        return self.state is None or (self.state.is_final and self.state is not JobState.COMPLETED)
