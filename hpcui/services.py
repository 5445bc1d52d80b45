"""Web services in a job (JupyterLab), reached through a forward: submit, find the server
by its own runtime file, and build the address this machine opens."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from hpcui.backends.states import JobState
from hpcui.compute.services import jupyter_lab
from hpcui.errors import JobError, UsageError
from hpcui.job import Job
from hpcui.transport.quoting import quote_bytes

#: the name of the jobs `hpcui jupyter` submits (what `--stop` looks for)
JUPYTER_JOB = "jupyter"
#: how often the client looks for the server's runtime file while the job starts
LOOK_S = 1.0


class Server(NamedTuple):
    """A running server as its runtime file says: port on the node, base URL, token."""

    port: int
    base_url: str
    token: str

    def local_url(self, local_port: int, path: str = "lab") -> str:
        """The address to open here (the token in it: never logged, printed to the user)."""
        query = f"?token={self.token}" if self.token else ""
        return f"http://127.0.0.1:{local_port}{self.base_url}{path}{query}"


def check_installed(cluster: Any, module: str = "jupyterlab") -> None:
    """UsageError with the fix when the cluster's Python (after its setup) lacks it."""
    setup = "; ".join(cluster.setup)
    python = quote_bytes(cluster.python).decode()
    probe = f"{setup + '; ' if setup else ''}{python} -c 'import {module}'"
    res = cluster.run(f"( {probe} ) >/dev/null 2>&1 && echo yes || echo no")
    if res.stdout.strip() != "yes":
        raise UsageError(
            f"JupyterLab is not installed in {cluster.name}'s Python ({cluster.python}"
            f"{' after its setup lines' if setup else ''}): run `pip install jupyterlab` in "
            "that environment, or load the site's module in the cluster's `setup` "
            '(e.g. `setup = ["module load jupyterlab"]`), then try again.'
        )


def submit_jupyter(cluster: Any, root_dir: str | None, **resources: Any) -> Job:
    resources.setdefault("name", JUPYTER_JOB)
    job: Job = cluster.submit(jupyter_lab, root_dir, **resources)
    return job


def runtime_dir(job: Job) -> str:
    return f"{job.folder.rstrip('/')}/{job.job_id}.jupyter"


def read_server(job: Job) -> Server | None:
    """The server's runtime file (jpserver-PID.json) once it wrote it, else None."""
    where = runtime_dir(job)
    listing = job.cluster.transport.run(
        f"ls -1 {quote_bytes(where).decode()} 2>/dev/null | grep '^jpserver-.*\\.json$'"
    )
    names = [n for n in listing.stdout.split() if n]
    if not names:
        return None
    data = json.loads(job.cluster.transport.read_file(f"{where}/{names[-1]}"))
    return Server(int(data["port"]), str(data.get("base_url") or "/"), str(data.get("token", "")))


def wait_for_server(
    job: Job,
    *,
    timeout: float | None = None,
    said: Callable[[str], None] = lambda _: None,
) -> Server:
    """Until the job runs and its server wrote its runtime file; JobError when the job
    ended first (its stderr tail says why), UsageError after `timeout` seconds."""
    start = time.monotonic()
    last = ""
    while True:
        state = job.state
        if state.is_final:
            status = job.result(timeout=60)  # a failed job raises its own JobError here
            tail = job.stderr()[-2000:]
            raise JobError(
                f"The Jupyter job {job.job_id} on {job.cluster.name} ended ({state.value}, "
                f"jupyter's exit status {status}) before its server started. Last lines of "
                f"its stderr:\n{tail or '(empty)'}",
                job_id=job.job_id,
                stderr_tail=tail,
            )
        if state is JobState.RUNNING:
            server = read_server(job)
            if server is not None:
                return server
        now = f"job {job.job_id} is {state.value}" + (f" ({job.reason})" if job.reason else "")
        if now != last:
            said(f"waiting: {now}")
            last = now
        if timeout is not None and time.monotonic() - start > timeout:
            raise UsageError(
                f"The Jupyter job {job.job_id} did not serve within {timeout:.0f} s ({now}); "
                f"it keeps its place: `hpcui jupyter --stop` cancels it."
            )
        time.sleep(LOOK_S)
