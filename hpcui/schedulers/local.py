"""Local processes as a scheduler (the embedded `local` cluster without Slurm)."""

from __future__ import annotations

import getpass
import time
from collections.abc import Callable, Sequence

from hpcui.backends import local_script, usage
from hpcui.backends.batch import BatchSpec
from hpcui.backends.records import JobDetails, PartitionInfo
from hpcui.backends.states import JobState
from hpcui.errors import SchedulerError, UsageError
from hpcui.profiles.local_machine import LocalMachine
from hpcui.schedulers.base import Capabilities, H, JobStatus, Q, Scheduler
from hpcui.transport.base import Command, Transport


class LocalScheduler(Scheduler):
    name = "local"

    def __init__(
        self,
        transport: Transport,
        state_dir: Callable[[], str],
        machine: Callable[[], LocalMachine] | None = None,
    ) -> None:
        """`machine`: this machine's GPUs to hand out (None: a remote host, GPUs unmanaged)."""
        super().__init__(transport)
        self._state_dir = state_dir
        self._machine = machine

    def render_script(self, spec: BatchSpec) -> str:
        m = self._machine() if self._machine else None
        return local_script.render_script(
            spec,
            self._state_dir(),
            m.visibility_var if m else None,
            m.gpu_ids if m else (),
            ticket=time.time_ns(),
        )

    def submit_command(self, script_path: str) -> Command:
        return local_script.submit_command(script_path, self._state_dir())

    def parse_submit(self, stdout: str) -> str:
        pid = stdout.strip().splitlines()[-1] if stdout.strip() else ""
        if not pid.isdigit():
            raise SchedulerError(f"local launcher printed no pid: {stdout!r}")
        return pid

    def find_token(self, token: str) -> str | None:
        return None  # the local launcher cannot be half-submitted: the job_id file decides

    def job_details(self, job_id: str) -> JobDetails:
        """This machine's own job as far as a forward needs it: its state, this user, and
        the node it runs on (this machine: 127.0.0.1)."""
        status = self.status([job_id]).get(job_id)
        if status is None:
            raise UsageError(f"No job {job_id} of the local cluster: `hpcui jobs` lists them.")
        return JobDetails(
            job_id=job_id, user=getpass.getuser(), state=status.state,
            state_raw=status.state_raw, nodelist="127.0.0.1",
        )  # fmt: skip

    def status(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        if not job_ids:
            return {}
        self.calls += 1
        res = self.transport.run(local_script.status_command(job_ids, self._state_dir()))
        return {
            j: JobStatus(s, "PENDING", None, raw)
            if s is JobState.PENDING
            else JobStatus(s, raw, rc)
            for j, (s, raw, rc) in local_script.parse_status(res.stdout).items()
        }

    def usage_command(self, job_id: str) -> Command:
        return usage.local_usage_command(job_id, self._state_dir())

    def parse_usage(self, text: str, job_id: str) -> usage.UsageReading:
        try:
            return usage.parse_local_usage(text, job_id)
        except ValueError as exc:
            raise SchedulerError(f"Usage of job {job_id}: {exc}") from None

    def cancel(self, job_ids: Sequence[str]) -> None:
        self.transport.run(local_script.cancel_command(job_ids, self._state_dir()))

    # -- site state: plain processes have no queue, accounting or partitions -----------------

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            queue=False,
            history=False,
            partitions=False,
            arrays=True,
            control=False,
            budget=False,
        )

    def queue(self, into: type[Q]) -> list[Q]:
        raise UsageError(
            "The `local` scheduler runs jobs as plain processes and keeps no queue. "
            "`hpcui jobs` lists them from the registry; a cluster with Slurm has a queue."
        )

    def history(
        self,
        since: str | None = None,
        job_ids: Sequence[str] | None = None,
        *,
        into: type[H],
    ) -> list[H]:
        raise UsageError(
            "The `local` scheduler keeps no accounting. `hpcui jobs` lists past jobs from the "
            "registry; a cluster with Slurm has a history."
        )

    def partitions(self) -> list[PartitionInfo]:
        return []  # one machine, no partitions
