"""What every Slurm parser here shares: the state words, the scalar values (timestamps,
durations, exit codes, TRES and gres counts, user names), and the splitting of ``|``-separated
lines (padding, a ``|`` inside the last field, the odd line) into fields.

Timestamps: commands run under ``env SLURM_TIME_FORMAT=standard`` (``ENV``) because a user's
own setting (``relative``, a strftime format) would change them. They are the cluster's
local time and are returned naive.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime

from hpcui.backends.scheduler_text import parse_duration
from hpcui.backends.slurm.jobids import parse_job_id
from hpcui.backends.states import JobState

NO_TIME = {"", "N/A", "UNKNOWN", "NONE", "(NULL)"}
NO_TEXT = {"", "N/A", "n/a", "(null)", "None", "None assigned"}
ENV = ("env", "SLURM_TIME_FORMAT=standard")
SEP = "|"

# ---------------------------------------------------------------------------- states

_JS = JobState
STATES: dict[str, JobState] = {
    **dict.fromkeys(("PENDING", "PD"), _JS.PENDING),
    **dict.fromkeys(("RUNNING", "R"), _JS.RUNNING),
    **dict.fromkeys(("SUSPENDED", "S"), _JS.SUSPENDED),
    **dict.fromkeys(("COMPLETED", "CD"), _JS.COMPLETED),
    **dict.fromkeys(("CANCELLED", "CA"), _JS.CANCELLED),
    **dict.fromkeys(("FAILED", "F"), _JS.FAILED),
    **dict.fromkeys(("TIMEOUT", "TO"), _JS.TIMEOUT),
    **dict.fromkeys(("NODE_FAIL", "NF"), _JS.NODE_FAIL),
    **dict.fromkeys(("PREEMPTED", "PR"), _JS.PREEMPTED),
    **dict.fromkeys(("OUT_OF_MEMORY", "OOM"), _JS.OUT_OF_MEMORY),
    **dict.fromkeys(("COMPLETING", "CG"), _JS.COMPLETING),
    **dict.fromkeys(("REQUEUED", "RQ"), _JS.REQUEUED),
    # The rest have no word of their own in hpcui; each maps to what it means for the user.
    **dict.fromkeys(("BOOT_FAIL", "BF"), _JS.NODE_FAIL),  # nodes failed to boot
    **dict.fromkeys(("DEADLINE", "DL"), _JS.TIMEOUT),  # killed at its --deadline
    **dict.fromkeys(("CONFIGURING", "CF"), _JS.RUNNING),  # allocated, nodes booting
    **dict.fromkeys(("RESIZING", "RS"), _JS.RUNNING),
    **dict.fromkeys(("SIGNALING", "SI"), _JS.RUNNING),
    **dict.fromkeys(("STAGE_OUT", "SO"), _JS.COMPLETING),  # burst buffer stage-out
    **dict.fromkeys(("STOPPED", "ST"), _JS.SUSPENDED),  # SIGSTOP, keeps its nodes
    **dict.fromkeys(("REQUEUE_FED", "RF"), _JS.REQUEUED),
    **dict.fromkeys(("REQUEUE_HOLD", "RH"), _JS.REQUEUED),
    **dict.fromkeys(("SPECIAL_EXIT", "SE"), _JS.REQUEUED),  # requeued and held
    **dict.fromkeys(("RESV_DEL_HOLD", "RD"), _JS.PENDING),  # held: reservation deleted
    **dict.fromkeys(("REVOKED", "RV"), _JS.CANCELLED),  # federation: runs elsewhere
}


@functools.lru_cache(maxsize=256)
def slurm_state(word: str) -> JobState:
    """hpcui's state for a Slurm state word or abbreviation; unknown words -> UNKNOWN.

    Only the first word counts (``CANCELLED by 1234``); a trailing ``+`` (sacct's mark
    for a truncated column) is ignored.
    """
    first = word.strip().split(" ", 1)[0].rstrip("+").upper()
    return STATES.get(first, JobState.UNKNOWN)


# ------------------------------------------------------------------- scalar values


@functools.lru_cache(maxsize=8192)  # an array's elements share their submit time
def parse_timestamp(text: str) -> datetime | None:
    """A naive local datetime from ``YYYY-MM-DDTHH:MM:SS``; None for N/A, Unknown, None."""
    t = text.strip()
    if t.upper() in NO_TIME:
        return None
    try:  # fromisoformat: C speed; the shape check keeps it as strict as strptime was
        if len(t) != 19 or t[10] != "T" or not t[17:].isdigit():
            raise ValueError
        return datetime.fromisoformat(t)
    except ValueError:
        raise ValueError(
            f"not a Slurm timestamp: {text!r} "
            "(expected YYYY-MM-DDTHH:MM:SS, as printed under SLURM_TIME_FORMAT=standard)"
        ) from None


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """``code:signal`` -> (code, signal): ``0:9`` was killed by SIGKILL. Empty -> (None, None)."""
    t = text.strip()
    if not t:
        return None, None
    m = re.fullmatch(r"(\d+):(\d+)", t)
    if m is None:
        raise ValueError(f"not a Slurm exit code: {text!r} (expected CODE:SIGNAL, e.g. 0:9)")
    return int(m[1]), int(m[2])


def text_value(value: str) -> str:
    """A value or "" for Slurm's words for nothing (values arrive stripped by `split_fields`)."""
    return "" if value in NO_TEXT else value


def leading_int(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    m = re.match(r"\d+", text.strip())  # NumNodes=1-1 while pending
    return int(m[0]) if m else None


@functools.lru_cache(maxsize=8192)
def seconds(text: str) -> int | None:
    value = parse_duration(text)
    return None if value is None else int(value)


def tres_values(text: str) -> dict[str, str]:
    """``cpu=4,mem=16G,gres/gpu=4`` -> {"cpu": "4", "mem": "16G", "gres/gpu": "4"}."""
    return dict(item.split("=", 1) for item in text_value(text).split(",") if "=" in item)


def gres_gpus(text: str) -> int:
    """GPUs in a gres list: ``gres:gpu:4``, ``gres/gpu:a100:2``, ``gpu:h100:4(S:0-1)``."""
    total = 0
    for item in text_value(text).split(","):
        parts = re.sub(r"\(.*?\)", "", item).replace("gres/", "gres:").split(":")
        if parts[0] == "gres":
            parts = parts[1:]
        if parts and parts[0] == "gpu":
            total += int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 1
    return total


def job_gpus(tres: Mapping[str, str], per_job: str, per_node: str, nodes: int) -> int | None:
    """GPUs of the whole job. TRES first (exact, but only where the site tracks gres/gpu),
    then the request; 0 when TRES is known and shows none, None when nothing is known."""
    if "gres/gpu" in tres:
        return int(tres["gres/gpu"])
    typed = [int(n) for key, n in tres.items() if key.startswith("gres/gpu:")]
    if typed:
        return sum(typed)
    if n := gres_gpus(per_job):
        return n
    if n := gres_gpus(per_node):
        return n * max(nodes, 1)
    return 0 if tres else None


def compose_job_id(v: Mapping[str, str]) -> str:
    """The id as squeue's %i prints it, from the raw id, array and het columns."""
    task, het = text_value(v.get("array_task", "")), text_value(v.get("het_offset", ""))
    if task:
        return f"{v['array_job']}_{task}" if task.isdigit() else f"{v['array_job']}_[{task}]"
    if het:
        return f"{v['het_job']}+{het}"
    return v.get("job", "")


def plain_user(text: str) -> str:
    """``alice(1000)`` (scontrol's form) -> ``alice``."""
    if text.endswith(")") and "(" in text:
        i = text.rindex("(")
        if text[i + 1 : -1].isdigit():
            return text[:i]
    return text


def job_selectors(job_ids: Sequence[str]) -> str:
    """The ``--jobs`` value: allocations only (steps dropped), ``123_[1-5]`` as ``123``."""
    if isinstance(job_ids, str):
        job_ids = [job_ids]
    if not job_ids:
        raise ValueError("no job ids given; pass None to ask about all your jobs")
    ids = [parse_job_id(text) for text in job_ids]
    return ",".join(dict.fromkeys(str(j.job) if j.array_spec else j.base for j in ids))


# ---------------------------------------------------------------- lines into fields


def layout_error(tool: str, fields: Sequence[str], line: str) -> ValueError:
    """A line of `tool` with another number of fields than asked for (its own error text,
    another version's layout)."""
    return ValueError(
        f"{tool} printed {line.count(SEP) + 1} fields where hpcui asked for {len(fields)} "
        f"({', '.join(fields)}): {line.strip()[:200]!r}; another Slurm version's layout?"
    )


def fields_of(line: str, count: int, *, suffixed: bool) -> list[str] | None:
    """The fields of one line (None for a blank one); the last keeps any further ``|``."""
    if suffixed and line.endswith(SEP):  # squeue -O puts the suffix after the last field too
        line = line[:-1]
    parts = line.split(SEP, count - 1)
    if len(parts) != count:
        if not line.strip():
            return None
        raise ValueError(
            f"expected {count} '{SEP}'-separated fields, got {len(parts)} in {line!r}; "
            "was the command built with the same field list?"
        )
    if " " in line:  # padding around values: only then is a strip per field needed
        parts = [part.strip() for part in parts]
    return parts


@contextlib.contextmanager
def young_collection_once() -> Iterator[None]:
    """One collection of the young objects after a big parse instead of dozens during it.

    A 10,000-job answer leaves ~40,000 container objects (rows, their values, the lines'
    fields) that hold no cycle; with the collector on, they were scanned again and again
    as they aged and a full collection of the whole process often followed (~20 % of a
    sacct parse). The young generation is collected here, inside the parse, so what it
    costs is counted where it is caused."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(0)


def split_fields(text: str, count: int, *, suffixed: bool) -> Iterator[list[str]]:
    """The fields of each non-blank line: `fields_of`, with the common line (the right
    number of fields, the suffix where one is expected) taken without a second pass."""
    n = count - 1
    for line in text.splitlines():
        parts = line.split(SEP, n)
        if len(parts) == count:
            last = parts[n]
            if not suffixed or last.endswith(SEP):
                if suffixed:  # the suffix: dropped from the last field only
                    parts[n] = last[:-1]
                if " " in line and (  # padding around values (not a space inside one)
                    " |" in line or "| " in line or line[0] == " " or line[-1] == " "
                ):
                    parts = [part.strip() for part in parts]
                yield parts
                continue
        odd = fields_of(line, count, suffixed=suffixed)  # an odd line: the exact rules
        if odd is not None:
            yield odd


def keyed_rows(
    text: str, fields: Sequence[str], keys: Mapping[str, str], *, suffixed: bool
) -> Iterator[dict[str, str]]:
    """Each line as {record key: value}; fields the parser has no use for are dropped."""
    lowered = {field.lower(): key for field, key in keys.items()}
    found = [lowered.get(field.lower()) for field in fields]
    known = [name for name in found if name is not None]
    if len(known) == len(found):  # every field is one the parser uses: the fast path
        for parts in split_fields(text, len(fields), suffixed=suffixed):
            yield dict(zip(known, parts))
        return
    for parts in split_fields(text, len(fields), suffixed=suffixed):
        yield {name: part for name, part in zip(found, parts) if name}
