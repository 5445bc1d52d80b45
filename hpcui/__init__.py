"""hpcui: drive Slurm and PBS supercomputers from your laptop.

The public API is imported lazily so `import hpcui` (and `hpcui --help`) stay fast and
pull in neither paramiko, textual nor torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hpcui.version import __version__ as __version__

_LAZY = {
    "connect": "hpcui.api",
    "submit": "hpcui.api",
    "get_job": "hpcui.api",
    "Cluster": "hpcui.cluster",
    "Job": "hpcui.job",
    "JobState": "hpcui.backends.states",
    "Resources": "hpcui.resources",
    "HpcuiError": "hpcui.errors",
}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:
    from hpcui.api import connect, get_job, submit  # noqa: F401
    from hpcui.backends.states import JobState  # noqa: F401
    from hpcui.cluster import Cluster  # noqa: F401
    from hpcui.errors import HpcuiError  # noqa: F401
    from hpcui.job import Job  # noqa: F401
    from hpcui.resources import Resources  # noqa: F401


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hpcui' has no attribute {name!r}")

    return getattr(importlib.import_module(module), name)
