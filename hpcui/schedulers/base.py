"""What the core needs from a scheduler, whatever its dialect."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from hpcui.backends import chain
from hpcui.backends.batch import BatchSpec
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
from hpcui.backends.slurm.ledger import LedgerAnswer
from hpcui.backends.states import JobState
from hpcui.backends.usage import UsageReading
from hpcui.errors import UsageError
from hpcui.transport.base import Command, Transport

Q = TypeVar("Q", bound=QueueEntry)
H = TypeVar("H", bound=AccountingEntry)


@dataclass(frozen=True)
class JobStatus:
    state: JobState
    state_raw: str = ""
    exit_code: int | None = None
    reason: str = ""


@dataclass(frozen=True)
class Capabilities:
    """What a scheduler can do. Faces read these flags to decide what to offer; they never
    call a method to find out by catching its error."""

    #: lists the user's jobs now (squeue, qstat): the live table, `hpcui jobs --all`
    queue: bool = True
    #: remembers ended jobs with exit codes and usage (sacct, qstat -x): the history view
    history: bool = True
    #: partitions or queues to show and pick from
    partitions: bool = True
    #: `map()` as ONE job array
    arrays: bool = True
    #: any job's details/script and hold, release, requeue, time limit (scontrol, qalter)
    control: bool = True
    #: a ledger of the user's allocation (Slurm's association limits): the budget check
    budget: bool = True


class Scheduler(abc.ABC):
    """One scheduler dialect on one transport. Every method is one round trip at most."""

    name: str = ""

    @property
    def accounting_off(self) -> bool:
        """True while history comes from the queue, not accounting (Slurm without slurmdbd
        for a while): a job missing from it is not asked for again by id."""
        return False

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities()

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.calls = 0  # scheduler queries made (status benchmarks read it)

    @abc.abstractmethod
    def render_script(self, spec: BatchSpec) -> str: ...

    @abc.abstractmethod
    def submit_command(self, script_path: str) -> Command: ...

    @abc.abstractmethod
    def parse_submit(self, stdout: str) -> str:
        """Job id (array: the base id) from the submit command's stdout."""

    def chain_submit_command(
        self, script_path: str, segments: int, after_ok: Sequence[str] = ()
    ) -> Command:
        """ONE command that submits the script `segments` times, each after the one before
        (backends/chain.py): prints every id, one per line, or queues none."""
        raise UsageError(
            f"chain= needs a batch scheduler (Slurm or PBS); {self.transport.description} has "
            "none. Run the call with a longer time limit instead."
        )

    def parse_chain_submit(self, stdout: str) -> list[str]:
        """The ids a chain's submit printed, in order (`parse_submit` of each line)."""
        return [self.parse_submit(line) for line in chain.parse_ids(stdout)]

    @abc.abstractmethod
    def find_token(self, token: str) -> str | None:
        """After a dropped connection: the id of the job carrying `token`, if it exists."""

    @abc.abstractmethod
    def status(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        """States of many jobs with ONE scheduler call. Unknown ids are left out."""

    @abc.abstractmethod
    def cancel(self, job_ids: Sequence[str]) -> None: ...

    def max_array_size(self) -> int | None:
        """Tasks one job array may have, as the scheduler's configuration says (one round
        trip); None: no limit this scheduler knows of."""
        return None

    # -- when a request would start ---------------------------------------------------------

    def estimate_start(self, scripts: Mapping[str, str]) -> list[StartEstimate]:
        """The scheduler's own start estimate for each script (keyed by the partition it
        asks), ONE round trip; a scheduler that gives none says so (never a guess)."""
        return [
            StartEstimate(
                partition=p,
                said=f"{self.name or 'this scheduler'} gives no start estimate for a job "
                "not yet submitted",
            )
            for p in scripts
        ]

    # -- what a running job uses (hpcui.jobs.usage): one command per job per sample ----------------

    def usage_command(self, job_id: str) -> Command:
        raise UsageError(
            f"GPU/CPU usage of running jobs is not available for {self.name} "
            "(Slurm, PBS and the local cluster have it)."
        )

    def parse_usage(self, text: str, job_id: str) -> UsageReading:
        raise NotImplementedError

    # -- site state: what the user sees of the scheduler (queue, history, partitions) -------
    # QueueEntry/AccountingEntry/PartitionInfo are hpcui's scheduler-neutral records
    # (hpcui.backends.records); every dialect fills them. Without the capability, a call
    # raises UsageError that says what to use instead.

    @abc.abstractmethod
    def queue(self, into: type[Q]) -> list[Q]:
        """All of the user's jobs the scheduler lists now (not only hpcui's): ONE call.
        `into`: the row type the caller shows (`QueueEntry.from_values` builds it)."""

    def everyones_queue(self, into: type[Q]) -> list[Q]:
        """Every user's jobs, as `squeue` without `--me` shows them: ONE call."""
        raise UsageError(
            f"Listing every user's jobs is not available for {self.name} yet (Slurm has it)."
        )

    @abc.abstractmethod
    def history(
        self,
        since: str | None = None,
        job_ids: Sequence[str] | None = None,
        *,
        into: type[H],
    ) -> list[H]:
        """Finished and running jobs with exit codes and usage, from `since` on: ONE call.

        `since` is in the scheduler's own time syntax (Slurm: `2024-01-01T00:00:00`,
        `now-3600`); None: the scheduler's default window.
        """

    @abc.abstractmethod
    def partitions(self) -> list[PartitionInfo]:
        """Partitions (queues) with node and GPU counts: ONE call."""

    # -- any job of the user, and control over it (Capabilities.control) ---------------------

    def _no_control(self, what: str) -> UsageError:
        return UsageError(
            f"{what} is not available on a {self.name} cluster (Slurm and PBS have it)."
        )

    def job_details(self, job_id: str) -> JobDetails:
        """What the scheduler knows of any job of the user (not only hpcui's): ONE call.
        Raises UsageError when it does not know the id."""
        raise self._no_control("Details of other jobs")

    def batch_script(self, job_id: str) -> str:
        raise self._no_control("A job's batch script")

    def allocation_shell_script(self, spec: BatchSpec) -> str:
        """Shell code for a new interactive allocation with a shell on its first node."""
        raise UsageError(
            f"`hpcui shell --new` is built for Slurm so far ({self.name} here). On PBS, "
            "`qsub -I -l select=...` on the login node gives an interactive job."
        )

    def hold(self, job_ids: Sequence[str]) -> None:
        raise self._no_control("Holding jobs")

    def release(self, job_ids: Sequence[str]) -> None:
        raise self._no_control("Releasing jobs")

    def requeue(self, job_ids: Sequence[str]) -> None:
        raise self._no_control("Requeueing jobs")

    def set_time_limit(self, job_id: str, seconds: int) -> None:
        raise self._no_control("Changing a time limit")

    def submit_advice(self, said: str) -> str:
        """What to change after the scheduler refused a submit with `said`."""
        return "Fix the request (partition, qos, account, time) and submit again."

    # -- what is free now, and where the user stands ------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        """Every node per partition with what is in use of it: ONE call."""
        raise UsageError(
            f"Free nodes and GPUs per node are not available on a {self.name} cluster; "
            "`hpcui partitions` shows the queues."
        )

    def standing(self) -> tuple[list[FairShare], list[JobPriority], str]:
        """The user's fair share and pending jobs' priority factors (ONE call), and a note
        where the site runs no fair-share priority ("" otherwise)."""
        raise UsageError(f"Fair share and job priority are not available on a {self.name} cluster.")

    def ledger(self) -> LedgerAnswer | None:
        """The user's associations with their TRES-minute limits, used and running, the
        user's queued jobs and default account (ONE call); None where the scheduler keeps
        no such ledger (the budget then rests on the site's allocation tool alone)."""
        return None

    def shell_script(self, job_id: str, node: str | None = None) -> str:
        """Shell code that opens an interactive shell inside a running job's allocation."""
        raise UsageError(
            f"A shell inside a job is not available on a {self.name} cluster (Slurm has it: "
            "srun --overlap); log in to the job's node with ssh if the site allows it."
        )
