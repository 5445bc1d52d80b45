"""PBS Pro, Torque and Slurm's Torque wrappers, any transport: qsub, ONE qstat a poll, qdel.

The dialect is probed once (``qstat --version``, ``qsub --help`` only if needed) before
the first script is rendered or the first status is read. Slurm's Torque wrappers also
answer to qsub/qstat but silently drop ``ngpus`` and all but the last ``-l``: hpcui sends
them one ``-l`` in the Torque syntax they do translate, and asks Slurm (the job's real
scheduler there) what their qstat cannot say: the outcome of an ended job (``C`` for every
end), the token after a dropped connection, accounting history.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import cached_property
from typing import TypeVar

from hpcui.backends import array_limits, usage
from hpcui.backends.batch import BatchSpec
from hpcui.backends.pbs import job as pbs_job
from hpcui.backends.pbs import nodes as pbs_nodes
from hpcui.backends.pbs import queues as pbs_queues
from hpcui.backends.pbs import script as pbs_script
from hpcui.backends.pbs import status as pbs
from hpcui.backends.pbs.dialect import PbsDialect
from hpcui.backends.pbs.job import PbsJob
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
from hpcui.backends.scheduler_text import duration_s, pbs_size
from hpcui.backends.slurm.ledger import LedgerAnswer
from hpcui.backends.states import JobState
from hpcui.errors import SchedulerError, UsageError
from hpcui.profiles.model import DEFAULT_NODE_SHELL
from hpcui.schedulers.base import Capabilities, H, JobStatus, Q, Scheduler
from hpcui.schedulers.slurm import SlurmScheduler, sacct_statuses
from hpcui.transport.base import Command, CommandResult, Transport

log = logging.getLogger(__name__)
_T = TypeVar("_T")

WRAPPER = "slurm-torque-wrapper"


class PbsScheduler(Scheduler):
    name = "pbs"

    def __init__(
        self,
        transport: Transport,
        dialect: PbsDialect | None = None,
        node_shell: str = DEFAULT_NODE_SHELL,
    ) -> None:
        super().__init__(transport)
        self._dialect = dialect
        self._node_shell = node_shell
        self._probe_lock = threading.Lock()

    # -- dialect ---------------------------------------------------------------------------

    @property
    def dialect(self) -> PbsDialect:
        """PBS Pro, Torque or Slurm's wrapper, probed once; raises for an unknown qstat."""
        with self._probe_lock:
            if self._dialect is None:
                self.calls += 1
                res = self.transport.run(pbs_script.probe_command())
                version, qsub_help = pbs_script.split_probe(res.stdout)
                try:
                    self._dialect = pbs.detect_pbs_dialect(version, qsub_help)
                except ValueError:
                    raise SchedulerError(
                        "Cannot tell which PBS this cluster runs: `qstat --version` printed "
                        f"{version.strip()[:300]!r}. Check that qsub/qstat are on PATH in a "
                        "login shell there (module load pbs?); if this is not PBS Pro or "
                        'Torque, use scheduler = "slurm" or "local".'
                    ) from None
                log.info("PBS dialect of %s: %s", self.transport.description, self._dialect)
        return self._dialect

    @cached_property
    def _slurm(self) -> SlurmScheduler:
        """Slurm itself, for what the wrapper's qstat cannot tell (wrapper dialect only)."""
        return SlurmScheduler(self.transport)

    @property
    def capabilities(self) -> Capabilities:
        """Slurm's Torque wrapper cannot show array elements: no map() there."""
        wrapped = self.dialect == WRAPPER
        return Capabilities(arrays=not wrapped, budget=wrapped)

    # -- submit ----------------------------------------------------------------------------

    def render_script(self, spec: BatchSpec) -> str:
        try:
            return pbs_script.render_script(spec, self.dialect)
        except ValueError as exc:
            raise UsageError(f"Cannot express this request on PBS: {exc}.") from None

    def submit_command(self, script_path: str) -> list[str]:
        if self.dialect == WRAPPER:
            try:
                return pbs_script.wrapper_qsub_command(script_path)
            except ValueError as exc:
                raise UsageError(f"{exc}; set a remote_base without shell characters.") from None
        return pbs_script.qsub_command(script_path)

    def chain_submit_command(self, path: str, n: int, after_ok: Sequence[str] = ()) -> Command:
        return pbs_script.chain_submit_command(self.submit_command(path), n, after_ok)

    def parse_submit(self, stdout: str) -> str:
        try:
            return pbs_script.base_id(pbs.parse_qsub_output(stdout))
        except ValueError as exc:
            raise SchedulerError(f"{exc}. The job may not exist; check `qstat -u $USER`.") from exc

    def find_token(self, token: str) -> str | None:
        dialect = self.dialect
        if dialect == WRAPPER:  # its qstat has no Variable_List; the comment is Slurm's
            return self._slurm.find_token(token)
        self.calls += 1
        res = self.transport.run(pbs_script.find_token_command(dialect))
        _checked(res, "qselect/qstat (token lookup)")
        return pbs_script.parse_find_token(res.stdout, token, dialect)

    # -- usage: the job's exec hosts -------------------------------------------------------

    def usage_command(self, job_id: str) -> Command:
        dialect = self.dialect
        if dialect == WRAPPER:  # Slurm underneath: srun reaches the job's nodes
            return self._slurm.usage_command(job_id)
        qstat = pbs_script.status_command([job_id], dialect)
        assert isinstance(qstat, list)  # one id: one qstat argv
        return usage.pbs_usage_command(job_id, qstat, self._node_shell)

    def parse_usage(self, text: str, job_id: str) -> usage.UsageReading:
        if self.dialect == WRAPPER:
            return self._slurm.parse_usage(text, job_id)
        try:
            qstat, reading = usage.parse_pbs_usage(text)
            found = (
                pbs.parse_torque_qstat_f(qstat)
                if self.dialect == "torque"
                else pbs.parse_qstat_json(qstat)
            )
        except ValueError as exc:
            raise SchedulerError(f"Usage of job {job_id}: {exc}") from None
        job = next((j for j in found if j.job_id == job_id), found[0] if found else None)
        steps = () if job is None else usage.pbs_steps(job_id, job.resources_used)
        return replace(reading, steps=steps)

    # -- status ----------------------------------------------------------------------------

    def _qstat(self, job_ids: Sequence[str]) -> list[PbsJob]:
        dialect = self.dialect
        self.calls += 1
        res = _checked(self.transport.run(pbs_script.status_command(job_ids, dialect)), "qstat")
        return _read(res.stdout, dialect)

    def status(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        """States of many jobs with ONE qstat; ids PBS no longer knows are left out, so
        the status service judges them by their result files (no history on the server)."""
        if not job_ids:
            return {}
        if self.dialect == WRAPPER:
            return self._wrapper_status(job_ids)
        wanted: dict[tuple[int, int | None], list[str]] = {}
        for jid in job_ids:
            key = pbs_script.id_key(jid)
            if key is not None:
                wanted.setdefault(key, []).append(jid)
        out: dict[str, JobStatus] = {}
        for job in self._qstat(job_ids):
            key = pbs_script.id_key(job.job_id)
            for jid in wanted.get(key, []) if key else []:
                out[jid] = _job_status(job)
        return out

    def _wrapper_status(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        """qstat for live states; an ended job (``C``, whatever the end) and one qstat has
        forgotten take sacct's verdict, in the same round trip. Neither: left out (the
        status service reads the result files)."""
        # An id of another scheduler (the cluster's config changed under old records) is
        # left out like an unknown one, instead of failing every poll of the others.
        job_ids = [j for j in job_ids if pbs_script.is_wrapper_id(j)]
        if not job_ids:
            return {}
        self.calls += 1
        res = self.transport.run(pbs_script.wrapper_status_command(job_ids))
        qstat_text, _, sacct_text = res.stdout.partition(pbs_script.SACCT_MARK)
        ended = {}
        try:
            ended = sacct_statuses(sacct_text)
        except ValueError as exc:  # sacct missing or accounting off: result files decide
            log.info("sacct output unusable on the wrapper site: %s", exc)
        out: dict[str, JobStatus] = {}
        listed = {j.job_id: j for j in pbs.parse_torque_qstat_f(qstat_text)}
        for jid in job_ids:
            job = listed.get(jid)
            if job is not None and job.state is not JobState.UNKNOWN:
                out[jid] = _job_status(job)
            elif jid in ended and ended[jid].state.is_final:
                out[jid] = replace(ended[jid], state_raw=f"C ({ended[jid].state_raw})")
        return out

    def cancel(self, job_ids: Sequence[str]) -> None:
        if not job_ids:
            return
        res = self.transport.run(pbs_script.qdel_command(job_ids))
        if not res.ok and not pbs_script.only_benign_errors(res.stderr):
            _checked(res, "qdel")

    # -- any job of the user, and control over it: Slurm itself under the wrapper -----------

    def job_details(self, job_id: str) -> JobDetails:
        if self.dialect == WRAPPER:
            return self._slurm.job_details(job_id)
        _valid_id(job_id)
        jobs = [
            j
            for j in self._qstat([job_id])
            if pbs_script.id_key(j.job_id) == pbs_script.id_key(job_id)
        ]
        if not jobs:
            raise UsageError(
                f"PBS does not know job {job_id} (wrong id, or its history is gone). "
                "`hpcui jobs --all` lists your jobs."
            )
        return pbs_job.details(job_id, jobs[0])

    def shell_script(self, job_id: str, node: str | None = None) -> str:
        if self.dialect == WRAPPER:
            return self._slurm.shell_script(job_id, node)
        return super().shell_script(job_id, node)

    def batch_script(self, job_id: str) -> str:
        if self.dialect == WRAPPER:
            return self._slurm.batch_script(job_id)
        raise UsageError(
            "PBS shows a job's script only to administrators (printjob); hpcui keeps the "
            "scripts of its own jobs: open the job's folder (`hpcui files JOB`)."
        )

    def hold(self, job_ids: Sequence[str]) -> None:
        self._control("hold", job_ids)

    def release(self, job_ids: Sequence[str]) -> None:
        self._control("release", job_ids)

    def requeue(self, job_ids: Sequence[str]) -> None:
        self._control("requeue", job_ids)

    def set_time_limit(self, job_id: str, seconds: int) -> None:
        if self.dialect == WRAPPER:
            return self._slurm.set_time_limit(job_id, seconds)
        _valid_id(job_id)
        res = self.transport.run(pbs_script.walltime_command(job_id, seconds))
        _control_checked(res, "qalter -l walltime", [job_id])

    def estimate_start(self, scripts: Mapping[str, str]) -> list[StartEstimate]:
        """Slurm's wrapper: Slurm's estimate. PBS has no test submit: none, said so."""
        if self.dialect == WRAPPER:
            return self._slurm.estimate_start(scripts)
        return [StartEstimate(partition=p, said=pbs_script.NO_ESTIMATE) for p in scripts]

    def _control(self, verb: str, job_ids: Sequence[str]) -> None:
        if self.dialect == WRAPPER:
            return getattr(self._slurm, verb)(job_ids)
        for jid in job_ids:
            _valid_id(jid)
        cmd = pbs_script.control_command(verb, job_ids)
        _control_checked(self.transport.run(cmd), cmd[0], job_ids)

    # -- site state --------------------------------------------------------------------------

    def _user_jobs(self, history: bool) -> list[PbsJob]:
        dialect = self.dialect
        if dialect == WRAPPER:  # no qselect there, and its -u prints only the table
            self.calls += 1
            res = _checked(self.transport.run(pbs_script.WRAPPER_USER_JOBS), "qstat")
            user, _, text = res.stdout.partition("\n")
            jobs = pbs.parse_torque_qstat_f(text)
            return [j for j in jobs if j.owner == user.strip() and j.state_raw != "C"]
        self.calls += 1
        cmd = pbs_script.user_jobs_command(dialect, history=history)
        res = _checked(self.transport.run(cmd), "qselect/qstat")
        if history and dialect == "pbspro" and not res.stdout.lstrip().startswith("{"):
            return _read(res.stdout, "torque", as_dialect="pbspro")  # text: user_jobs_command
        return _read(res.stdout, dialect)

    def queue(self, into: type[Q]) -> list[Q]:
        return [into.from_values(_values(into, _queue_entry(j), j)) for j in self._user_jobs(False)]

    def history(
        self,
        since: str | None = None,
        job_ids: Sequence[str] | None = None,
        *,
        into: type[H],
    ) -> list[H]:
        """The user's jobs the server still lists (PBS Pro: with history, when it keeps one).

        `since` is not applied: PBS keeps history for a server-set time only. On Slurm's
        wrapper the jobs are Slurm jobs: their history is sacct's.
        """
        if self.dialect == WRAPPER:
            return self._slurm.history(since, job_ids, into=into)
        if job_ids:
            jobs = self._qstat(job_ids)
        else:
            jobs = self._user_jobs(history=True)
        return [into.from_values(_values(into, _accounting_entry(j), j)) for j in jobs]

    def max_array_size(self) -> int | None:
        """PBS Pro's server attribute; Slurm's on its wrapper; Torque's is not read (None)."""
        dialect = self.dialect
        if dialect == WRAPPER:
            return self._slurm.max_array_size()
        if dialect != "pbspro":
            return None
        return self._read(list(array_limits.PBS_COMMAND), "qstat -Bf", array_limits.parse_pbs)

    def partitions(self) -> list[PartitionInfo]:
        """The server's queues from ``qstat -Q`` (PBS has no node counts per queue there)."""
        self.dialect  # noqa: B018 - probe first, so an unknown qstat gets its own message
        return self._read(pbs_queues.QSTAT_Q_COMMAND, "qstat -Q", pbs_queues.parse_qstat_q)

    def submit_advice(self, said: str) -> str:
        return pbs_script.qsub_advice(said) or super().submit_advice(said)

    def nodes(self) -> list[NodeInfo]:
        """Every host per execution queue it serves, with what is assigned of it now: ONE
        round trip (pbsnodes -F json, qstat -Q, qstat -Bf). PBS Pro only: Torque's
        pbsnodes has no JSON, and the wrapper's is Slurm's (`hpcui free` on the dev site)."""
        dialect = self.dialect
        if dialect == WRAPPER:
            return self._slurm.nodes()
        if dialect != "pbspro":
            return super().nodes()
        return self._read(pbs_nodes.FREE_COMMAND, "pbsnodes", pbs_nodes.parse_free)

    def _read(self, command: Command, tool: str, parse: Callable[[str], _T]) -> _T:
        """One round trip whose output one parser reads; what it cannot read is said."""
        self.calls += 1
        res = _checked(self.transport.run(command), tool)
        try:
            return parse(res.stdout)
        except ValueError as exc:
            raise SchedulerError(f"{tool} printed something hpcui cannot read: {exc}") from exc

    def ledger(self) -> LedgerAnswer | None:
        """Slurm's, under the Torque wrappers; PBS itself keeps no allocation ledger that a
        user can read (budgets there are a separate product): None."""
        return self._slurm.ledger() if self.dialect == WRAPPER else None

    def standing(self) -> tuple[list[FairShare], list[JobPriority], str]:
        if self.dialect == WRAPPER:
            return self._slurm.standing()
        raise UsageError(
            "Fair share and job priority are not available on a PBS cluster: PBS has no "
            "sshare/sprio for users (its fair-share tree is the scheduler's, read by "
            "administrators with pbsfs). `hpcui free` shows what could start now."
        )


def _checked(res: CommandResult, tool: str) -> CommandResult:
    """qstat lists what it knows even when some ids are unknown; only real failures raise."""
    if res.ok or pbs_script.only_benign_errors(res.stderr):
        return res
    detail = (res.stderr.strip() or res.stdout.strip())[-1000:] or "(no output)"
    raise SchedulerError(
        f"{tool} failed (exit status {res.exit_status}): {detail}. The PBS server may be busy "
        f"or down; hpcui retries with backoff. If it persists, run `{tool.split()[0]}` on the "
        "login node yourself, or ask the site's support."
    )


def _job_status(job: PbsJob) -> JobStatus:
    raw = job.state_raw
    if job.exit_status is not None:
        raw = f"{raw} (Exit_status {job.exit_status})"
    return JobStatus(job.state, raw, job.exit_code, job.comment or "")


def _int(value: str | None) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def _entry_fields(job: PbsJob) -> dict:
    hpcui_id = pbs_script.from_pbs_id(job.job_id) or job.job_id
    req = job.resources_requested
    return {
        "job_id": hpcui_id,
        "array_job_id": pbs_script.base_id(job.job_id) if job.array_index is not None else None,
        "array_task_id": job.array_index,
        "name": job.name or "",
        "user": job.owner or "",
        "state": job.state,
        "state_raw": job.state_raw,
        "reason": (job.comment or "") if job.state is JobState.PENDING else "",
        "partition": job.queue or "",
        "account": req.get("project", ""),
        "nodes": _int(req.get("nodect")) or len(job.nodes),
        "nodelist": ",".join(job.nodes),
        "gpus": _int(req.get("ngpus")),
        "elapsed_s": job.walltime_used_s,
        "time_limit_s": job.walltime_limit_s,
        "submit_time": job.ctime,
        "start_time": job.stime,
        "comment": job.comment or "",
    }


def _values(into: type, entry: QueueEntry | AccountingEntry, job: PbsJob) -> dict:
    """The row's fields, with hpcui's token where the row type has one (PBS carries it in
    Variable_List, not in a comment as Slurm does)."""
    values = dict(entry.__dict__)
    if "token" in getattr(into, "model_fields", {}):
        values["token"] = job.token
    return values


def _queue_entry(job: PbsJob) -> QueueEntry:
    return QueueEntry(**_entry_fields(job))


def _accounting_entry(job: PbsJob) -> AccountingEntry:
    return AccountingEntry(
        **_entry_fields(job),
        exit_code=job.exit_code,
        signal=job.signal,
        end_time=job.mtime if job.state.is_final else None,
        cpus=_int(job.resources_requested.get("ncpus")),
        # PBS keeps the job's high-water memory (all its processes on the mother superior's
        # view) in resources_used.mem: the closest it has to sacct's MaxRSS
        mem_bytes=pbs_size(job.resources_requested.get("mem")),
        max_rss_bytes=pbs_size(job.resources_used.get("mem")),
        cpu_time_s=duration_s(job.resources_used.get("cput")),
    )


def _read(text: str, dialect: str, *, as_dialect: PbsDialect | None = None) -> list[PbsJob]:
    """qstat's answer as jobs; one it cannot read is a SchedulerError, never "no jobs".
    `as_dialect`: text output (`dialect` "torque") read as that dialect's jobs."""
    try:
        if dialect == "torque":
            return pbs.parse_torque_qstat_f(text, dialect=as_dialect)
        return pbs.parse_qstat_json(text)
    except pbs.PbsParseError as exc:
        raise SchedulerError(str(exc)) from None


def _valid_id(job_id: str) -> None:
    try:
        pbs_script.checked_pbs_id(job_id)
    except ValueError as exc:
        raise UsageError(f"{exc}. Give a job id as `hpcui jobs` shows it.") from None


def _control_checked(res: CommandResult, tool: str, job_ids: Sequence[str]) -> None:
    """qhold/qrls/qrerun/qalter refusals (state, permissions) as what to do next."""
    if res.ok:
        return
    said = " ".join((res.stderr.strip() or res.stdout.strip()).split())[-500:] or "(no output)"
    if tool == "qrerun" and "Unauthorized Request" in said:
        # PBS lets only its operators and managers rerun jobs (qrerun(1B)); OpenPBS says so
        raise UsageError(
            f"PBS refused `qrerun` for job {', '.join(job_ids)}: {said}. On this site only "
            "PBS operators and managers may rerun a job: cancel it and submit it again "
            "(`hpcui resubmit JOB`), or ask the site's support to rerun it."
        )
    raise UsageError(
        f"PBS refused `{tool}` for job {', '.join(job_ids)}: {said}. Check the job's state "
        "with `hpcui show` (hold/release need a queued job, qrerun a running one; a "
        "walltime may only be lowered, or only by administrators, at some sites)."
    )
