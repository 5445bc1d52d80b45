"""What core services need of a Cluster, as a Protocol: they take a Cluster without
importing hpcui.cluster (which imports them), so the import graph stays a tree."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from hpcui.registry import Registry
    from hpcui.schedulers.base import Scheduler
    from hpcui.status import StatusService
    from hpcui.submission import RemoteInfo
    from hpcui.transport.base import Transport


class ClusterParts(Protocol):
    name: str

    @property
    def registry(self) -> Registry: ...
    @property
    def transport(self) -> Transport: ...
    @property
    def scheduler(self) -> Scheduler: ...
    @property
    def status(self) -> StatusService: ...
    @property
    def result_cache(self) -> Path: ...
    def remote_info(self) -> RemoteInfo: ...
