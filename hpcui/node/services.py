"""Runs on the node: a web service in a job, found again by the client through the
server's own runtime file in the job folder (never by guessing from its log)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from hpcui.distributed import job_id_from_env

#: where a service job writes its runtime files: `<job folder>/<job id>.<kind>`
SERVICE_SUFFIX = {"jupyter": "jupyter", "tensorboard": "tensorboard"}


def service_dir(kind: str, env: dict[str, str] | None = None) -> str:
    """`<job folder>/<job id>.jupyter` (private: a server's token is in it)."""
    env = dict(os.environ) if env is None else env
    folder = env.get("HPCUI_JOB_FOLDER") or env.get("SUBMITIT_FOLDER") or os.getcwd()
    return os.path.join(folder, f"{job_id_from_env(env)}.{SERVICE_SUFFIX[kind]}")


def node_address(env: dict[str, str] | None = None) -> str:
    """The address this node has for the login node: its scheduler name resolved (Slurm's
    SLURMD_NODENAME, else the host name), as the login node will resolve it."""
    env = dict(os.environ) if env is None else env
    name = env.get("SLURMD_NODENAME") or socket.gethostname()
    try:
        return socket.gethostbyname(name)
    except OSError:
        return name


def jupyter_lab(root_dir: str | None = None) -> int:
    """JupyterLab on this node until the job ends; its runtime file (URL, port, token) in
    the job folder for the client. Listens on the node's own address, token required."""
    runtime = service_dir("jupyter")
    os.makedirs(runtime, mode=0o700, exist_ok=True)
    root = os.path.expanduser(root_dir or "~")
    cmd = [
        sys.executable, "-m", "jupyter", "lab", "--no-browser",
        f"--ip={node_address()}", "--port=8888", "--ServerApp.port_retries=200",
        f"--ServerApp.root_dir={root}",
    ]  # fmt: skip
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": runtime}
    return subprocess.call(cmd, env=env)


def tensorboard(logdir: str) -> int:
    """TensorBoard over `logdir` on this node until the job ends, behind a token only its
    user can read (`hpcui.node.tensorboard_gate`); its info file
    (`.tensorboard-info/pid-N.info`: port, path prefix) and the token in the job folder
    for the client."""
    from hpcui.node import tensorboard_gate

    runtime = service_dir("tensorboard")
    return tensorboard_gate.main(
        ["--logdir", logdir, "--host", node_address(), "--folder", runtime]
    )


def hold() -> int:
    """A job that only holds its allocation (`hpcui code --new`): the user works on the
    node over ssh (VS Code) until they cancel it or it reaches its time limit."""
    import signal
    import time

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)
