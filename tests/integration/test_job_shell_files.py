"""A shell inside a running job under a real pty, and a job's folder as files (list, view,
resumable download) on both dev sites."""

from __future__ import annotations

import hashlib
import os
import pty
import select
import subprocess
import sys
import time

import pytest

from hpcui.backends.states import JobState
from hpcui.errors import UsageError
from hpcui.jobs.file_download import CHUNK
from tests.conftest import ROOT
from tests.integration.test_any_job import sbatch_script, wait_state

pytestmark = pytest.mark.devcluster

SIZE = CHUNK + CHUNK // 4  # more than one read chunk: a cut leaves a part


def read_until(fd: int, marker: bytes, timeout: float = 60) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while marker not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {marker!r} in {seen[-2000:]!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the pty closed
                break
            if not chunk:
                break
            seen += chunk
    return seen


def test_a_shell_in_a_running_job_opens_and_closes_under_a_pty(site, tmp_path):
    job_id = sbatch_script(site, "#!/bin/bash\nsleep 120\n", "--time=3")
    try:
        wait_state(site, job_id, {JobState.RUNNING})
        node = site.control.details(job_id).batch_host
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/root"),
            "HPCUI_CONFIG": str(ROOT / ".devcluster" / "hpcui.toml"),
            "HPCUI_DATA_DIR": str(tmp_path),
            "PYTHONPATH": str(ROOT),
            "TERM": "xterm",
            "HPCUI_AGENT": "off",  # its own login (test_agent.py: the shell through the agent)
        }
        pid, fd = pty.fork()
        if pid == 0:  # the child: hpcui shell on the pty's slave side
            os.execve(
                sys.executable,
                [sys.executable, "-m", "hpcui.cli", "-c", site.name, "shell", job_id],
                env,
            )
        try:
            read_until(fd, b"exit (or Ctrl-D) to leave")
            # the shell on the node: keys typed before srun's pty is up may be dropped
            read_until(fd, f"hpcuser@{node}".encode(), timeout=90)
            os.write(fd, b"echo IN-JOB=$SLURM_JOB_ID ON=$(hostname) TTY=$(tty)\n")
            seen = read_until(fd, f"IN-JOB={job_id} ON={node}".encode())
            os.write(fd, b"exit 0\n")
            seen += read_until(fd, b"left job")
            _, status = os.waitpid(pid, 0)
        finally:
            os.close(fd)
        assert os.waitstatus_to_exitcode(status) == 0
        assert b"TTY=/dev/pts/" in seen  # a real terminal on the node
        assert f"left job {job_id}".encode() in seen
    finally:
        site.control.cancel([job_id])
    with pytest.raises(UsageError, match="needs a running job"):
        site.control.open_shell(job_id)


def test_shell_without_a_terminal_says_so(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "hpcui.cli", "shell", "1"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={**os.environ, "HPCUI_DATA_DIR": str(tmp_path), "HPCUI_AGENT": "off"},
        timeout=60,
    )
    assert res.returncode == 2 and "needs a terminal" in res.stderr


def test_folder_listing_view_and_a_resumed_download(site, tmp_path):
    job_id = sbatch_script(site, "#!/bin/bash\ntrue\n", "--hold")
    try:
        folder = site.files.folder(job_id)
        name = f"ckpt-{job_id}.bin"
        # varied bytes, more than one read chunk
        site.transport.run(
            f"cd {folder} && head -c {SIZE} /dev/urandom > {name} && mkdir -p sub-{job_id}"
        ).check("writing the checkpoint")
        remote_sum = site.transport.run(f"sha256sum {folder}/{name}").check("sum").stdout.split()[0]
        entries = {e.name: e for e in site.files.list(folder)}
        assert entries[name].size == SIZE and not entries[name].is_dir
        assert entries[f"sub-{job_id}"].is_dir
        with pytest.raises(UsageError, match="is a file"):
            site.files.list(f"{folder}/{name}")
        with pytest.raises(UsageError, match="no folder"):
            site.files.list(f"{folder}/nope-{job_id}")

        class Cut(Exception):
            pass

        calls = []

        def cut_after_first_chunk(done: int, total: int) -> None:
            calls.append(done)
            if done > 0:
                raise Cut

        with pytest.raises(Cut):
            site.files.download(f"{folder}/{name}", tmp_path, progress=cut_after_first_chunk)
        part = tmp_path / f"{name}.part"
        assert part.stat().st_size == CHUNK and not (tmp_path / name).exists()
        seen = []
        moved, local = site.files.download(
            f"{folder}/{name}", tmp_path, progress=lambda d, t: seen.append(d)
        )
        assert local == tmp_path / name and not part.exists()
        assert moved == SIZE - CHUNK  # only the rest travelled
        assert seen[0] == CHUNK and seen[-1] == SIZE
        assert hashlib.sha256(local.read_bytes()).hexdigest() == remote_sum
        assert oct(local.stat().st_mode & 0o777) == "0o600"
        site.transport.run(f"rm -rf {folder}/{name} {folder}/sub-{job_id}")
    finally:
        site.control.cancel([job_id])


def test_shell_new_is_an_allocation_that_ends_with_the_shell(devcluster, tmp_path):
    """Issue 35: `hpcui shell --new [resources]` (salloc-like): a job whose shell opens on
    its node under a real pty, with the resources asked; exiting the shell ends the job."""
    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config

    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "HPCUI_CONFIG": str(ROOT / ".devcluster" / "hpcui.toml"),
        "HPCUI_DATA_DIR": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "TERM": "xterm",
        "HPCUI_AGENT": "off",
    }
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(
            sys.executable,
            [sys.executable, "-m", "hpcui.cli", "-c", "dev", "shell", "--new", "--time", "10m",
             "--cpus-per-task", "3", "--name", "myshell"],
            env,
        )  # fmt: skip
    try:
        read_until(fd, b"exit (or Ctrl-D) ends the job")
        read_until(fd, b"hpcuser@node", timeout=90)
        os.write(fd, b"echo JOB=$SLURM_JOB_ID CPUS=$SLURM_CPUS_PER_TASK NAME=$SLURM_JOB_NAME\n")
        seen = read_until(fd, b"NAME=myshell")
        os.write(fd, b"exit 0\n")
        seen += read_until(fd, b"left the allocation")
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    job_id = seen.split(b"JOB=")[-1].split()[0].decode()
    assert job_id.isdigit() and b"CPUS=3" in seen
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HPCUI_CONFIG", env["HPCUI_CONFIG"])
        with Cluster(load_config().cluster("dev")) as dev:
            wait_state(dev, job_id, {JobState.COMPLETED})  # it ended with the shell
