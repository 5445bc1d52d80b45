"""hpcui: drive Slurm and PBS supercomputers from your laptop.

The public API is imported lazily so `import hpcui` (and `hpcui --help`) stay fast and
pull in neither paramiko, textual nor torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hpcui.version import __version__ as __version__

_LAZY = {
    "connect": "hpcui.clusters.api",
    "submit": "hpcui.clusters.api",
    "get_job": "hpcui.clusters.api",
    "Cluster": "hpcui.clusters.cluster",
    "Job": "hpcui.jobs.job",
    "JobState": "hpcui.backends.states",
    "Resources": "hpcui.request.resources",
    "HpcuiError": "hpcui.errors",
}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:
    from hpcui.backends.states import JobState  # noqa: F401
    from hpcui.clusters.api import connect, get_job, submit  # noqa: F401
    from hpcui.clusters.cluster import Cluster  # noqa: F401
    from hpcui.errors import HpcuiError  # noqa: F401
    from hpcui.jobs.job import Job  # noqa: F401
    from hpcui.request.resources import Resources  # noqa: F401


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hpcui' has no attribute {name!r}")

    return getattr(importlib.import_module(module), name)
