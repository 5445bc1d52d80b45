"""What every screen of the app shares, handed to each screen when the app builds it.

Screens read the connections, the registry and the config from here and ask the app for
anything else with messages (``hpcui.tui.messages``): no screen imports the app.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpcui.config import Config
from hpcui.store.registry import JobRecords, job_records
from hpcui.tui.hub import Hub
from hpcui.tui.messages import JobKey


@dataclass
class AppContext:
    config: Config
    hub: Hub
    #: the cluster the app opened on (the Submit and Cluster screens start there)
    start_cluster: str
    #: the job the Job screen shows (or shows next time it opens)
    current_job: JobKey | None = None

    @property
    def registry(self) -> JobRecords:
        """The process's one registry connection; opened on first use (in a worker), so a
        locked or broken registry is an error shown in the app, not a crash at start."""
        return job_records()
