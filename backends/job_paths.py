"""The job folder's layout, in one place (submitit's ``JobPaths`` idea).

Every script renderer (Slurm, PBS, local) and every reader (results, logs, stop file,
submit recovery) names files through here. submitit's own names —
``<id>_submitted.pkl``, ``<id>_<task>_log.out|err``, ``<id>_<task>_result.pkl`` — are
what its runner reads and writes on the node; hpcui adds the uploaded script and
pickles, the stop file and the submit guard's markers. Ids and tasks are plain strings so
a renderer can pass a shell expression (``"${SLURM_JOB_ID}"``) or a Slurm pattern (``%t``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO, Literal

Stream = Literal["stdout", "stderr"]

#: the batch script, as uploaded
SCRIPT = "submission.sh"
#: the submitting shell's pid while sbatch/qsub runs (hpcui.store.remote's guard)
SUBMITTING = ".submitting"
#: the scheduler's answer to the submit
JOB_ID_FILE = "job_id"
#: every task's result, for one ``ls``-like listing of a folder
RESULT_GLOB = "*_result.pkl"
#: the job's result-signing key (hex, 0600): written by the client with the pickles, read
#: by the compute-side runner (hpcui.node.signed) to sign each result file
RESULT_KEY = ".hpcui-result-key"
#: at the end of each result file: this, then HMAC-SHA256 of the bytes before it under
#: RESULT_KEY (hex) and a newline; unpickling stops before it
SIGNATURE_TRAILER = b"\n#hpcui-hmac-sha256:"
#: where results of jobs submitted before the trailer keep their signature: beside them
SIGNATURE_SUFFIX = ".hmac"

#: an array's calls, all in one file (`pack_calls`): element i reads only its own bytes.
#: One file instead of one pickle and one link per element: a 10,000-element map made
#: 60,000 entries in the job folder, on homes with file quotas of 100,000
CALLS_PACK = "calls.pack"
#: set for an array element: its index in CALLS_PACK (the runner writes its call from it)
CALL_INDEX_ENV = "HPCUI_CALL_INDEX"
_PACK_MAGIC = b"HPCUIPK1"
_U64 = struct.Struct("<Q")

_LOG_EXT: dict[str, str] = {"stdout": "out", "stderr": "err"}


def split_signature(data: bytes) -> tuple[bytes, str | None]:
    """(the result's pickle, its signature) from a result file; None: no trailer."""
    cut = data.rfind(SIGNATURE_TRAILER)
    if cut < 0:
        return data, None
    tail = data[cut + len(SIGNATURE_TRAILER) :]
    if len(tail) != 65 or not tail.endswith(b"\n"):
        return data, None
    return data[:cut], tail[:-1].decode("ascii", "replace")


def pack_calls(pickles: list[bytes]) -> bytes:
    """``HPCUIPK1``, the count, N+1 offsets (little-endian u64), then the pickles."""
    start = len(_PACK_MAGIC) + _U64.size * (len(pickles) + 2)
    offsets = [start]
    for data in pickles:
        offsets.append(offsets[-1] + len(data))
    table = b"".join(_U64.pack(o) for o in offsets)
    return _PACK_MAGIC + _U64.pack(len(pickles)) + table + b"".join(pickles)


def read_call(fh: BinaryIO, index: int) -> bytes:
    """Element `index`'s pickle from an open pack: two small reads and its own bytes."""
    head = fh.read(len(_PACK_MAGIC) + _U64.size)
    if len(head) != len(_PACK_MAGIC) + _U64.size or not head.startswith(_PACK_MAGIC):
        raise ValueError("not an hpcui calls pack (bad header)")
    (count,) = _U64.unpack(head[len(_PACK_MAGIC) :])
    if not 0 <= index < count:
        raise ValueError(f"array element {index} is not in the pack ({count} calls)")
    fh.seek(len(head) + index * _U64.size)
    pair = fh.read(2 * _U64.size)
    if len(pair) != 2 * _U64.size:
        raise ValueError("calls pack cut short (offset table)")
    start, end = _U64.unpack(pair[: _U64.size])[0], _U64.unpack(pair[_U64.size :])[0]
    fh.seek(start)
    data = fh.read(end - start)
    if len(data) != end - start:
        raise ValueError(f"calls pack cut short (element {index})")
    return data


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


def track_name(job: str) -> str:
    """The folder a job's trackers write in (hpcui.trackers relays it to the client)."""
    return f"track/{job}"


@dataclass(frozen=True)
class JobPaths:
    """The files of one job (or one array element ``123_4``) in its folder."""

    folder: str
    job_id: str

    def _in(self, name: str) -> str:
        return f"{self.folder.rstrip('/')}/{name}"

    @property
    def script(self) -> str:
        return self._in(SCRIPT)

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

    @property
    def track(self) -> str:
        return self._in(track_name(self.job_id))
