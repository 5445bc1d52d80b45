"""What the faces (the app, the CLI, the agent) need of a cluster beyond the user's API:
tracking and refreshing states, the form kept in a job's record, finishing cut-off
submits, this process's own connection, the prompt and the stall watch, what a call imports
(the Submit form's line). It lives behind
`Cluster.faces`, so that a Cluster's own names are the user's API (submit, map, job, logs,
view, site, control, files, usage, clean) and this plumbing is one documented object."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hpcui.backends.states import JobState
from hpcui.errors import RemotePythonError
from hpcui.request.resources import Resources
from hpcui.store.registry import Registry
from hpcui.submission import recovery as submit_recovery
from hpcui.submission.needs import Need, check_needs
from hpcui.submission.pickling import pickle_calls
from hpcui.transport.base import Transport

if TYPE_CHECKING:
    from hpcui.jobs.job import Job
    from hpcui.jobs.status import StatusService
    from hpcui.submission.submitter import Submitter


class FaceSupport:
    """`cluster.faces`: one cluster's plumbing for the faces (made once per Cluster, from
    getters of its parts: nothing is made before it is used)."""

    def __init__(
        self,
        name: str,
        *,
        status: Callable[[], StatusService],
        registry: Callable[[], Registry],
        transport: Callable[[], Transport],
        own_transport: Callable[[], Transport],
        submitter: Callable[[], Submitter],
    ) -> None:
        self.name = name
        self._status, self._registry = status, registry
        self._transport, self._own_transport, self._submitter = transport, own_transport, submitter

    def refresh_states(self) -> None:
        """Ask the scheduler once for every tracked job's state (the registry's may be
        stale; nothing is asked for a job it already knows is over)."""
        self._status().poll_once()

    def track(self, job_ids: list[str], state: JobState = JobState.PENDING) -> None:
        """Follow these jobs' states (`state`: what is known of them already)."""
        self._status().track(job_ids, state)

    def remember(self, job: Job, key: str, value: Any) -> None:
        """Keep `value` (JSON) in the job's registry record, e.g. the form that made it."""
        self._registry().set_meta(self.name, job.job_id, key, value)

    def reconcile_submissions(self, *, force: bool = False) -> submit_recovery.Recovered:
        """Finish submissions cut off earlier (a killed client, a lost link, a timeout)."""
        return self._submitter().reconcile(force=force)

    def own_transport(self) -> Transport:
        """This process's own connection to the cluster, never the agent's (the agent
        serves its callers with it)."""
        return self._own_transport()

    @property
    def prompt(self) -> Callable[..., list[str]] | None:
        """Who answers this cluster's keyboard-interactive questions (2FA)."""
        return self._transport().prompt

    def watch_stall(self, listener: Callable[[float | None], None]) -> None:
        """`listener(seconds)` when the connection goes silent, `listener(None)` when it
        answers again (from a background thread)."""
        self._transport().watch_stall(listener)

    def imports_line(
        self, fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any],
        **resource_kwargs: Any,
    ) -> str:  # fmt: skip
        """The Submit form's line before a submit: what the call imports from installed
        packages and whether the cluster's Python has them (hpcui.submission.needs), or
        that env= builds them. One round trip at most (none once the names were asked)."""
        sub = self._submitter()
        needs: list[Need] = []
        pickle_calls(fn, [(tuple(args), dict(kwargs))], needs=needs)
        if not needs:
            return "imports: no installed package (the standard library and your own code)"
        names = ", ".join(f"{n.dist} {n.version}" for n in needs)
        req = Resources.from_kwargs(**resource_kwargs).merged(sub.config.defaults)
        if req.env:
            return f"imports: {names}: from the environment env= makes on {self.name} (once)"
        python = req.python or sub.python
        try:
            info = sub.remote_info(python=python, needs=needs)
            check_needs(sub.transport, info, needs, python, sub.setup, cluster=self.name,
                        modules=req.modules)  # fmt: skip
        except RemotePythonError as exc:
            return f"imports: {str(exc).split('. Nothing was submitted')[0]}: submit with env=auto"
        return f"imports: {names}: importable by {self.name}'s Python ({python})"
