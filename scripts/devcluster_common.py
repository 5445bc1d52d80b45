"""Helpers shared by the dev cluster's sites (scripts/devcluster and its second site).

Standard library only: runs under Debian's /usr/bin/python3 as root.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import time
from pathlib import Path

#: JupyterLab as a user installs it into the cluster's environment: `hpcui jupyter` runs the
#: real server on a compute node of either site (issue 33)
JUPYTERLAB = "jupyterlab==4.6.6"
#: and TensorBoard, for `hpcui tensorboard`
TENSORBOARD = "tensorboard==2.21.0"
#: the training frameworks a site's PyTorch module carries (CSC's `module load pytorch` has
#: all four), so jobs of tests/integration/test_frameworks.py train with them for real.
#: transformers 5.24: 5.25 needs `kernels>=0.19.1`, which PyPI's mirror here lacks.
FRAMEWORKS = ("lightning==2.6.6", "accelerate==1.16.0", "transformers==5.24.0")
#: the experiment trackers a job writes offline (issue 60: hpcui.trackers relays them):
#: MLflow's client (its file store) and W&B, as a user's venv or a site module has them
TRACKERS = ("mlflow-skinny==3.17.2", "wandb==0.31.0")
#: Hydra where its jobs run (hpcui's launcher runs Hydra's run_job on the node), as a
#: user's `pip install hydra-core` into their venv would put it: tests/integration/test_hydra_dev.py
HYDRA = "hydra-core==1.3.8"
#: DeepSpeed comes as an sdist that builds against the torch beside it (no build isolation),
#: with its CPU communication op compiled at install, as sites pre-build DeepSpeed's ops in
#: their modules: otherwise every user's first job compiles it (JIT, ~80 s on 2 cores)
DEEPSPEED = "deepspeed==0.19.8"
DEEPSPEED_DEPS = ("einops", "hjson", "msgpack", "ninja", "psutil", "py-cpuinfo", "tqdm")
DEEPSPEED_BUILD_ENV = {"DS_ACCELERATOR": "cpu", "DS_BUILD_OPS": "0", "DS_BUILD_SHM_COMM": "1"}
REPO = Path(__file__).resolve().parent.parent
MARKER_ENV = "HPCUI_DEVCLUSTER_ROOT"  # set in every daemon's environment: proves who started it
TIMEOUT = 60.0
DAEMON_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "HOME": "/root",
    MARKER_ENV: str(REPO),
}


class DevclusterError(Exception):
    pass


def same_file(a: str | Path, b: str | Path) -> bool:
    """`a` and `b` are one file (device and inode; links followed). A process's
    /proc/<pid>/root and /proc/<pid>/exe read through another mount namespace's pivot_root
    as paths of that namespace, so they are compared this way, not as strings."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


# --------------------------------------------------------------------------- helpers


def say(msg: str) -> None:
    print(f"devcluster: {msg}", flush=True)


def run(
    argv: list[str], check: bool = True, input: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    p = subprocess.run(
        argv, input=input, capture_output=True, text=True, timeout=timeout, env=client_env()
    )
    if check and p.returncode != 0:
        raise DevclusterError(
            f"command failed (rc={p.returncode}): {' '.join(argv)}\n{p.stdout}{p.stderr}"
        )
    return p


def client_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("SLURM_CONF", None)
    env.setdefault("PATH", DAEMON_ENV["PATH"])
    if "/usr/sbin" not in env["PATH"].split(":"):
        env["PATH"] += ":/usr/sbin:/sbin"
    return env


def write(path: Path, content: str | bytes, mode: int = 0o644, owner: str | None = None) -> bool:
    """Write a file only if its content differs. Returns True when it changed."""
    data = content.encode() if isinstance(content, str) else content
    path.parent.mkdir(parents=True, exist_ok=True)
    changed = True
    try:
        changed = path.read_bytes() != data
    except (FileNotFoundError, IsADirectoryError):
        pass
    if changed:
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        tmp.write_bytes(data)
        os.chmod(tmp, mode)
        if owner:
            shutil.chown(tmp, owner, owner)
        os.replace(tmp, path)
    else:
        if stat.S_IMODE(path.stat().st_mode) != mode:
            os.chmod(path, mode)
        if owner:
            shutil.chown(path, owner, owner)
    return changed


def tail(path: Path, n: int = 40) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return f"(no log file {path})"
    return "\n".join(f"    {line}" for line in lines[-n:])


def shortname() -> str:
    return socket.gethostname().split(".")[0]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def ssh_banner(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.settimeout(2)
            return s.recv(64).startswith(b"SSH-2.0-")
    except OSError:
        return False


def wait_for(what: str, check, logs: list[Path], timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.05
    last = None
    while True:
        try:
            res = check()
        except Exception as e:  # a check may raise while the daemon is still coming up
            res, last = False, e
        if res:
            return
        if time.monotonic() > deadline:
            msg = [
                f"{what} did not come up within {timeout:.0f} s" + (f" ({last})" if last else "")
            ]
            for log in logs:
                msg.append(f"--- last lines of {log}:\n{tail(log)}")
            raise DevclusterError("\n".join(msg))
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)


def keygen(path: Path, comment: str) -> None:
    if path.exists() and path.with_suffix(".pub").exists():
        os.chmod(path, 0o600)
        return
    path.unlink(missing_ok=True)
    path.with_suffix(".pub").unlink(missing_ok=True)
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
