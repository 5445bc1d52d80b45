"""Web services in a job (JupyterLab, TensorBoard), reached through a forward: submit,
find the server by its own runtime file, and build the address this machine opens."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from hpcui.backends.states import JobState
from hpcui.compute import services as on_node
from hpcui.errors import JobError, UsageError
from hpcui.job import Job
from hpcui.resources import Resources
from hpcui.transport.quoting import quote_bytes


class Kind(NamedTuple):
    """One kind of service: what it needs installed, what runs on the node, where its
    own runtime file is (relative to `<job folder>/<job id>.<kind>`), and what to open."""

    name: str  # the job's name too (what `--stop` looks for)
    module: str
    title: str
    run: Callable[[str], int]
    runtime_file: str  # a shell glob
    path: str  # appended to the server's base URL


KINDS = {
    "jupyter": Kind("jupyter", "jupyterlab", "JupyterLab", on_node.jupyter_lab,
                    "jpserver-*.json", "lab"),
    "tensorboard": Kind("tensorboard", "tensorboard", "TensorBoard", on_node.tensorboard,
                        ".tensorboard-info/pid-*.info", ""),
}  # fmt: skip
JUPYTER_JOB = KINDS["jupyter"].name
#: how often the client looks for the server's runtime file while the job starts
LOOK_S = 1.0


class Server(NamedTuple):
    """A running server as its runtime file says: port on the node, base URL, token."""

    port: int
    base_url: str
    token: str

    def local_url(self, local_port: int, path: str = "") -> str:
        """The address to open here (the token in it: never logged, printed to the user)."""
        query = f"?token={self.token}" if self.token else ""
        return f"http://127.0.0.1:{local_port}{self.base_url}{path}{query}"


def check_installed(cluster: Any, kind: Kind, **resources: Any) -> None:
    """UsageError with the fix when the cluster's Python (after its setup) lacks it, or
    the image's Python when the service runs in a container (issue 32)."""
    if resources.get("container"):
        req = Resources.from_kwargs(**resources)
        if not cluster.submitter.image_imports(req, kind.module):
            raise UsageError(
                f"{kind.title} is not installed in the image {req.container} (its Python cannot "
                f"import {kind.module}): use an image that has it (e.g. one built FROM yours "
                f"with `pip install {kind.module}`), or run it without --container."
            )
        return
    setup = "; ".join(cluster.setup)
    python = quote_bytes(cluster.python).decode()
    probe = f"{setup + '; ' if setup else ''}{python} -c 'import {kind.module}'"
    res = cluster.run(f"( {probe} ) >/dev/null 2>&1 && echo yes || echo no")
    if res.stdout.strip() != "yes":
        raise UsageError(
            f"{kind.title} is not installed in {cluster.name}'s Python ({cluster.python}"
            f"{' after its setup lines' if setup else ''}): run `pip install {kind.module}` "
            "in that environment, or load the site's module in the cluster's `setup` "
            f'(e.g. `setup = ["module load {kind.module}"]`), then try again.'
        )


def submit(cluster: Any, kind: Kind, argument: str | None, **resources: Any) -> Job:
    """The service as an ordinary hpcui job (named after its kind)."""
    resources.setdefault("name", kind.name)
    job: Job = cluster.submit(kind.run, argument, **resources)
    return job


def runtime_dir(job: Job, kind: Kind) -> str:
    return f"{job.folder.rstrip('/')}/{job.job_id}.{kind.name}"


def read_server(job: Job, kind: Kind) -> Server | None:
    """The server's own runtime file once it wrote it (Jupyter's jpserver-PID.json,
    TensorBoard's pid-PID.info), else None."""
    where = runtime_dir(job, kind)
    listing = job.cluster.transport.run(
        f"cd {quote_bytes(where).decode()} 2>/dev/null && ls -1 {kind.runtime_file}"
    )
    names = [n for n in listing.stdout.split() if n] if listing.ok else []
    if not names:
        return None
    data = json.loads(job.cluster.transport.read_file(f"{where}/{names[-1]}"))
    base = str(data.get("base_url") or data.get("path_prefix") or "/")
    return Server(
        int(data["port"]), base if base.endswith("/") else base + "/", str(data.get("token", ""))
    )


def wait_for_server(
    job: Job,
    kind: Kind,
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
                f"The {kind.title} job {job.job_id} on {job.cluster.name} ended "
                f"({state.value}, exit status {status}) before its server started. Last lines of "
                f"its stderr:\n{tail or '(empty)'}",
                job_id=job.job_id,
                stderr_tail=tail,
            )
        if state is JobState.RUNNING:
            server = read_server(job, kind)
            if server is not None:
                return server
        now = f"job {job.job_id} is {state.value}" + (f" ({job.reason})" if job.reason else "")
        if now != last:
            said(f"waiting: {now}")
            last = now
        if timeout is not None and time.monotonic() - start > timeout:
            raise UsageError(
                f"The {kind.title} job {job.job_id} did not serve within {timeout:.0f} s "
                f"({now}); it keeps its place: `hpcui {kind.name} --stop` cancels it."
            )
        time.sleep(LOOK_S)
