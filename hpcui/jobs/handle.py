"""One protocol for a job in hand, whoever submitted it: hpcui's `Job` and `OtherJob` (any
other job of the user) both satisfy it, so a face asks `handle.hpcui_job` for what only
hpcui's jobs have (results, ranks, a recorded script) instead of asking which class it holds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, Unpack, runtime_checkable

from hpcui.backends.records import JobDetails
from hpcui.backends.states import JobState
from hpcui.logs.follow import LogChunk, LogOptions, Stream


@runtime_checkable
class JobHandle(Protocol):
    """What every face may ask of a job."""

    @property
    def job_id(self) -> str: ...
    @property
    def hpcui_job(self) -> bool:
        """True for hpcui's own jobs (results, ranks, a job folder); False for any other."""
        ...

    @property
    def cluster_name(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def folder(self) -> str: ...
    @property
    def num_tasks(self) -> int: ...
    @property
    def state(self) -> JobState: ...
    @property
    def reason(self) -> str: ...
    @property
    def details(self) -> JobDetails | None:
        """The scheduler's description of a job hpcui did not submit (None for hpcui's)."""
        ...

    def logs(
        self, stream: Stream = "stdout", rank: int | None = None, **options: Unpack[LogOptions]
    ) -> Iterator[LogChunk]: ...

    def cancel(self) -> None: ...

    def batch_script(self) -> str: ...
