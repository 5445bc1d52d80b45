"""What the trackers use of a Cluster: they sit below hpcui.clusters, which holds a relay."""

from __future__ import annotations

from typing import Any, Protocol

from hpcui.store.registry import Registry
from hpcui.transport.base import Transport


class Site(Protocol):
    """What the relay uses of a Cluster (it sits below hpcui.clusters)."""

    name: str

    @property
    def transport(self) -> Transport: ...
    @property
    def registry(self) -> Registry: ...
    @property
    def python(self) -> str: ...
    def job(self, ref: str) -> Any: ...
