"""Slurm job ids: one parser for every shape the commands print or accept.

squeue, sacct, scontrol and sbatch print ids as ``123``, ``123_7`` (array element),
``123_[1-5%2]`` (pending array tasks), ``123+0`` (het component), ``123.batch`` /
``123.0`` / ``123.extern`` (steps) and ``123;cluster`` (``sbatch --parsable``).
Everything above this module keeps ids as strings; the rules for them live here once.
"""

from __future__ import annotations

import re

from pydantic import ConfigDict

from hpcui.backends.model import Model

_JOB_ID = re.compile(
    r"(?P<job>\d+)"
    r"(?:_(?:(?P<task>\d+)|\[(?P<spec>[^\]]+)\])|\+(?P<het>\d+))?"
    r"(?:\.(?P<step>[A-Za-z0-9_+]+))?"
)
_PARSABLE = re.compile(r"(?P<job>\d+)(?:;(?P<cluster>\S+))?")


class SlurmJobId(Model):
    """A parsed job id; ``str()`` gives the canonical text, as Slurm prints it."""

    model_config = ConfigDict(frozen=True)

    job: int
    array_task: int | None = None
    array_spec: str | None = None  # pending array tasks, e.g. "1-5%2" from "123_[1-5%2]"
    het_offset: int | None = None
    step: str | None = None  # "batch", "extern", "interactive", "0", ...

    @property
    def is_array(self) -> bool:
        return self.array_task is not None or self.array_spec is not None

    @property
    def base(self) -> str:
        """The allocation the id belongs to: the id without its step."""
        if self.array_task is not None:
            return f"{self.job}_{self.array_task}"
        if self.array_spec is not None:
            return f"{self.job}_[{self.array_spec}]"
        if self.het_offset is not None:
            return f"{self.job}+{self.het_offset}"
        return str(self.job)

    def __str__(self) -> str:
        return self.base if self.step is None else f"{self.base}.{self.step}"


def parse_job_id(text: str) -> SlurmJobId:
    """Parse any job or step id Slurm prints; surrounding whitespace is ignored."""
    m = _JOB_ID.fullmatch(text.strip())
    if m is None:
        raise ValueError(
            f"not a Slurm job id: {text!r} "
            "(expected e.g. 123, 123_7, 123_[1-5%2], 123+0 or 123.batch)"
        )
    return SlurmJobId(
        job=int(m["job"]),
        array_task=int(m["task"]) if m["task"] else None,
        array_spec=m["spec"],
        het_offset=int(m["het"]) if m["het"] else None,
        step=m["step"],
    )


class SubmittedJob(Model):
    """What ``sbatch --parsable`` answered: the job id and, on multi-cluster sites, the cluster."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    cluster: str | None = None


def parse_sbatch_parsable(stdout: str) -> SubmittedJob:
    """Read ``sbatch --parsable`` stdout: ``ID`` or ``ID;CLUSTER``.

    Site submit filters may print notices on stdout too, so the last line that is
    exactly an id wins; anything else is an error that quotes what sbatch said.
    """
    for line in reversed(stdout.splitlines()):
        m = _PARSABLE.fullmatch(line.strip())
        if m is not None:
            return SubmittedJob(job_id=m["job"], cluster=m["cluster"])
    raise ValueError(
        "sbatch --parsable printed no job id (expected a line 'ID' or 'ID;CLUSTER'); "
        f"its stdout was: {stdout.strip()[-500:]!r}"
    )


def expand_array_ids(job_id: str) -> list[str]:
    """`123_[1-3,7:2%2]` (pending elements, as squeue/sacct print them) -> the element ids.

    Status is tracked per element; any other id comes back as its allocation id.
    """
    parsed = parse_job_id(job_id)
    if parsed.array_spec is None:
        return [parsed.base]
    out = []
    for part in parsed.array_spec.split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        step = 1
        if ":" in hi:
            hi, st = hi.split(":")
            step = int(st)
        out += [f"{parsed.job}_{i}" for i in range(int(lo), int(hi or lo) + 1, step)]
    return out
