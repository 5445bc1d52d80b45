"""What an account has left in Slurm's own ledger: its associations' TRES-minute limits
(``GrpTRESMins``), what they have used (``GrpTRESRaw``, the figure Slurm enforces those
limits against), what their running jobs will still use (``TRESRunMins``), and the
user's queued jobs with what each may take (``squeue -r``: one line per array task).

Pure: one shell line that prints the three answers split by marker lines, and their
parsers. sshare prints the user's associations with their parent accounts above them,
indented one space per level, so the limits that bind a job (its own association's and
every parent's) are read from the indentation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hpcui.backends.scheduler_text import parse_mem
from hpcui.backends.slurm.fields import layout_error, seconds, split_fields, tres_values

SSHARE_FIELDS = ("Account", "User", "GrpTRESMins", "GrpTRESRaw", "TRESRunMins")
#: squeue -O, `|`-separated: the user's queued and running jobs, an array's tasks one by one
SQUEUE_FIELDS = ("JobArrayID", "StateCompact", "Account", "Partition", "tres-alloc", "TimeLimit",
                 "TimeLeft")  # fmt: skip
MARK_QUEUE = "--hpcui-ledger-queue--"
MARK_DEFAULT = "--hpcui-ledger-default--"


def ledger_command() -> str:
    """Shell: sshare (the user's associations and their parents), the user's jobs and
    their default account - one round trip."""
    sq = ",".join(f"{f}:|" for f in SQUEUE_FIELDS)
    return (
        f"sshare --noheader --parsable2 --format={','.join(SSHARE_FIELDS)} 2>&1; "
        f"echo {MARK_QUEUE}; squeue --me --array --noheader --states=PD,R,CF,S "
        f"-O '{sq}' 2>&1; echo {MARK_DEFAULT}; "
        'sacctmgr --noheader --parsable2 show user "$(id -un)" format=DefaultAccount 2>&1'
    )


@dataclass(frozen=True)
class Association:
    """One sshare row: an account (user "") or the user's association in it, its parents'
    indices in the same answer, and its TRES minutes: limits, used, still to run."""

    account: str
    user: str
    depth: int
    parents: tuple[int, ...]
    limits: Mapping[str, float] = field(default_factory=dict)
    used: Mapping[str, float] = field(default_factory=dict)
    running: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class QueuedJob:
    """One of the user's jobs (an array's task each) and the TRES it holds or asks for."""

    job_id: str
    pending: bool
    account: str
    partition: str
    tres: Mapping[str, float]
    limit_min: float | None
    left_min: float | None


@dataclass(frozen=True)
class LedgerAnswer:
    """The whole answer of `ledger_command`, parsed."""

    associations: list[Association]
    jobs: list[QueuedJob]
    default_account: str | None


def split_answer(text: str) -> tuple[str, str, str]:
    """The command's three parts: sshare's, squeue's, sacctmgr's."""
    shares, _, rest = text.partition(MARK_QUEUE + "\n")
    queue, _, default = rest.partition(MARK_DEFAULT + "\n")
    return shares, queue, default


def _minutes(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in tres_values(text).items():
        try:
            out[key] = float(value)
        except ValueError:
            continue
    return out


def parse_associations(text: str) -> list[Association]:
    """sshare's rows in order, each knowing its parents; raises ValueError on another
    layout (sshare's own error text, e.g. where accounting is not configured)."""
    rows: list[Association] = []
    stack: list[tuple[int, int]] = []  # (depth, index) of the open ancestors
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|")  # not split_fields: the account's indentation is its depth
        if len(parts) != len(SSHARE_FIELDS):
            raise layout_error("sshare", SSHARE_FIELDS, line)
        account, user, limits, used, running = parts
        depth = len(account) - len(account.lstrip(" "))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        rows.append(
            Association(
                account=account.strip(),
                user=user.strip(),
                depth=depth,
                parents=tuple(i for _, i in stack),
                limits=_minutes(limits),
                used=_minutes(used),
                running=_minutes(running),
            )
        )
        stack.append((depth, len(rows) - 1))
    return rows


def _duration_min(text: str) -> float | None:
    s = seconds(text)  # None for UNLIMITED, NOT_SET, N/A and the rest
    return None if s is None else s / 60


def _tres_amounts(text: str) -> dict[str, float]:
    """`cpu=4,mem=8G,node=2,billing=4,gres/gpu=4`: counts (memory in MB, as sshare's)."""
    out: dict[str, float] = {}
    for key, value in tres_values(text).items():
        try:
            out[key] = (parse_mem(value) or 0) / 2**20 if key == "mem" else float(value)
        except ValueError:
            continue
    return out


def parse_queue(text: str) -> list[QueuedJob]:
    """squeue's lines (SQUEUE_FIELDS); a line of another shape raises ValueError."""
    return [
        QueuedJob(
            job_id=job_id,
            pending=state in ("PD", "S"),
            account=account,
            partition=partition,
            tres=_tres_amounts(tres),
            limit_min=_duration_min(limit),
            left_min=_duration_min(left),
        )
        for job_id, state, account, partition, tres, limit, left in split_fields(
            text, len(SQUEUE_FIELDS), suffixed=True
        )
    ]


def parse_default_account(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if len(lines) == 1 and " " not in lines[0] else None
