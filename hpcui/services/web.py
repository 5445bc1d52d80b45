"""Web services in a job (JupyterLab, TensorBoard), reached through a forward: submit,
find the server by its own runtime file, and build the address this machine opens."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from hpcui.backends.shell import quote
from hpcui.backends.states import JobState
from hpcui.errors import JobError, UsageError
from hpcui.jobs.forwarding import Forward
from hpcui.jobs.job import Job
from hpcui.node import services as on_node
from hpcui.node import tensorboard_gate
from hpcui.request.resources import Resources
from hpcui.submission.environments import spec_of
from hpcui.submission.submitter import function_name
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
    the image's Python when the service runs in a container."""
    if resources.get("container"):
        req = Resources.from_kwargs(**resources)
        if not cluster.submitter.image_imports(req, kind.module):
            raise UsageError(
                f"{kind.title} is not installed in the image {req.container} (its Python cannot "
                f"import {kind.module}): use an image that has it (e.g. one built FROM yours "
                f"with `pip install {kind.module}`), or run it without --container."
            )
        return
    env = resources.get("env") or ()
    items = [env] if isinstance(env, str) else [str(e) for e in env]
    existing = len(items) == 1 and items[0].startswith(("/", "~", "$"))
    if items and not existing:  # built for it: the module must be asked for
        if not any(kind.module in item.lower() for item in items):
            raise UsageError(
                f"{kind.title} runs with the environment env= builds, which does not ask for "
                f"{kind.module}: add it (e.g. --env {kind.module} --env ...), or leave env out."
            )
        return  # the build checks what it installs
    setup = "; ".join(cluster.setup)
    asked = resources.get("python") or cluster.python  # the job's own python= if given
    if existing:
        asked = spec_of(items, []).existing
    python = quote_bytes(asked).decode()
    probe = f"{setup + '; ' if setup else ''}{python} -c 'import {kind.module}'"
    res = cluster.run(f"( {probe} ) >/dev/null 2>&1 && echo yes || echo no")
    if res.stdout.strip() != "yes":
        raise UsageError(
            f"{kind.title} is not installed in {cluster.name}'s Python ({asked}"
            f"{' after its setup lines' if setup else ''}): run `pip install {kind.module}` "
            "in that environment, or load the site's module in the cluster's `setup` "
            f'(e.g. `setup = ["module load {kind.module}"]`), then try again.'
        )


def submit(cluster: Any, kind: Kind, argument: str | None, **resources: Any) -> Job:
    """The service as an ordinary hpcui job (named after its kind)."""
    resources.setdefault("name", kind.name)
    job: Job = cluster.submit(kind.run, argument, **resources)
    return job


def is_service(record: Any, kind: Kind) -> bool:
    """A job hpcui submitted as this kind of service: by what it runs, not by its name
    (a user's own job may be called "jupyter")."""
    return bool(record.meta.get("function")) and record.meta["function"] == function_name(kind.run)


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
    return _server(job.cluster.transport, where, names[-1])


def _server(transport: Any, where: str, info_name: str) -> Server:
    """From the server's info file; TensorBoard's token from its gate's file beside it."""
    data = json.loads(transport.read_file(f"{where}/{info_name}"))
    base = str(data.get("base_url") or data.get("path_prefix") or "/")
    token = str(data.get("token", ""))
    if not token and info_name.startswith(".tensorboard-info/"):
        token = transport.read_file(f"{where}/{tensorboard_gate.TOKEN_FILE}").decode().strip()
    return Server(int(data["port"]), base if base.endswith("/") else base + "/", token)


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


# -- on the login node (a profile's `tensorboard_on = "login"`) ------------------------------

#: where a service started on the login node keeps its pid and runtime files:
#: `<remote_base>/services/<kind>-<id>/` (private: a token may be in them)
LOGIN_SERVICES = "services"


class LoginService(NamedTuple):
    """A server hpcui started on the login node: its folder and process id."""

    folder: str
    pid: int

    @property
    def label(self) -> str:
        """What stands for the job in a forward's row (`hpcui forward --list`)."""
        return f"login:{self.pid}"


def start_on_login(cluster: Any, kind: Kind, argument: str) -> LoginService:
    """TensorBoard as the user's own background process on the login node (a site whose
    profile allows light services there), on 127.0.0.1 and a port free there, behind
    the same token gate as in a job (127.0.0.1 of a shared login node is every user's);
    the gate's file, its token and the info file in a private folder of the job base."""
    if kind.name != "tensorboard":
        raise UsageError(f"{kind.title} runs in a job, not on the login node.")
    base = cluster.remote_info().base
    folder = f"{base}/{LOGIN_SERVICES}/{kind.name}-{uuid.uuid4().hex[:12]}"
    setup = "; ".join(cluster.setup)
    python = quote(cluster.python)
    cluster.run(["mkdir", "-p", "-m", "700", folder]).check("making the service's folder")
    gate = f"{folder}/tensorboard_gate.py"
    cluster.transport.write_file(gate, Path(tensorboard_gate.__file__).read_bytes(), mode=0o600)
    script = (
        f"cd {quote(folder)} && "
        f"{{ {setup + '; ' if setup else ''}nohup {python} {quote(gate)} "
        f"--logdir {quote(argument)} --host 127.0.0.1 --folder {quote(folder)} "
        "</dev/null >log 2>&1 & echo $! > pid; cat pid; }"
    )
    res = cluster.run(script)
    try:
        pid = int(res.stdout.split()[-1])
    except (IndexError, ValueError):
        raise UsageError(
            f"Starting {kind.title} on {cluster.name}'s login node failed: "
            f"{(res.stderr or res.stdout).strip()[-500:] or 'no output'}."
        ) from None
    return LoginService(folder, pid)


def login_alive(cluster: Any, service: LoginService, *, started: bool = True) -> bool:
    """The server still runs: its pid lives and (once `started`: before its exec the pid
    is the login shell's fork) is the user's TensorBoard, not a reused pid."""
    check = f" && grep -q tensorboard /proc/{service.pid}/cmdline" if started else ""
    res = cluster.run(f"kill -0 {service.pid} 2>/dev/null{check} && echo yes || echo no")
    return res.stdout.strip() == "yes"


def wait_for_login_server(
    cluster: Any, kind: Kind, service: LoginService, *, timeout: float | None = None
) -> Server:
    """Until the server wrote its info file; UsageError (with its log) when it died first
    or after `timeout` seconds."""
    start = time.monotonic()
    where = quote(service.folder)
    while True:
        listing = cluster.run(f"cd {where} 2>/dev/null && ls -1 {kind.runtime_file}")
        names = [n for n in listing.stdout.split() if n] if listing.ok else []
        if names:
            return _server(cluster.transport, service.folder, names[-1])
        if not login_alive(cluster, service, started=False):
            log = cluster.run(f"tail -n 20 {where}/log 2>/dev/null").stdout
            raise UsageError(
                f"{kind.title} on {cluster.name}'s login node ended before it served. Last "
                f"lines of its log:\n{log.strip() or '(empty)'}"
            )
        if timeout is not None and time.monotonic() - start > timeout:
            raise UsageError(
                f"{kind.title} on {cluster.name}'s login node did not serve within "
                f"{timeout:.0f} s; `hpcui {kind.name} --stop` ends it."
            )
        time.sleep(LOOK_S)


def stop_on_login(cluster: Any, kind: Kind) -> list[int]:
    """End the user's servers of this kind hpcui started on the login node; their pids."""
    base = cluster.remote_info().base
    pattern = f"{quote(f'{base}/{LOGIN_SERVICES}')}/{kind.name}-*"
    res = cluster.run(
        f'for d in {pattern}; do [ -f "$d/pid" ] || continue; p=$(cat "$d/pid"); '
        f'if kill -0 "$p" 2>/dev/null && grep -q {kind.module} /proc/"$p"/cmdline; then '
        'kill "$p"; for i in $(seq 50); do '  # gone (or only a zombie) within 5 s, else KILL
        f'grep -q {kind.module} /proc/"$p"/cmdline 2>/dev/null || break; sleep 0.1; done; '
        f'! grep -q {kind.module} /proc/"$p"/cmdline 2>/dev/null || kill -9 "$p"; '
        'echo "$p"; fi; rm -rf "$d"; done; true'
    )
    return [int(p) for p in res.stdout.split() if p.isdigit()]


def forward_login(
    cluster: Any,
    service: LoginService,
    port: int,
    *,
    local_port: int | None = None,
    taking_over: bool = False,
) -> Forward:
    """127.0.0.1:`local_port` here to 127.0.0.1:`port` on the login node, over the
    cluster's connection, until the server ends or the forward is closed."""
    return Forward(
        cluster=cluster.name, job_id=service.label, node="127.0.0.1", remote_port=port,
        open_tunnel=cluster.transport.open_tunnel, local_port=local_port,
        ended=lambda: not login_alive(cluster, service),
        origin={"kind": "login", "cluster": cluster.name, "folder": service.folder,
                "pid": service.pid, "port": port},
        taking_over=taking_over,
    )  # fmt: skip
