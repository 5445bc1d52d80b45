"""The job folder's layout, in one place (submitit's ``JobPaths`` idea).

Every script renderer (Slurm, PBS, local) and every reader (results, logs, stop file,
submit recovery) names files through here. submitit's own names —
``<id>_submitted.pkl``, ``<id>_<task>_log.out|err``, ``<id>_<task>_result.pkl`` — are
what its runner reads and writes on the node; hpcui adds the uploaded script and
pickles, the stop file and the submit guard's markers. Ids and tasks are plain strings so
a renderer can pass a shell expression (``"${SLURM_JOB_ID}"``) or a Slurm pattern (``%t``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Stream = Literal["stdout", "stderr"]

#: the batch script, as uploaded
SCRIPT = "submission.sh"
#: the submitting shell's pid while sbatch/qsub runs (hpcui.submission's guard)
SUBMITTING = ".submitting"
#: the scheduler's answer to the submit
JOB_ID_FILE = "job_id"
#: every task's result, for one ``ls``-like listing of a folder
RESULT_GLOB = "*_result.pkl"
#: the job's result-signing key (hex, 0600): written by the client with the pickles, read
#: by the compute-side runner (hpcui.compute.signed) to sign each result file
RESULT_KEY = ".hpcui-result-key"
#: beside each result: HMAC-SHA256 of its bytes under RESULT_KEY, hex
SIGNATURE_SUFFIX = ".hmac"

_LOG_EXT: dict[str, str] = {"stdout": "out", "stderr": "err"}


def pickle_name(index: int | str | None = None) -> str:
    """The uploaded call: ``task.pkl``, or ``<i>.pkl`` for element i of an array."""
    return "task.pkl" if index is None else f"{index}.pkl"


def submitted_name(job: str) -> str:
    """What submitit's runner unpickles: linked to the uploaded pickle before it starts."""
    return f"{job}_submitted.pkl"


def log_stem(job: str, task: str) -> str:
    """``<job>_<task>_log``: Slurm's ``--output``/``--error`` patterns add ``.out``/``.err``."""
    return f"{job}_{task}_log"


def log_name(job: str, task: str, stream: Stream) -> str:
    if stream not in _LOG_EXT:
        raise ValueError(f"stream must be 'stdout' or 'stderr', got {stream!r}")
    return f"{log_stem(job, task)}.{_LOG_EXT[stream]}"


def result_name(job: str, task: str) -> str:
    return f"{job}_{task}_result.pkl"


def stop_name(job: str) -> str:
    """hpcui.distributed.stop_requested() polls it on every rank."""
    return f"{job}.stop"


@dataclass(frozen=True)
class JobPaths:
    """The files of one job (or one array element ``123_4``) in its folder."""

    folder: str
    job_id: str

    def _in(self, name: str) -> str:
        return f"{self.folder.rstrip('/')}/{name}"

    def log(self, task: int, stream: Stream) -> str:
        return self._in(log_name(self.job_id, str(task), stream))

    def result(self, task: int) -> str:
        return self._in(result_name(self.job_id, str(task)))

    @property
    def submitted(self) -> str:
        return self._in(submitted_name(self.job_id))

    @property
    def stop(self) -> str:
        return self._in(stop_name(self.job_id))
