"""One login for every tool, on the dev cluster's 2FA site (dev-2fa): after one TOTP answer,
plain OpenSSH (`ssh -F <hpcui ssh-config's output>`), rsync and git reach a job's node
through `hpcui proxy` over the agent's login, with no second prompt; the node's own sshd
(OpenSSH + pam_slurm_adopt) admits the user because they have a job there, adopts the
session into that job (`SLURM_JOB_ID` in its environment), and refuses a user without one.
`hpcui code --new` submits a node-holding job, waits for it and prints the VS Code command
(VS Code is not installed here); `--install` keeps the entries current as jobs end.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcui.backends.states import JobState
from tests.conftest import DEVCLUSTER
from tests.integration.test_agent import hpcui, logins

pytestmark = pytest.mark.devcluster

ENV: dict[str, str] = {}


def totp() -> bytes:
    seed = (DEVCLUSTER / "ssh" / "totp_seed").read_text().strip()
    out = subprocess.run(["oathtool", "--totp", "-b", seed], capture_output=True, text=True)
    return out.stdout.strip().encode()


def ssh(cfg: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Plain OpenSSH, as from the user's terminal (its environment is this test's own)."""
    return subprocess.run(
        ["ssh", "-F", str(cfg), "-o", "BatchMode=yes", *args],
        env=ENV, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def test_one_totp_for_ssh_rsync_git_and_vscode_on_a_jobs_node(agent_env, dev, tmp_path):
    from tests.support.pty_session import run_on_pty

    home = tmp_path / "home"
    home.mkdir()
    env = dict(agent_env("10m"), HOME=str(home), HPCUI_SSH_HOSTS_REFRESH_S="1")
    ENV.clear()
    ENV.update(env)
    asked = 0

    def answer(seen: bytes) -> bytes | None:
        nonlocal asked
        if seen.rstrip().endswith(b"code:") and seen.count(b"code:") > asked:
            asked += 1
            return totp()
        return None

    # before any login, a proxy without a terminal (VS Code from a desktop) says what to do
    lost = subprocess.run(
        [sys.executable, "-m", "hpcui.cli", "proxy", "dev-2fa", "1"], env=env,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        start_new_session=True,  # no controlling terminal: no /dev/tty to ask on
    )  # fmt: skip
    assert lost.returncode != 0
    assert "log in once in a terminal (`hpcui jobs -c dev-2fa`)" in lost.stderr, lost.stderr

    # `hpcui code --new`: the first call, so the one that asks the code
    argv = [sys.executable, "-m", "hpcui.cli", "-c", "dev-2fa", "code", "--new", "--time", "10m"]
    code, text = run_on_pty(argv, env, answer, timeout=180)
    assert code == 0 and asked == 1, text
    line = next(ln for ln in text.splitlines() if ln.startswith("code --remote ssh-remote+"))
    host, folder = line.split()[2].removeprefix("ssh-remote+"), line.split()[3]
    job_id = host.removeprefix("hpcui-dev-2fa-")
    own = home / ".ssh" / "hpcui" / "config"
    try:
        assert "RUNNING" in text and "`code` is not on PATH" in text
        details = dev.control.details(job_id)
        assert details.state is JobState.RUNNING
        node = details.nodelist
        assert folder == dev.files.folder(job_id)
        dry = hpcui(env, "-c", "dev-2fa", "code", "--dry-run", job_id)
        assert dry.returncode == 0, dry.stderr
        assert dry.stdout.strip() == f"code --remote ssh-remote+{host} {folder}"

        cfg = tmp_path / "ssh_config"
        made = hpcui(env, "-c", "dev-2fa", "ssh-config")
        assert made.returncode == 0, made.stderr
        cfg.write_text(made.stdout)
        assert f"Host {host}\n" in made.stdout and "StrictHostKeyChecking yes" in made.stdout

        res = ssh(cfg, host, 'hostname; echo "JOB=$SLURM_JOB_ID"; cat /proc/self/cgroup')
        assert res.returncode == 0, res.stderr
        lines = res.stdout.splitlines()
        assert lines[0] == node  # the job's node, by its own sshd
        # pam_slurm_adopt adopted the session into the job; with other jobs of the user on
        # that node (another test's), into the newest of them (its action_unknown=newest)
        there = dev.run(["squeue", "--me", "-h", "-t", "R", "-w", node, "-o", "%A"]).stdout
        assert lines[1] in {f"JOB={j}" for j in there.split()} | {f"JOB={job_id}"}, there
        if there.split() == [job_id]:
            assert lines[1] == f"JOB={job_id}"
        print("session cgroups (proctrack/linuxproc: no job cgroup):", *lines[2:], sep="\n  ")

        # rsync of a 50 MiB folder into the node's own /tmp (private to the node)
        src = tmp_path / "payload"
        src.mkdir()
        digests = {}
        for i in range(5):
            blob = os.urandom(10 * 1024 * 1024)
            (src / f"part{i}.bin").write_bytes(blob)
            digests[f"part{i}.bin"] = hashlib.sha256(blob).hexdigest()
        dest = f"/tmp/hpcui-rsync-{job_id}/"
        sync = subprocess.run(
            ["rsync", "-a", "-e", f"ssh -F {cfg} -o BatchMode=yes", f"{src}/", f"{host}:{dest}"],
            env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert sync.returncode == 0, sync.stderr
        sums = ssh(cfg, host, f"cd {dest} && sha256sum *.bin")
        assert {ln.split()[1]: ln.split()[0] for ln in sums.stdout.splitlines()} == digests

        # git clone of a repository that lives in the node's /tmp
        repo = f"/tmp/hpcui-repo-{job_id}"
        made_repo = ssh(
            cfg, host,
            f"git init -q {repo} && cd {repo} && echo on-the-node > f && git add f && "
            "git -c user.email=t@example.org -c user.name=t commit -qm one",
        )  # fmt: skip
        assert made_repo.returncode == 0, made_repo.stderr
        clone = subprocess.run(
            ["git", "clone", "-q", f"{host}:{repo}", str(tmp_path / "clone")],
            env={**env, "GIT_SSH_COMMAND": f"ssh -F {cfg} -o BatchMode=yes"},
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert clone.returncode == 0, clone.stderr
        assert (tmp_path / "clone" / "f").read_text() == "on-the-node\n"

        # a user without a job on that node: the node refuses them
        other = ssh(cfg, "-o", "User=hpcpeer", host, "true")
        assert other.returncode == 255
        assert "Access denied by pam_slurm_adopt: you have no active jobs" in other.stderr

        # a job that does not run: the proxy says so, nothing is opened
        gone = subprocess.run(
            [sys.executable, "-m", "hpcui.cli", "proxy", "dev-2fa", "999999999"],
            env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert gone.returncode != 0 and "hpcui proxy:" in gone.stderr, gone.stderr

        # the agent, logged in, is a ControlMaster for OpenSSH's own `ssh -W` (the
        # entries' fast path): the node's banner comes through it
        (mux,) = Path(env["XDG_RUNTIME_DIR"]).glob("hpcui/agent-*.mux-*.sock")
        fast = subprocess.Popen(
            ["ssh", "-F", "/dev/null", "-o", "ControlMaster=no", "-o", f"ControlPath={mux}",
             "-o", "ProxyCommand=false", "-W", f"{node}:22", "hpcui-agent"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert fast.stdout is not None
        banner = fast.stdout.read(7)
        fast.kill()
        fast.communicate()
        assert banner == b"SSH-2.0", banner

        assert asked == 1  # one TOTP answer for all of it
        assert logins(env, "dev-2fa") == 1

        # --install: included once, and rewritten by the agent once the job ended
        installed = hpcui(env, "-c", "dev-2fa", "ssh-config", "--install")
        assert installed.returncode == 0, installed.stderr
        assert f"Host {host}\n" in own.read_text()
        assert "Include hpcui/config" in (home / ".ssh" / "config").read_text()
    finally:
        dev.control.cancel([job_id])
    deadline = time.monotonic() + 60
    while f"Host {host}\n" in own.read_text():
        assert time.monotonic() < deadline, "the ended job's entry is still there"
        hpcui(env, "agent", "status")  # the agent stays warm while its keeper looks
        time.sleep(1)


def test_the_job_screens_v_key_keeps_the_host_and_gives_the_vscode_command(
    dev, tmp_path, monkeypatch
):
    """The app's Job screen, `V`: as `hpcui code JOB` (VS Code is not installed here: the
    command is shown and copied), the node's host entry kept and included."""
    from hpcui.tui.app import HpcuiApp
    from tests.integration.test_any_job import sbatch_script, wait_state
    from tests.integration.test_tui_dev import SIZE, open_foreign_job, run_closing, wait_for

    monkeypatch.setenv("HOME", str(tmp_path))
    job_id = sbatch_script(dev, "#!/bin/bash\nsleep 120\n", "--time=3")
    try:
        wait_state(dev, job_id, {JobState.RUNNING})
        folder = dev.files.folder(job_id)

        async def go() -> list[str]:
            app = HpcuiApp("dev", connect=["dev"])
            async with app.run_test(size=SIZE) as pilot:
                await open_foreign_job(pilot, app, job_id)
                await pilot.press("V")
                said = lambda: [n.message for n in app._notifications if "code" in n.message]  # noqa: E731
                await wait_for(pilot, lambda: bool(said()), 60, "the VS Code notice")
                return said()

        (told,) = run_closing(go)
        assert f"code --remote ssh-remote+hpcui-dev-{job_id} {folder}" in told
        assert f"Host hpcui-dev-{job_id}\n" in (tmp_path / ".ssh" / "hpcui" / "config").read_text()
        assert "Include hpcui/config" in (tmp_path / ".ssh" / "config").read_text()
    finally:
        dev.control.cancel([job_id])
