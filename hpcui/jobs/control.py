"""Job verbs over any jobs of the user: one scheduler call per verb and cluster.

`JobControl` is a cluster's part for ids (hpcui's jobs or not, as scancel/qdel take them);
`fan_out` spreads one verb over jobs of several clusters for the CLI and the app alike:
grouped by cluster in the order given, one call each, a cluster that cannot be reached or
refuses failing only its own jobs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Literal, NamedTuple

from hpcui.backends.records import JobDetails
from hpcui.errors import HpcuiError, JobsRefused, UsageError
from hpcui.jobs import other as other_job
from hpcui.jobs.forwarding import Forward, node_of
from hpcui.request.allocation import Allocation
from hpcui.request.plan import batch_spec
from hpcui.schedulers.base import Scheduler
from hpcui.transport.base import TerminalChannel, Transport

Verb = Literal["cancel", "hold", "release", "requeue"]
#: what each verb did, as its outcome says it
DONE: dict[str, str] = {
    "cancel": "cancelled",
    "hold": "held",
    "release": "released",
    "requeue": "requeued",
}


class JobControl:
    """Cancel, hold, release, requeue, a new time limit, a shell, a resubmit: for any job
    id the scheduler knows. `changed(ids)` after each verb (fast polling, a queue refresh)."""

    def __init__(
        self,
        *,
        name: str,
        remote_base: str,
        transport: Transport,
        scheduler: Scheduler,
        changed: Callable[[list[str]], None],
        known_over: Callable[[str], bool] | None = None,
        cancel_sent: Callable[[list[str]], None] | None = None,
        whole_chains: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        #: a chain's segment stands for its chain: the ids of every segment not ended
        self.whole_chains = whole_chains
        self.name = name
        #: told which jobs a cancel was accepted for (the registry notes when: PBS keeps
        #: such a job R for its kill_delay, and `show` says it is ending)
        self.cancel_sent = cancel_sent
        #: a job's end as this process already knows it (pushed, or polled): no round trip
        self.known_over = known_over
        self.remote_base = remote_base
        self.transport = transport
        self.scheduler = scheduler
        self.changed = changed
        self._user_name: str | None = None

    def details(self, job_id: str) -> JobDetails:
        """What the scheduler knows of any job of the user (hpcui's or not): log paths,
        working directory, script, nodes. UsageError when it does not know the id."""
        return self.scheduler.job_details(str(job_id))

    def batch_script(self, job_id: str) -> str:
        """The batch script a job was submitted with (Slurm keeps it while it knows the job)."""
        return self.scheduler.batch_script(str(job_id))

    def cancel(self, job_ids: Sequence[str]) -> None:
        """Cancel jobs (one scheduler call); their end reaches the registry and the queue.
        A chain's segment cancels the chain: every segment of it still waiting or running."""
        if job_ids and self.whole_chains is not None:
            job_ids = self.whole_chains(list(job_ids))
        if job_ids:
            self._do(self.scheduler.cancel, job_ids)
            if self.cancel_sent is not None:
                self.cancel_sent(list(job_ids))

    def hold(self, job_ids: Sequence[str]) -> None:
        """Keep pending jobs from starting until `release`."""
        self._do(self.scheduler.hold, job_ids)

    def release(self, job_ids: Sequence[str]) -> None:
        self._do(self.scheduler.release, job_ids)

    def requeue(self, job_ids: Sequence[str]) -> None:
        """Back to pending: a running job is killed and starts again later (same id)."""
        self._do(self.scheduler.requeue, job_ids)

    def set_time_limit(self, job_id: str, time: str | int) -> None:
        """A new time limit (`"2:00:00"`, `"90m"`, seconds); Slurm lets users only lower
        it unless the site allows more, and says so."""
        seconds = other_job.time_limit_seconds(time)
        self._do(lambda ids: self.scheduler.set_time_limit(ids[0], seconds), [job_id])

    def open_shell(
        self,
        job_id: str,
        *,
        node: str | None = None,
        term: str = "xterm-256color",
        cols: int = 80,
        rows: int = 24,
    ) -> TerminalChannel:
        """An interactive shell inside a running job (srun --overlap --pty): the channel
        the caller bridges to its terminal. UsageError while the job does not run."""
        return other_job.open_shell(
            self.transport, self.scheduler, self.details(job_id), node=node, term=term,
            cols=cols, rows=rows,
        )  # fmt: skip

    def open_allocation(
        self,
        alloc: Allocation,
        *,
        term: str = "xterm-256color",
        cols: int = 80,
        rows: int = 24,
    ) -> TerminalChannel:
        """A new interactive allocation (salloc) with a login shell on its first node; it
        ends when the shell exits (`hpcui shell --new`)."""
        if alloc.container:
            raise UsageError(
                "`hpcui shell --new` starts a shell on the node, not in an image: drop "
                "--container (inside the shell, run your runtime's own `exec`/`start`)."
            )
        spec = batch_spec(alloc, folder="/dev/null", token="shell")
        script = self.scheduler.allocation_shell_script(spec)
        return self.transport.open_terminal(script, term=term, cols=cols, rows=rows)

    def forward(
        self, job_id: str, port: int, *, local_port: int | None = None, taking_over: bool = False
    ) -> Forward:
        """Connections to 127.0.0.1:`local_port` (a free one when None) reach `port` on the
        job's node, until the job ends or the Forward is closed (a context manager).
        UsageError for a job that does not run, or that is not the user's."""
        if not 0 < int(port) < 65536:
            raise UsageError(f"Not a port: {port} (1-65535).")
        details = self.details(job_id)
        node = node_of(details, self._user())

        def ended() -> bool:
            try:
                return self.details(job_id).state.is_final
            except UsageError:  # the scheduler forgot it: long over
                return True

        known = self.known_over
        return Forward(
            cluster=self.name, job_id=details.job_id, node=node, remote_port=int(port),
            open_tunnel=self.transport.open_tunnel, local_port=local_port, ended=ended,
            known_over=(lambda: known(details.job_id)) if known else None,
            origin={"kind": "job", "cluster": self.name, "job_id": details.job_id,
                    "port": int(port)},
            taking_over=taking_over,
        )  # fmt: skip

    def node(self, job_id: str) -> str:
        """The first node of the user's running job (what `hpcui proxy` and `hpcui code`
        reach); UsageError for a job that does not run or is another user's."""
        return node_of(self.details(job_id), self._user())

    def _user(self) -> str:
        """The user on the cluster (`id -un`, asked once)."""
        if self._user_name is None:
            self._user_name = self.transport.run(["id", "-un"]).check("id -un").stdout.strip()
        return self._user_name

    def resubmit(self, script: str, *, work_dir: str, name: str = "job") -> str:
        """Submit an (edited) batch script from `work_dir`; returns the new job id."""
        job_id = other_job.resubmit(
            self.name, self.remote_base, self.transport, self.scheduler, script,
            work_dir=work_dir, name=name,
        )  # fmt: skip
        self.changed([job_id])
        return job_id

    def _do(self, verb: Callable[[list[str]], None], job_ids: Sequence[str]) -> None:
        ids = [str(j) for j in job_ids]
        if not ids:
            raise UsageError("No job given: name at least one job id.")
        try:
            verb(ids)
        except JobsRefused as exc:  # the others were done: they change too
            self.changed([j for j in ids if j not in exc.job_ids])
            raise
        self.changed(ids)


class Outcome(NamedTuple):
    """One cluster's part of a fanned-out verb: its jobs, and the error if it failed."""

    cluster: str  # the name asked for ("" for the default cluster it could not reach)
    job_ids: list[str]
    error: HpcuiError | None


def fan_out(
    verb: Verb,
    jobs: Sequence[tuple[str | None, str]],
    reach: Callable[[str | None], JobControl],
) -> Iterator[Outcome]:
    """`verb` over (cluster name or None for the default, job id) pairs: one scheduler call
    per cluster, in the order the clusters first appear; `reach(name)` gives that cluster's
    JobControl (`cluster.control`) or raises the HpcuiError that says why not."""
    by_cluster: dict[str | None, list[str]] = {}
    for name, job_id in jobs:
        by_cluster.setdefault(name, []).append(job_id)
    for name, ids in by_cluster.items():
        try:
            control = reach(name)
            getattr(control, verb)(ids)
        except JobsRefused as exc:  # some done, some refused: each said as it went
            done = [j for j in ids if j not in exc.job_ids]
            if done:
                yield Outcome(control.name, done, None)
            yield Outcome(control.name, exc.job_ids, exc)
            continue
        except HpcuiError as exc:
            yield Outcome(name or "", ids, exc)
            continue
        yield Outcome(control.name, ids, None)
