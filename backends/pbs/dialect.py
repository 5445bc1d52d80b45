"""Which PBS a login node runs, and what its state letters and exit statuses mean.

Three things answer to ``qsub``/``qstat``: PBS Pro / OpenPBS, Torque, and Slurm's
Torque wrappers (Perl scripts from Debian's slurm-wlm-torque). They share letters but
not meanings: Torque's negative exit codes differ from PBS Pro's, and the wrapper's
``U`` is "unknown", not PBS Pro's "suspended for workstation activity".
"""

from __future__ import annotations

import re
import signal
from typing import Literal

from hpcui.backends.states import JobState

PbsDialect = Literal["pbspro", "torque", "slurm-torque-wrapper"]

# --- dialect detection ---------------------------------------------------------------
# Evidence (sources and captures: tests/fixtures/pbs-constructed/SOURCES.md):
# - PBS Pro / OpenPBS: `qstat --version` and `qsub --version` print
#   `pbs_version = 18.2.3.20181206140456` (`= PBSPro_11.1.0.111761` on 11.x); `qsub
#   --help` is an invalid option whose usage lists `[-J X-Y[:Z]]` and `qsub --version`.
# - Torque: `qstat --version` prints `Version: 6.1.2` (6.x; `version: 2.4.16` on 2.x).
# - Slurm's wrappers (read in /usr/bin/qstat, /usr/bin/qsub of slurm-wlm-torque
#   22.05.8, and run here): no --version, so Getopt::Long prints `Unknown option:
#   version` and pod2usage's `Usage:` with `[--man]` (qstat) or `[-P wckey]`/`[-pe shm
#   task_cnt]` (qsub) on stderr, exit 2; `--help` prints the same usage on stdout.
#   Without a usable slurm.conf, libslurm dies first with `perl: error: ...`.
_WRAPPER = re.compile(
    r"Unknown option: version|\[--man\]|-P wckey|\[-pe shm|^perl: (?:error|fatal):", re.M
)
_PBSPRO = re.compile(r"^\s*pbs_version\s*=|\[-J X-Y\[:Z\]\]", re.M)
_TORQUE = re.compile(r"^\s*version:\s*\d", re.M | re.I)


def detect_pbs_dialect(
    qstat_version_text: str | None, qsub_help_text: str | None = None
) -> PbsDialect:
    """Tell the three apart from ``qstat --version`` and ``qsub --help`` (stdout + stderr).

    Both commands are harmless on a login node: neither submits nor contacts the server.
    Raises ValueError when neither text carries a known signature, because guessing
    wrong means wrong ids and wrong exit codes; the user then names the dialect.
    """
    text = "\n".join(t for t in (qstat_version_text, qsub_help_text) if t)
    if _WRAPPER.search(text):
        return "slurm-torque-wrapper"
    if _PBSPRO.search(text):
        return "pbspro"
    if _TORQUE.search(text):
        return "torque"
    raise ValueError(
        "cannot tell PBS Pro, Torque and Slurm's Torque wrapper apart from "
        f"{text.strip()[:200]!r}; set the profile's PBS dialect explicitly"
    )


# --- state letters ---------------------------------------------------------------------
_LETTERS: dict[str, JobState] = {
    "B": JobState.RUNNING,  # PBS Pro array parent: at least one subjob has begun
    "E": JobState.COMPLETING,  # exiting after having run (stage-out, epilogue)
    "H": JobState.PENDING,  # held (user, operator, system or dependency): waits on a release
    "M": JobState.UNKNOWN,  # PBS Pro history: moved to another server; ask that one
    "Q": JobState.PENDING,  # queued, eligible to run or be routed
    "R": JobState.RUNNING,
    "S": JobState.SUSPENDED,  # suspended by an admin, preemption or the scheduler
    "T": JobState.PENDING,  # in transit to a new location (routing between queues/servers)
    "U": JobState.SUSPENDED,  # PBS Pro: cycle-harvesting job suspended, workstation busy
    "W": JobState.PENDING,  # waiting for its -a start time, or after a stage-in failure
}
_FINISHED = frozenset("FXC")  # F finished (PBS Pro), X finished subjob, C completed (Torque)


def pbs_state(
    letter: str, exit_status: int | None = None, *, dialect: PbsDialect = "pbspro"
) -> JobState:
    """Map a ``job_state`` letter to JobState; finished letters need the exit status.

    F, X and C say only that the job is over: ``decode_exit_status`` decides success,
    failure, timeout or kill. A finished job without an exit status never ran: on PBS Pro
    and Torque that is a qdel while queued (CANCELLED). Slurm's wrapper prints ``C`` for
    every end and no exit status at all, so there the outcome is UNKNOWN (ask sacct).
    """
    letter = letter.strip().upper()
    if letter in _FINISHED:
        if exit_status is not None:
            return decode_exit_status(exit_status, dialect=dialect)[0]
        return JobState.UNKNOWN if dialect == "slurm-torque-wrapper" else JobState.CANCELLED
    if letter == "U" and dialect == "slurm-torque-wrapper":
        return JobState.UNKNOWN  # the wrapper's stateCode() falls back to U
    return _LETTERS.get(letter, JobState.UNKNOWN)


# --- exit statuses -------------------------------------------------------------------
# Negative = PBS could not run or finish the job (JOB_EXEC_* in the server's job.h);
# only codes that mean more than "failed" are listed, everything else is FAILED.
_PBSPRO_NEGATIVE: dict[int, JobState] = {
    # -1/-2 FAIL1/FAIL2 exec failed before/after files; -3 RETRY (normally requeued,
    # final only when the server gives up); -7 BADRESRT; -10 FAILUID bad uid/gid;
    # -13 bad password; -15..-19 requeue/hook rejections; -21 security; -22 hook
    # error; -23 no krb5 credentials; -24/-25 KILL_NCPUS_BURST/SUM: all FAILED.
    -4: JobState.NODE_FAIL,  # INITABT: job aborted when its MOM restarted
    -5: JobState.NODE_FAIL,  # INITRST: same, checkpointed, no migrate
    -6: JobState.NODE_FAIL,  # INITRMG: same, checkpointed, may migrate
    -12: JobState.PREEMPTED,  # CHKP: checkpointed and killed (preemption)
    -14: JobState.NODE_FAIL,  # RERUN_SIS_FAIL: a sister MOM failed
    -20: JobState.NODE_FAIL,  # RERUN_MS_FAIL: mother superior connection failed
    -26: JobState.OUT_OF_MEMORY,  # KILL_VMEM
    -27: JobState.OUT_OF_MEMORY,  # KILL_MEM
    -28: JobState.TIMEOUT,  # KILL_CPUT: cput limit reached
    -29: JobState.TIMEOUT,  # KILL_WALLTIME
    -30: JobState.NODE_FAIL,  # JOINJOB: sister MOMs could not join the job
    -31: JobState.OUT_OF_MEMORY,  # KILL_HPMEM
    -32: JobState.NODE_FAIL,  # RERUN_ZOMBIE_JOB: MOM re-imaged or lost the job
}
_TORQUE_NEGATIVE: dict[int, JobState] = {
    # Torque 6.1 table (-1..-3, -7..-9, -13 cgroups, -14 prologue are FAILED).
    -4: JobState.NODE_FAIL,  # aborted on MOM initialization
    -5: JobState.NODE_FAIL,
    -6: JobState.NODE_FAIL,
    -10: JobState.OUT_OF_MEMORY,  # memory limit (before 6.1: any resource over limit)
    -11: JobState.TIMEOUT,  # walltime limit
    -12: JobState.TIMEOUT,  # CPU time limit
}
# Signals someone sends to stop a job: qdel delivers SIGTERM, then SIGKILL after the
# kill delay. Others (SIGSEGV, SIGABRT, SIGBUS, ...) mean the program crashed.
_STOP_SIGNALS = frozenset({signal.SIGHUP, signal.SIGINT, signal.SIGKILL, signal.SIGTERM})


def decode_exit_status(
    code: int, *, dialect: PbsDialect = "pbspro"
) -> tuple[JobState, int | None, int | None]:
    """``Exit_status`` -> (state, exit code of the job script, signal that ended it).

    - 0: COMPLETED.
    - < 0: PBS could not run or finish it (JOB_EXEC_*): no exit code; -29 walltime ->
      TIMEOUT, -27 mem -> OUT_OF_MEMORY, MOM/sister failures -> NODE_FAIL, else FAILED
      (Torque numbers these differently: -10 mem, -11 walltime, -12 cput).
    - 1..256: the script's own exit status: FAILED. 129..255 is the shell reporting a
      child killed by signal N = code - 128 (137: SIGKILL, often the OOM killer).
    - > 256: the job's top process itself died of signal N = code - 256 (PBS Pro and
      Torque): 271 (SIGTERM) is qdel of a running job, 265 (SIGKILL) the same after the
      kill delay or another outside kill; both CANCELLED (the caller refines to TIMEOUT
      when the walltime was used up).
    """
    if code == 0:
        return JobState.COMPLETED, 0, None
    if code < 0:
        table = _TORQUE_NEGATIVE if dialect == "torque" else _PBSPRO_NEGATIVE
        return table.get(code, JobState.FAILED), None, None
    if code > 256:
        sig = code - 256
        state = JobState.CANCELLED if sig in _STOP_SIGNALS else JobState.FAILED
        return state, None, sig
    return JobState.FAILED, code, code - 128 if 128 < code < 256 else None
