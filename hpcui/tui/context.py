"""What every screen of the app shares, handed to each screen when the app builds it.

Screens read the connections, the registry and the config from here and ask the app for
anything else with messages (``hpcui.tui.messages``): no screen imports the app.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hpcui.config import Config
from hpcui.store.registry import JobRecords, job_records
from hpcui.tui.hub import Hub
from hpcui.tui.messages import JobKey

if TYPE_CHECKING:  # a type only: the app's look hands Finish objects over
    from hpcui.logs.progress import Finish


@dataclass
class AppContext:
    config: Config
    hub: Hub
    #: the cluster the app opened on (the Submit and Cluster screens start there)
    start_cluster: str
    #: the job the Job screen shows (or shows next time it opens)
    current_job: JobKey | None = None
    #: will it finish, for running hpcui jobs (the app's look every FINISH_LOOK_S)
    finishes: dict[JobKey, Finish] = field(default_factory=dict)
    #: the jobs already told "will not finish" (once per job, whichever screen told it)
    finish_told: set[JobKey] = field(default_factory=set)

    @property
    def registry(self) -> JobRecords:
        """The process's one registry connection; opened on first use (in a worker), so a
        locked or broken registry is an error shown in the app, not a crash at start."""
        return job_records()
