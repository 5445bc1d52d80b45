"""One exception hierarchy: every message says what happened and what to do next."""

from __future__ import annotations


class HpcuiError(Exception):
    """Base of every error hpcui raises on purpose."""

    #: Exit code the CLI uses for this family of errors.
    exit_code = 1


class UsageError(HpcuiError):
    """The caller asked for something invalid (bad resource, unknown cluster)."""

    exit_code = 2


class ConfigError(UsageError):
    """The configuration file is missing, unreadable or inconsistent."""


class ClusterConnectionError(HpcuiError):
    """Reaching or authenticating to a login node failed."""

    exit_code = 3


class HostKeyError(ClusterConnectionError):
    """The server's host key is unknown or differs from known_hosts."""

    def __init__(self, message: str, *, host: str, fingerprint: str, key_type: str) -> None:
        super().__init__(message)
        self.host = host
        self.fingerprint = fingerprint
        self.key_type = key_type


class AuthenticationError(ClusterConnectionError):
    """The server refused every credential we offered."""


class PromptNeededError(AuthenticationError):
    """The login asks a question (a password or 2FA code) and nothing here can answer it
    (no terminal, no app): not a failure of the cluster, a call to run it interactively."""


class AnswersRejected(AuthenticationError):
    """The keyboard-interactive answers (a 2FA code, a password) were wrong: asking again
    may well succeed (the app offers it)."""


class ConnectionLost(ClusterConnectionError):
    """The connection dropped while a command was in flight; it may or may not have run."""


class CommandTimeout(HpcuiError):
    """A remote command did not finish within its timeout."""

    exit_code = 3


class RemoteCommandError(HpcuiError):
    """A remote command exited non-zero where success was required."""

    def __init__(self, message: str, *, exit_status: int, stdout: str, stderr: str) -> None:
        super().__init__(message)
        self.exit_status = exit_status
        self.stdout = stdout
        self.stderr = stderr


class RemoteWriteError(HpcuiError):
    """Writing a file on the cluster failed part way (a full disk or quota, mostly): the
    partial file is removed, the message says where and how much."""

    exit_code = 3


class SubmitOutcomeUnknown(HpcuiError):
    """A submit was cut off (link lost, timeout) after the job folder was claimed: the job
    may or may not have reached the scheduler. Its registry record is kept and finished by
    its token later (hpcui.submission.recovery), never submitted twice."""

    exit_code = 3

    def __init__(self, message: str, *, token: str) -> None:
        super().__init__(message)
        self.token = token


class RegistryError(HpcuiError):
    """The local job registry (SQLite) could not be read or written (locked, broken)."""


class JobsRefused(UsageError):
    """The scheduler acted on the other jobs asked and refused these (`job_ids`)."""

    def __init__(self, message: str, *, job_ids: list[str]) -> None:
        super().__init__(message)
        self.job_ids = job_ids


class SchedulerError(HpcuiError):
    """The scheduler rejected a request (sbatch/qsub/scancel said no)."""

    exit_code = 4


class SubmitRejected(SchedulerError):
    """The submit command itself failed (sbatch said no, the unpack failed): nothing was
    submitted, so the job's record is dropped."""


class RemotePythonError(HpcuiError):
    """The cluster's Python cannot run what we pickle (missing or wrong version)."""

    exit_code = 4


class JobError(HpcuiError):
    """A job failed, was cancelled or ended without a result."""

    exit_code = 5

    def __init__(
        self,
        message: str,
        *,
        job_id: str = "",
        remote_traceback: str | None = None,
        stderr_tail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.remote_traceback = remote_traceback
        self.stderr_tail = stderr_tail


class JobFailedError(JobError):
    """The function raised on the cluster; carries the remote traceback."""


class JobCancelledError(JobError):
    """The job was cancelled (by the user or an administrator)."""


class JobLostError(JobError):
    """The job ended without writing a result (killed, node failure, out of memory)."""


class JobTimeLimitError(JobLostError):
    """The scheduler ended the job at its time limit (Slurm TIMEOUT, a PBS walltime) before
    it wrote a result: catch it to resubmit with more time or from a checkpoint. A
    JobLostError still, so older handlers keep catching it. (Not JobTimeoutError: that one
    says the caller's own wait ran out while the job may still run.)"""


class ResultIntegrityError(JobError):
    """A result file on the cluster is not the one the job wrote (or is unreadable):
    hpcui refuses to unpickle it."""


class ResultNeedsModuleError(JobError):
    """The job's result is whole and signed, but holds an object of a module this Python
    cannot import (torch on a laptop without it): said with what to install; the result
    stays on the cluster and in this machine's copy. Not a job failure (exit 1)."""

    exit_code = 1

    def __init__(self, message: str, *, job_id: str = "", module: str = "") -> None:
        super().__init__(message, job_id=job_id)
        self.module = module


class WaitTimeout(HpcuiError):
    """Waiting (for a job's end, a log's next line) took longer than the caller allowed:
    the job itself is fine and may still be running. One exit code for every such wait."""

    exit_code = 6


class JobTimeoutError(WaitTimeout, JobError):
    """Waiting for the job took longer than the caller allowed."""


class ResourceAdvice(UserWarning):
    """Not an error: said on submit when a request is far above what the same function
    used before (hpcui.clusters.sizing); `warnings.filterwarnings("ignore",
    category=hpcui.ResourceAdvice)` silences it."""
