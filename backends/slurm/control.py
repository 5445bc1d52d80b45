"""Any job of the user, not only hpcui's: ``scontrol show job`` read into ``JobDetails``
(its log paths with Slurm's filename patterns expanded), its batch script, and the
control verbs (hold, release, requeue, time limit) as argv lists.

Every command here is an argv list: job ids are checked by ``slurm_jobids`` first and
values by the callers of ``time_limit_command``, so nothing reaches a remote shell
unquoted (the transport quotes argv)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from hpcui.backends.batch import BatchSpec
from hpcui.backends.nodelist import expand_nodelist
from hpcui.backends.records import JobDetails
from hpcui.backends.required_fields import require
from hpcui.backends.shell import quote
from hpcui.backends.slurm.fields import (
    ENV,
    parse_timestamp,
    plain_user,
    seconds,
    slurm_state,
    split_fields,
)
from hpcui.backends.slurm.jobids import parse_job_id
from hpcui.backends.slurm.script import directives

# `Key=value` pairs of `scontrol show job --oneliner`. A value may hold spaces (Comment,
# Command with arguments): a pair starts only where a known-looking key follows a space.
_PAIR = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9:/_]*)=")


def show_job_command(job_id: str) -> list[str]:
    """One line per job (per array element) with every field scontrol knows; timestamps
    in the standard form whatever the user's SLURM_TIME_FORMAT says."""
    return [*ENV, "scontrol", "show", "job", "--oneliner", _checked_id(job_id)]


def batch_script_command(job_id: str) -> list[str]:
    """The job's batch script on stdout (Slurm keeps it while the job is known)."""
    return ["scontrol", "write", "batch_script", _checked_id(job_id), "-"]


def hold_command(job_ids: Sequence[str]) -> list[str]:
    return ["scontrol", "hold", _id_list(job_ids)]


def release_command(job_ids: Sequence[str]) -> list[str]:
    return ["scontrol", "release", _id_list(job_ids)]


def requeue_command(job_ids: Sequence[str], *, hold: bool = False) -> list[str]:
    """Back to PENDING (a running, completed or failed batch job); ``hold``: held there."""
    return ["scontrol", "requeuehold" if hold else "requeue", _id_list(job_ids)]


def time_limit_command(job_id: str, limit: str) -> list[str]:
    """``limit`` in Slurm's time syntax (checked by hpcui.request.resources' parser first)."""
    if not re.fullmatch(r"[0-9:+-]+|UNLIMITED", limit):
        raise ValueError(f"not a Slurm time limit: {limit!r}")
    return ["scontrol", "update", f"JobId={_checked_id(job_id)}", f"TimeLimit={limit}"]


def shell_script(job_id: str, node: str | None = None) -> str:
    """Shell code: an interactive login shell inside the job's allocation (on `node`, else
    its first node), sharing its resources (``--overlap``, Slurm 20.11+)."""

    where = f" --nodelist={quote(node)}" if node else ""
    return (
        f"exec srun --jobid={quote(_checked_id(job_id))} --overlap --pty --nodes=1 --ntasks=1"
        f'{where} "${{SHELL:-/bin/bash}}" -l'
    )


#: sbatch options salloc does not take (or that only make sense for a batch script)
_NOT_SALLOC = ("--output=", "--error=", "--open-mode=", "--signal=", "--array=", "--comment=")


def allocation_shell_script(spec: BatchSpec) -> str:
    """Shell code: `salloc` with the request's options, then a login shell on the first
    node of the new allocation (`hpcui shell --new`); the allocation ends with the shell."""
    options = [quote(d if d.startswith("-") else f"--{d}") for d in directives(spec)
               if not d.startswith(_NOT_SALLOC)]  # fmt: skip
    return (
        f"exec salloc {' '.join(options)} srun --pty --nodes=1 --ntasks=1 "
        '"${SHELL:-/bin/bash}" -l'
    )


def parse_show_job(text: str) -> list[JobDetails]:
    """``show_job_command`` output: one record per line."""
    return [_details(_pairs(line)) for line in text.splitlines() if line.strip()]


def _pairs(line: str) -> dict[str, str]:
    marks = list(_PAIR.finditer(line))
    out: dict[str, str] = {}
    if not marks:
        return out
    for mark, after in zip(marks, [*marks[1:], None], strict=True):
        end = after.start() if after is not None else len(line)
        out[mark.group(1)] = line[mark.end() : end].strip()
    return out


def _none(value: str) -> str:
    return "" if value in ("(null)", "None", "N/A", "Unknown") else value


#: keys of older Slurm releases that mean what today's do (before 2.3: ``Name=``)
_OLD_KEYS = {"Name": "JobName"}


def _details(v: dict[str, str]) -> JobDetails:
    if "JobId" not in v:
        raise ValueError(f"not a `scontrol show job --oneliner` line: {str(v)[:200]!r}")
    for old, new in _OLD_KEYS.items():
        if old in v and new not in v:
            v[new] = v[old]
    require(v, ("JobId", "JobName", "UserId", "JobState"), "This `scontrol show job` record")
    job = v["JobId"]
    array_job, array_task = _none(v.get("ArrayJobId", "")), _none(v.get("ArrayTaskId", ""))
    if array_job and array_task:
        job = f"{array_job}_{array_task}" if array_task.isdigit() else f"{array_job}_[{array_task}]"
    fields = {
        "A": array_job or v["JobId"],
        "a": array_task if array_task.isdigit() else "0",
        "j": v["JobId"],
        "J": v["JobId"],
        "u": plain_user(v.get("UserId", "")),
        "x": v.get("JobName", ""),
        "N": _none(v.get("BatchHost", "")),
    }
    state_raw = v.get("JobState", "")
    return JobDetails(
        job_id=job,
        name=v.get("JobName", ""),
        user=fields["u"],
        state=slurm_state(state_raw),
        state_raw=state_raw,
        reason=_none(v.get("Reason", "")),
        exit_code=v.get("ExitCode", ""),
        partition=v.get("Partition", ""),
        work_dir=v.get("WorkDir", ""),
        command=_none(v.get("Command", "")),
        stdout=expand_pattern(_none(v.get("StdOut", "")), fields),
        stderr=expand_pattern(_none(v.get("StdErr", "")), fields),
        batch_host=fields["N"],
        nodelist=_none(v.get("NodeList", "")),
        time_limit_s=seconds(v.get("TimeLimit", "")),
        dependency=_none(v.get("Dependency", "")),
        submit_time=parse_timestamp(v.get("SubmitTime", "")),
        start_time=parse_timestamp(v.get("StartTime", "")),
        batch=v.get("BatchFlag", "1") == "1",
    )


#: what the accounting database keeps of a job the controller forgot (MinJobAge). StdOut
#: and StdErr are sacct fields from Slurm 23.02 on: an older sacct refuses the command.
ACCOUNTING_FIELDS = (
    "JobID", "JobIDRaw", "JobName", "User", "State", "Reason", "Partition", "WorkDir",
    "StdOut", "StdErr", "NodeList", "TimelimitRaw", "Submit", "Start",
)  # fmt: skip


def accounting_command(job_id: str) -> list[str]:
    """The job's allocation line from sacct (``-X``), in ``ACCOUNTING_FIELDS`` order."""
    fields = ",".join(ACCOUNTING_FIELDS)
    return [*ENV, "sacct", "-X", "-n", "-P", "-j", _checked_id(job_id), f"--format={fields}"]


def batch_script_accounting_command(job_id: str) -> list[str]:
    """The batch script as the database keeps it (``AccountingStoreFlags=job_script``)."""
    return ["sacct", "--batch-script", "-j", _checked_id(job_id)]


def parse_accounting(text: str) -> list[JobDetails]:
    """``accounting_command`` output: the same record as ``scontrol show job`` gives while
    the controller remembers the job (sacct prints StdOut unexpanded: expanded here)."""
    out = []
    for parts in split_fields(text, len(ACCOUNTING_FIELDS), suffixed=False):
        v = dict(zip(ACCOUNTING_FIELDS, parts, strict=True))
        job, raw = v["JobID"], v["JobIDRaw"]
        array_job, _, array_task = job.partition("_") if "_" in job else ("", "", "")
        nodes = _none(v["NodeList"]) if v["NodeList"] != "None assigned" else ""
        fields = {
            "A": array_job or raw,
            "a": array_task if array_task.isdigit() else "0",
            "j": raw,
            "J": raw,
            "u": v["User"],
            "x": v["JobName"],
            "N": expand_nodelist(nodes)[0] if nodes else "",
        }
        limit = v["TimelimitRaw"]
        stdout = expand_pattern(_none(v["StdOut"]), fields)
        out.append(
            JobDetails(
                job_id=job,
                name=v["JobName"],
                user=v["User"],
                state=slurm_state(v["State"]),
                state_raw=v["State"].split(" ", 1)[0],
                reason=_none(v["Reason"]),
                partition=v["Partition"],
                work_dir=v["WorkDir"],
                stdout=stdout,
                # sacct leaves StdErr empty where the job gave no --error: it shares StdOut
                stderr=expand_pattern(_none(v["StdErr"]), fields) or stdout,
                batch_host=fields["N"],
                nodelist=nodes,
                time_limit_s=int(limit) * 60 if limit.isdigit() else None,
                submit_time=parse_timestamp(v["Submit"]),
                start_time=parse_timestamp(v["Start"]),
                batch=bool(stdout),
            )
        )
    return out


def parse_batch_script_accounting(text: str) -> str:
    """``sacct --batch-script`` output: the script after its banner ("Batch Script for
    JOB" and a dashed rule). Empty when the database kept none (the site does not set
    ``AccountingStoreFlags=job_script``, or the job was no batch job)."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines[:3]):
        if line.strip() and set(line.strip()) == {"-"}:
            script = "".join(lines[i + 1 :])
            return "" if script.strip() in ("", "NONE") else script
    return ""


_PATTERN = re.compile(r"%(%|\d*[AajJuxNst])")


def expand_pattern(path: str, fields: dict[str, str]) -> str:
    """Slurm's filename patterns (sbatch(1) "filename pattern"): ``%j``, ``%x``, ``%A``,
    ``%a``, ``%u``, ``%N``, zero padding (``%4a``), ``%%``. Slurm 20.11+ prints StdOut
    already expanded; older ones print the pattern, and this expands it the same way.
    Step/task patterns (``%s``, ``%t``) name per-step files; the batch step's are 0."""

    def one(m: re.Match[str]) -> str:
        spec = m.group(1)
        if spec == "%":
            return "%"
        width, letter = spec[:-1], spec[-1]
        value = "0" if letter in "st" else fields.get(letter, "")
        return value.zfill(int(width)) if width and value.isdigit() else value

    return _PATTERN.sub(one, path)


def _checked_id(job_id: str) -> str:
    parse_job_id(job_id)  # raises ValueError that names the id
    return job_id


def _id_list(job_ids: Sequence[str]) -> str:
    if not job_ids:
        raise ValueError("no job id given")
    return ",".join(_checked_id(j) for j in job_ids)
