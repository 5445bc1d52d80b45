"""Slurm through any transport: sbatch, sacct (squeue/scontrol when accounting is off)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from hpcui.backends import array_limits, usage
from hpcui.backends.batch import BatchSpec, format_duration
from hpcui.backends.records import (
    AccountingEntry,
    FairShare,
    JobDetails,
    JobPriority,
    NodeInfo,
    PartitionInfo,
    QueueEntry,
    StartEstimate,
)
from hpcui.backends.slurm import accounting as slurm_accounting
from hpcui.backends.slurm import control as slurm_control
from hpcui.backends.slurm import estimate as slurm_estimate
from hpcui.backends.slurm import free as slurm_free
from hpcui.backends.slurm import jobids as slurm_jobids
from hpcui.backends.slurm import ledger as slurm_ledger
from hpcui.backends.slurm import partitions as slurm_partitions
from hpcui.backends.slurm import queue as slurm_queue
from hpcui.backends.slurm import script as slurm_script
from hpcui.backends.slurm.ledger import LedgerAnswer
from hpcui.errors import HpcuiError, JobsRefused, SchedulerError, UsageError
from hpcui.schedulers.base import H, JobStatus, Q, Scheduler
from hpcui.transport.base import Command, CommandResult

log = logging.getLogger(__name__)

#: After sacct fails (no slurmdbd), use squeue this long before trying sacct again.
ACCOUNTING_RETRY_S = 60.0


class SlurmScheduler(Scheduler):
    name = "slurm"

    def __init__(self, transport) -> None:
        super().__init__(transport)
        self._accounting_off_until = 0.0
        self._squeue_rows: dict[type, dict[str, Any]] = {}

    @property
    def accounting_off(self) -> bool:
        return time.monotonic() < self._accounting_off_until

    def render_script(self, spec: BatchSpec) -> str:
        try:
            return slurm_script.render_script(spec)
        except ValueError as exc:
            raise UsageError(f"{exc}. Fix the request and submit again.") from None

    def submit_command(self, script_path: str) -> Command:
        return slurm_script.sbatch_command(script_path)

    def chain_submit_command(self, path: str, n: int, after_ok: Sequence[str] = ()) -> Command:
        return slurm_script.chain_submit_command(path, n, after_ok)

    def parse_submit(self, stdout: str) -> str:
        try:
            return slurm_jobids.parse_sbatch_parsable(stdout).job_id
        except ValueError as exc:
            raise SchedulerError(
                f"sbatch printed no job id ({exc}); output was: {stdout!r}"
            ) from exc

    def estimate_start(self, scripts: Mapping[str, str]) -> list[StartEstimate]:
        """`sbatch --test-only` of each script, one round trip (Slurm's backfill answer: a
        time, nodes and the partition; its refusal in its own words)."""
        self.calls += 1
        res = self.transport.run(slurm_estimate.estimate_command(scripts))
        found = slurm_estimate.parse_test_only(res.stdout)
        if len(found) != len(scripts):
            raise SchedulerError(
                f"sbatch --test-only answered {len(found)} of {len(scripts)} requests: "
                f"{(res.stdout + res.stderr).strip()[:300]!r}"
            )
        return found

    def find_token(self, token: str) -> str | None:
        self.calls += 1
        res = self.transport.run(slurm_script.find_token_command()).check("squeue (token lookup)")
        return slurm_script.parse_find_token(res.stdout, token)

    def status(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        if not job_ids:
            return {}
        if not self.accounting_off:
            bases = sorted({str(slurm_jobids.parse_job_id(j).job) for j in job_ids})
            self.calls += 1
            res = self.transport.run(slurm_accounting.sacct_command(bases))
            if res.ok:
                return sacct_statuses(res.stdout)
            log.info(
                "sacct failed (%s); using squeue for %.0f s", res.stderr.strip(), ACCOUNTING_RETRY_S
            )
            self._accounting_off_until = time.monotonic() + ACCOUNTING_RETRY_S
        self.calls += 1
        res = self.transport.run(slurm_queue.squeue_command(None, me=True)).check("squeue")
        out: dict[str, JobStatus] = {}
        for e in slurm_queue.parse_squeue(res.stdout, into=QueueEntry):
            status = JobStatus(e.state, e.state_raw, None, e.reason or "")
            for jid in slurm_jobids.expand_array_ids(e.job_id):
                out[jid] = status
        return out

    def usage_command(self, job_id: str) -> Command:
        return usage.slurm_usage_command(job_id)

    def parse_usage(self, text: str, job_id: str) -> usage.UsageReading:
        try:
            return usage.parse_slurm_usage(text)
        except ValueError as exc:
            raise SchedulerError(f"Usage of job {job_id}: {exc}") from None

    def cancel(self, job_ids: Sequence[str]) -> None:
        if job_ids:
            res = self.transport.run(slurm_script.scancel_command(list(job_ids)))
            _control_checked(res, "cancel", job_ids, tool="scancel")
            refused = slurm_script.parse_scancel_refusals(res.stderr)
            if refused:  # exit status 0 all the same: the others were cancelled
                raise _refusals("cancel", refused, tool="scancel")

    # -- site state --------------------------------------------------------------------------

    def queue(self, into: type[Q]) -> list[Q]:
        self.calls += 1
        res = self.transport.run(slurm_queue.squeue_command(None, me=True))
        # rows of unchanged lines are reused from the last refresh (one dict per row type)
        reuse = self._squeue_rows.setdefault(into, {})
        return slurm_queue.parse_squeue(_checked(res, "squeue").stdout, into=into, reuse=reuse)

    def everyones_queue(self, into: type[Q]) -> list[Q]:
        self.calls += 1
        res = self.transport.run(slurm_queue.squeue_command(None, me=False))
        return slurm_queue.parse_squeue(_checked(res, "squeue").stdout, into=into)

    def history(
        self,
        since: str | None = None,
        job_ids: Sequence[str] | None = None,
        *,
        into: type[H],
    ) -> list[H]:
        """sacct; where accounting is off, the ended jobs squeue still remembers (MinJobAge)."""
        if not self.accounting_off:
            self.calls += 1
            res = self.transport.run(slurm_accounting.sacct_command(job_ids, since=since))
            if res.ok:
                return slurm_accounting.parse_sacct(res.stdout, into=into)
            log.info("sacct failed (%s); history from squeue", res.stderr.strip())
            self._accounting_off_until = time.monotonic() + ACCOUNTING_RETRY_S
        self.calls += 1
        res = self.transport.run(slurm_queue.squeue_command(job_ids, me=True))
        return [
            slurm_queue.as_accounting(e, into)
            for e in slurm_queue.parse_squeue(_checked(res, "squeue").stdout, into=QueueEntry)
        ]

    def max_array_size(self) -> int | None:
        self.calls += 1
        res = self.transport.run(list(array_limits.SLURM_COMMAND))
        try:
            return array_limits.parse_slurm(_checked(res, "scontrol show config").stdout)
        except ValueError as exc:
            raise SchedulerError(
                f"scontrol show config printed something hpcui cannot read: {exc}"
            ) from exc

    def partitions(self) -> list[PartitionInfo]:
        self.calls += 1
        res = self.transport.run(slurm_partitions.sinfo_command())
        return slurm_partitions.parse_sinfo(_checked(res, "sinfo").stdout)

    # -- what is free now, and where the user stands ------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        self.calls += 1
        res = self.transport.run(slurm_free.sinfo_nodes_command())
        try:
            return slurm_free.parse_sinfo_nodes(_checked(res, "sinfo").stdout)
        except ValueError as exc:
            raise SchedulerError(f"sinfo printed something hpcui cannot read: {exc}") from None

    def standing(self) -> tuple[list[FairShare], list[JobPriority], str]:
        """sshare and sprio in one round trip, split by a marker line."""
        self.calls += 1
        mark = "--hpcui-sprio--"
        cmd = (
            f"{' '.join(slurm_free.sshare_command())} 2>&1; echo {mark}; "
            f"{slurm_free.sprio_command()} 2>&1"
        )
        res = self.transport.run(cmd)
        shares, _, prios = res.stdout.partition(mark + "\n")
        note = ""
        if slurm_free.NO_PRIORITY.search(prios) or slurm_free.NO_PRIORITY.search(shares):
            note = (
                "this site runs no fair-share priority (priority/basic): jobs start in "
                "submission order as resources allow"
            )
        return slurm_free.parse_sshare(shares), slurm_free.parse_sprio(prios), note

    def ledger(self) -> LedgerAnswer | None:
        self.calls += 1
        res = self.transport.run(slurm_ledger.ledger_command())
        shares, queue, default = slurm_ledger.split_answer(res.stdout)
        try:
            return LedgerAnswer(
                associations=slurm_ledger.parse_associations(shares),
                jobs=slurm_ledger.parse_queue(queue),
                default_account=slurm_ledger.parse_default_account(default),
            )
        except ValueError as exc:
            raise SchedulerError(
                f"sshare/squeue printed something hpcui cannot read: {exc}"
            ) from None

    # -- any job of the user, and control over it ---------------------------------------------

    def job_details(self, job_id: str) -> JobDetails:
        self.calls += 1
        res = self.transport.run(_argv(slurm_control.show_job_command, job_id))
        if _forgotten(res):  # ended before MinJobAge: the accounting database may know it
            found = self.accounted_details(job_id)
            if found is not None:
                return found
        _control_checked(res, "show job", [job_id])
        rows = slurm_control.parse_show_job(res.stdout)
        exact = [r for r in rows if r.job_id == job_id]
        if not (exact or rows):
            raise UsageError(f"Slurm printed nothing for job {job_id}; check the id.")
        return (exact or rows)[0]

    def shell_script(self, job_id: str, node: str | None = None) -> str:
        return _argv(slurm_control.shell_script, job_id, node)

    def allocation_shell_script(self, spec: BatchSpec) -> str:
        try:
            return slurm_control.allocation_shell_script(spec)
        except ValueError as exc:  # an extra directive salloc would misread
            raise UsageError(f"{exc}.") from None

    def accounted_details(self, job_id: str) -> JobDetails | None:
        """The job as sacct keeps it (None: not there, or a sacct before 23.02, which keeps
        no log paths): what `job_details` falls back on once the controller forgot it."""
        res = self.transport.run(_argv(slurm_control.accounting_command, job_id))
        if not res.ok:
            return None
        rows = slurm_control.parse_accounting(res.stdout)
        exact = [r for r in rows if job_id in (r.job_id, r.job_id.split("_")[0])]
        return next(iter(exact or rows), None)

    def batch_script(self, job_id: str) -> str:
        res = self.transport.run(_argv(slurm_control.batch_script_command, job_id))
        if res.ok and "retrieval failed" in res.stderr:  # scontrol exits 0 all the same
            res = CommandResult(1, res.stdout_bytes, res.stderr_bytes, res.command)
        if _forgotten(res):  # the database keeps scripts where AccountingStoreFlags says so
            kept = self.transport.run(_argv(slurm_control.batch_script_accounting_command, job_id))
            script = slurm_control.parse_batch_script_accounting(kept.stdout) if kept.ok else ""
            if script:
                return script
        _control_checked(res, "write batch_script", [job_id])
        return res.stdout

    def hold(self, job_ids: Sequence[str]) -> None:
        self._control(slurm_control.hold_command, "hold", job_ids)

    def release(self, job_ids: Sequence[str]) -> None:
        self._control(slurm_control.release_command, "release", job_ids)

    def requeue(self, job_ids: Sequence[str]) -> None:
        self._control(slurm_control.requeue_command, "requeue", job_ids)

    def set_time_limit(self, job_id: str, seconds: int) -> None:
        limit = format_duration(seconds)
        res = self.transport.run(_argv(slurm_control.time_limit_command, job_id, limit))
        if not res.ok and any(w in (res.stderr + res.stdout).lower() for w in _NOT_YOURS):
            self._raising_refused(job_id, seconds, res)
        _control_checked(res, f"update TimeLimit={limit}", [job_id])

    def _raising_refused(self, job_id: str, seconds: int, res: CommandResult) -> None:
        """Slurm answers a user who raises their own job's limit as it answers a stranger
        ("Access/permission denied"): only operators may raise one. Say that when the job
        is the user's and the new limit is higher; anything else is said as before."""
        try:
            details = self.job_details(job_id)
            me = self.transport.run(["id", "-un"]).stdout.strip()
        except HpcuiError:
            return
        now = details.time_limit_s
        if details.user != me or now is None or seconds <= now:
            return
        said = " ".join((res.stderr.strip() or res.stdout.strip()).split())[-300:]
        raise UsageError(
            f"Slurm lets only its operators raise a job's time limit ({said}): job {job_id} "
            f"has {format_duration(now)} and you asked for {format_duration(seconds)}. "
            "Lowering it works; to get more time, ask your site's support, or resubmit with "
            "a longer --time (a job that saves checkpoints can go on from its last one)."
        )

    def _control(self, build, verb: str, job_ids: Sequence[str]) -> None:
        res = self.transport.run(_argv(build, list(job_ids)))
        _control_checked(res, verb, job_ids)


def _argv(build, *args):
    """A dialect command; a malformed id or value is the user's error, said as such."""
    try:
        return build(*args)
    except ValueError as exc:
        raise UsageError(f"{exc}. Give a job id as `hpcui jobs` shows it.") from None


#: scontrol's words for a request Slurm refuses because of the job or the user, not itself
_REFUSALS = (
    "invalid job id",
    "pending execution",
    "already",
    "access/permission denied",
    "not presently supported",
    "job has already finished",
    "requested operation",
    "invalid time limit",
    "not permitted",
    "only batch jobs",
    "job is no longer pending",
    "job is not pending",
    "disabled",
)


def _forgotten(res: CommandResult) -> bool:
    return not res.ok and "invalid job id" in (res.stderr + res.stdout).lower()


#: Slurm's words for "not your job": scontrol hold/release/update say "Invalid user id",
#: requeue and scancel "Access/permission denied" (seen on the dev cluster's 24.11)
_NOT_YOURS = ("invalid user id", "access/permission denied", "permission denied")


def _control_checked(
    res: CommandResult, verb: str, job_ids: Sequence[str], *, tool: str = "scontrol"
) -> None:
    """scontrol's and scancel's refusals as UsageErrors that say why and what to do next:
    the same refusal gives the same words and exit code (2) whatever the verb."""
    if res.ok:
        return
    said = " ".join((res.stderr.strip() or res.stdout.strip()).split())[-500:] or "(no output)"
    ids = ", ".join(job_ids)
    low = said.lower()
    if any(word in low for word in _NOT_YOURS):
        raise UsageError(
            f"Slurm refused to {verb} job {ids}: it is not yours ({said}). Only its owner "
            "(or a Slurm operator) can; `hpcui jobs` lists your own jobs."
        )
    if "invalid job id" in low:
        raise UsageError(
            f"Slurm does not know job {ids} (wrong id, or it ended longer ago than the "
            "controller remembers: MinJobAge). `hpcui jobs --all` lists your jobs."
        )
    if any(word in low for word in _REFUSALS):
        raise UsageError(
            f"Slurm refused `{tool} {verb}` for job {ids}: {said}. Check the job's state "
            "with `hpcui show` (hold/release need a pending job, requeue a running or ended "
            "batch job; raising a time limit may be reserved to administrators)."
        )
    raise SchedulerError(
        f"{tool} {verb} failed for job {ids} (exit status {res.exit_status}): {said}. "
        f"The controller may be busy or down; try again, or run {tool} on the login node."
    )


def _refusals(verb: str, refused: dict[str, str], *, tool: str) -> JobsRefused:
    """Per-job refusals in `_control_checked`'s words, one sentence per reason."""
    by_reason: dict[str, list[str]] = {}
    for job_id, reason in refused.items():
        by_reason.setdefault(reason, []).append(job_id)
    said = []
    for reason, ids in by_reason.items():
        try:
            _control_checked(CommandResult(1, b"", reason.encode()), verb, ids, tool=tool)
        except HpcuiError as exc:
            said.append(str(exc))
    return JobsRefused(" ".join(said), job_ids=list(refused))


def sacct_statuses(text: str) -> dict[str, JobStatus]:
    """``sacct_command`` output as JobStatus per job id (array ranges expanded)."""
    return {
        jid: JobStatus(e.state, e.state_raw, e.exit_code)
        for e in slurm_accounting.parse_sacct(text, into=AccountingEntry)
        for jid in slurm_jobids.expand_array_ids(e.job_id)
    }


def _checked(res: CommandResult, tool: str) -> CommandResult:
    """A failed squeue/sacct/sinfo as a SchedulerError that says what to do next."""
    if res.ok:
        return res
    detail = (res.stderr.strip() or res.stdout.strip())[-1000:] or "(no output)"
    raise SchedulerError(
        f"{tool} failed (exit status {res.exit_status}): {detail}. The Slurm controller may be "
        f"busy, rate-limiting or down; hpcui retries with backoff. If it persists, run "
        f"`{tool}` on the login node yourself, or ask the site's support."
    )
