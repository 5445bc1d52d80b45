"""hpcui: drive Slurm and PBS supercomputers from your laptop.

The public API is ``__all__`` below (``connect``, ``submit``, ``get_job``, ``Cluster``, ``Job``,
``JobState``, ``Resources``, ``sweep``, ``get_sweep``, ``Sweep`` and the errors to catch), plus the modules users import by name:
``hpcui.distributed`` (inside a job), ``hpcui.metrics`` and ``hpcui.live``. Every other module
is internal: its names may change between releases (docs/architecture.md, "Public and
internal").

The API is imported lazily so `import hpcui` (and `hpcui --help`) stay fast and pull in
neither paramiko, textual nor torch; the errors are standard library only.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hpcui.errors import (
    AnswersRejected,
    AuthenticationError,
    ClusterConnectionError,
    CommandTimeout,
    ConfigError,
    ConnectionLost,
    HostKeyError,
    HpcuiError,
    JobCancelledError,
    JobError,
    JobFailedError,
    JobLostError,
    JobsRefused,
    JobTimeLimitError,
    JobTimeoutError,
    PromptNeededError,
    RegistryError,
    RemoteCommandError,
    RemotePythonError,
    RemoteWriteError,
    ResourceAdvice,
    ResultIntegrityError,
    ResultNeedsModuleError,
    SchedulerError,
    SubmitOutcomeUnknown,
    SubmitRejected,
    UsageError,
    WaitTimeout,
)
from hpcui.version import __version__ as __version__

_LAZY = {
    "connect": "hpcui.clusters.api",
    "submit": "hpcui.clusters.api",
    "get_job": "hpcui.clusters.api",
    "sweep": "hpcui.sweeps.api",
    "get_sweep": "hpcui.sweeps.api",
    "Sweep": "hpcui.sweeps.sweep",
    "Cluster": "hpcui.clusters.cluster",
    "Job": "hpcui.jobs.job",
    "JobState": "hpcui.backends.states",
    "Resources": "hpcui.request.resources",
}
__all__ = [
    "AnswersRejected",
    "AuthenticationError",
    "Cluster",
    "ClusterConnectionError",
    "CommandTimeout",
    "ConfigError",
    "ConnectionLost",
    "HostKeyError",
    "HpcuiError",
    "Job",
    "JobCancelledError",
    "JobError",
    "JobFailedError",
    "JobLostError",
    "JobState",
    "JobTimeLimitError",
    "JobTimeoutError",
    "JobsRefused",
    "PromptNeededError",
    "RegistryError",
    "RemoteCommandError",
    "RemotePythonError",
    "RemoteWriteError",
    "ResourceAdvice",
    "Resources",
    "ResultIntegrityError",
    "ResultNeedsModuleError",
    "SchedulerError",
    "SubmitOutcomeUnknown",
    "SubmitRejected",
    "Sweep",
    "UsageError",
    "WaitTimeout",
    "__version__",
    "connect",
    "get_job",
    "get_sweep",
    "submit",
    "sweep",
]

if TYPE_CHECKING:
    from hpcui.backends.states import JobState
    from hpcui.clusters.api import connect, get_job, submit
    from hpcui.clusters.cluster import Cluster
    from hpcui.jobs.job import Job
    from hpcui.request.resources import Resources
    from hpcui.sweeps.api import get_sweep, sweep
    from hpcui.sweeps.sweep import Sweep


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hpcui' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return __all__
