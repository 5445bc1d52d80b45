"""The per-user agent against the dev cluster: one login per cluster for every `hpcui`
call (2FA answered once), other users refused, a killed agent replaced, 20 clients at
once, expiry after `persist`, and `persist = 0` as before the agent.

Every test has its own XDG_RUNTIME_DIR (so its own agent) and stops it at the end.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import struct
import subprocess
import sys
import termios
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hpcui.backends.states import JobState
from tests.conftest import DEVCLUSTER, ROOT

pytestmark = pytest.mark.devcluster


def hpcui(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    res = subprocess.run(
        [sys.executable, "-m", "hpcui.cli", *args],
        env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert "Traceback" not in res.stderr, res.stderr
    return res


def status(env: dict[str, str]) -> dict:
    res = hpcui(env, "agent", "status", "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def logins(env: dict[str, str], cluster: str) -> int:
    rows = {c["name"]: c for c in status(env)["clusters"]}
    return rows[cluster]["connects"] if cluster in rows else 0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    return state != "Z"


def test_calls_share_one_login_and_status_says_so(agent_env):
    env = agent_env("5m")
    assert status(env)["running"] is False
    first = hpcui(env, "exec", "--", "sh", "-c", "echo $$")
    second = hpcui(env, "exec", "--", "sh", "-c", "echo $$; echo err >&2; exit 7")
    assert first.returncode == 0 and first.stdout.strip().isdigit(), first.stderr
    assert second.returncode == 7 and second.stderr.strip() == "err"  # code and streams kept
    jobs = hpcui(env, "jobs", "--json")
    assert jobs.returncode == 0 and isinstance(json.loads(jobs.stdout), list)
    st = status(env)
    assert st["running"] and st["served"] >= 3 and st["persist_s"] == 300
    assert logins(env, "dev") == 1  # three commands, one SSH login
    sock = Path(st["socket"])
    assert sock.parent == Path(env["XDG_RUNTIME_DIR"]) / "hpcui"
    assert (sock.stat().st_mode & 0o777) == 0o600 and (sock.parent.stat().st_mode & 0o777) == 0o700
    usage = hpcui(env, "exec")  # a usage error comes back as from a direct call
    assert usage.returncode == 2 and "hpcui exec" in usage.stderr


def gpu_shell_path(tmp_path: Path) -> str:
    """A PATH with the STAND-IN nvidia-smi (one H100, replayed; tests/stand_ins) and the
    tools it replays with, and no Slurm: a laptop's shell."""
    d = tmp_path / "gpu-shell"
    d.mkdir()
    smi = d / "nvidia-smi"  # not a link: the stand-in finds its fixtures beside itself
    smi.write_text(f'#!/bin/sh\nexec {ROOT / "tests" / "stand_ins" / "nvidia-smi"} "$@"\n')
    smi.chmod(0o755)
    for tool in ("cat", "dirname"):  # what the stand-in replays with
        (d / tool).symlink_to(f"/usr/bin/{tool}")
    return str(d)


def test_calls_about_this_machine_use_each_callers_environment(agent_env, tmp_path):
    """Three shells share one agent; the first has Slurm on PATH. Each gets this machine as
    its own PATH and CUDA_VISIBLE_DEVICES show it (before: the agent's, i.e. the first's)."""
    env = agent_env("10m")
    slurm = {**env, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}  # sbatch on PATH
    laptop = {**env, "PATH": gpu_shell_path(tmp_path)}  # an H100, no Slurm
    hidden = {**laptop, "CUDA_VISIBLE_DEVICES": ""}  # the same, with no GPU visible
    assert hpcui(slurm, "jobs", "-c", "dev").returncode == 0  # starts the agent, logs in
    agent = status(slurm)
    assert agent["running"]

    def profile(shell: dict[str, str]) -> dict:
        res = hpcui(shell, "profiles", "local", "--json")
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    on_slurm, on_gpu, none_visible = profile(slurm), profile(laptop), profile(hidden)
    assert on_slurm["gpus_per_node"] is None  # Slurm's nodes, not this machine, run its jobs
    assert on_gpu["gpus_per_node"] == 1 and "H100" in on_gpu["gpu_model"]
    assert on_gpu["cores_per_node"] == os.cpu_count()
    assert none_visible["gpus_per_node"] == 0
    assert none_visible["notes"] == ["no GPU: CUDA_VISIBLE_DEVICES= leaves 0 of 1 GPU(s)"]
    text = hpcui(hidden, "profiles", "local")  # the text form says what the JSON says, once
    assert f"CPU, {os.cpu_count()} cores" in text.stdout
    assert text.stderr.count("no GPU:") == 1, text.stderr

    # a command on the local cluster: Slurm's partitions for the first shell, none (plain
    # processes) for the laptop's, while the agent that the first shell started runs on
    parts_slurm = hpcui(slurm, "partitions", "-c", "local", "--json")
    parts_laptop = hpcui(laptop, "partitions", "-c", "local", "--json")
    assert parts_slurm.returncode == 0 and parts_laptop.returncode == 0, parts_laptop.stderr
    assert {p["partition"] for p in json.loads(parts_slurm.stdout)} >= {"cpu"}
    assert json.loads(parts_laptop.stdout) == []
    after = status(slurm)
    assert after["pid"] == agent["pid"] and logins(slurm, "dev") == 1  # same agent, one login


def test_two_calls_on_the_2fa_cluster_answer_one_totp_prompt(agent_env):
    """On a pseudo-terminal (a person): the first call asks the TOTP code, the second
    reuses the agent's authenticated connection and asks nothing."""
    from tests.support.pty_session import run_on_pty

    env = agent_env("5m")
    seed = (DEVCLUSTER / "ssh" / "totp_seed").read_text().strip()
    argv = [sys.executable, "-m", "hpcui.cli", "-c", "dev-2fa", "exec", "whoami"]
    prompts = 0

    def answer(seen: bytes) -> bytes | None:
        nonlocal prompts
        if not seen.rstrip().endswith(b"code:") or seen.count(b"code:") <= prompts:
            return None
        prompts += 1
        code = subprocess.run(
            ["oathtool", "--totp", "-b", seed], capture_output=True, text=True, check=True
        ).stdout.strip()
        return code.encode()

    # the first call lists two clusters at once: the 2FA one is asked from a worker thread
    both = [sys.executable, "-m", "hpcui.cli", "jobs", "-c", "dev,dev-2fa"]
    code, text = run_on_pty(both, env, answer, timeout=60)
    assert code == 0 and prompts == 1, text
    assert "JOBID" in text
    assert "dev-2fa: login" in text.split("Verification code")[0]  # who asks
    code, text = run_on_pty(argv, env, answer, timeout=60)
    assert code == 0, text
    assert prompts == 1, f"asked again: {text}"
    assert text.strip() == "hpcuser"
    assert logins(env, "dev-2fa") == 1
    # without a terminal the agent's connection serves too: no prompt needed any more
    piped = hpcui(env, "-c", "dev-2fa", "exec", "whoami")
    assert piped.returncode == 0 and piped.stdout.strip() == "hpcuser", piped.stderr


def test_a_shell_in_a_job_rides_the_agents_login_on_the_2fa_cluster(agent_env, dev):
    """`hpcui shell` with the agent on: the pty channel is opened on the agent's login and
    relayed, so the 2FA site asks its code for the first call only, not again for the
    shell; keys, output and the exit status travel through the agent, and the session's
    end frees the agent (dev-2fa is the dev site behind a TOTP sshd)."""
    from tests.integration.test_any_job import sbatch_script, wait_state
    from tests.support.pty_session import run_on_pty

    env = dict(agent_env("5m"), TERM="xterm")
    seed = (DEVCLUSTER / "ssh" / "totp_seed").read_text().strip()
    job_id = sbatch_script(dev, "#!/bin/bash\nsleep 120\n", "--time=3")
    try:
        wait_state(dev, job_id, {JobState.RUNNING})
        node = dev.control.details(job_id).batch_host
        typed = {"code": 0, "echo": 0, "exit": 0}

        def answer(seen: bytes) -> bytes | None:
            if seen.rstrip().endswith(b"code:") and seen.count(b"code:") > typed["code"]:
                typed["code"] += 1
                return (
                    subprocess.run(
                        ["oathtool", "--totp", "-b", seed],
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                    .stdout.strip()
                    .encode()
                )
            shell = seen.partition(b"to leave")[2]  # what the node's shell printed
            if not typed["echo"] and f"hpcuser@{node}".encode() in shell:
                typed["echo"] += 1
                # the window was resized just now (resize_once): srun passes it on
                return b"sleep 1; echo IN-JOB=$SLURM_JOB_ID ON=$(hostname) TTY=$(tty) SIZE=$(stty size)"
            if not typed["exit"] and f"IN-JOB={job_id} ON={node}".encode() in shell:
                typed["exit"] += 1
                return b"exit 3"
            return None

        code, text = run_on_pty(
            [sys.executable, "-m", "hpcui.cli", "-c", "dev-2fa", "jobs"], env, answer, timeout=60
        )
        assert code == 0 and typed["code"] == 1, text

        def resize_once(fd: int, seen: bytes) -> None:  # once the node's shell is up
            shell = seen.partition(b"to leave")[2]
            if not typed.get("resized") and f"hpcuser@{node}".encode() in shell:
                typed["resized"] = 1
                fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 37, 111, 0, 0))

        code, text = run_on_pty(
            [sys.executable, "-m", "hpcui.cli", "-c", "dev-2fa", "shell", job_id],
            env, answer, timeout=120, on_read=resize_once,
        )  # fmt: skip
        assert code == 0, text
        assert typed["code"] == 1, f"the shell asked for a code again: {text}"
        assert typed["exit"] == 1 and "TTY=/dev/pts/" in text, text
        assert "SIZE=37 111" in text  # the window size change reached the node's pty
        assert f"left job {job_id} (shell exit status 3)" in text  # the status came back
        assert logins(env, "dev-2fa") == 1  # the shell used the agent's login
        deadline = time.monotonic() + 20
        while status(env)["active"]:  # the relay ended with the session
            assert time.monotonic() < deadline, "the agent still serves the ended shell"
            time.sleep(0.2)
    finally:
        dev.control.cancel([job_id])


def test_no_terminal_and_no_login_yet_is_a_clear_error(agent_env):
    """The agent asks only a client that has a terminal; without one the call fails at
    once with the direct path's message (exit 3), and the agent stays up."""
    env = agent_env("5m")
    res = hpcui(env, "-c", "dev-2fa", "quota", timeout=60)
    assert res.returncode == 3 and "cannot prompt" in res.stderr, res.stderr
    assert status(env)["running"]


RAW_CLIENT = """
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print("CONNECT", type(exc).__name__); sys.exit(0)
body = json.dumps({"v": "0.1.0", "op": "cli", "argv": ["exec", "id"], "tty": {}}).encode()
try:
    s.sendall(struct.pack(">I", len(body)) + body)
except OSError:
    pass  # the agent may have answered and hung up before we spoke: read its answer
try:
    n = struct.unpack(">I", s.recv(4))[0]
    print("REPLY", s.recv(n).decode())
except (OSError, struct.error) as exc:
    print("REPLY-ERROR", type(exc).__name__)
"""


def as_nobody(sock: str) -> str:
    return subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         sys.executable, "-I", "-c", RAW_CLIENT, sock],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout.strip()  # fmt: skip


def test_a_client_of_another_uid_is_refused(agent_env):
    env = agent_env("5m")
    assert hpcui(env, "exec", "true").returncode == 0
    sock = status(env)["socket"]
    # the 0700 directory keeps another user out before the agent is even asked
    assert as_nobody(sock) == "CONNECT PermissionError"
    # reachable by mistake (a hard link to the socket in an open folder, mode opened):
    # the agent itself refuses, by the kernel's word on the peer's uid (SO_PEERCRED)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hpcui-open-") as open_dir:
        os.chmod(open_dir, 0o755)
        exposed = os.path.join(open_dir, "agent.sock")
        os.link(sock, exposed)
        os.chmod(exposed, 0o777)
        try:
            said = as_nobody(exposed)
        finally:
            os.chmod(sock, 0o600)
    assert said.startswith("REPLY") and "refused" in said, said
    st = status(env)
    assert st["refused"] == 1 and st["running"]
    # and a directory others may enter is not used: this call connects by itself
    folder = Path(sock).parent
    folder.chmod(0o755)
    try:
        res = hpcui(env, "exec", "true")
    finally:
        folder.chmod(0o700)
    assert res.returncode == 0 and "not using the agent" in res.stderr and "chmod 700" in res.stderr


def test_garbage_on_the_socket_does_not_crash_the_agent(agent_env):
    import socket
    import struct

    env = agent_env("5m")
    assert hpcui(env, "exec", "true").returncode == 0
    st = status(env)
    for payload in (
        b"\x00\x00\x00\x05hello",  # not JSON
        struct.pack(">I", 2**31) + b"x",  # a frame over the limit
        b"\x00\x00\x00\x02[]",  # JSON, not an object
        b'\x00\x00\x00\x0f{"op": "what"}x',  # unknown request
        b"\x00\x00",  # half a header, then gone
    ):
        s = socket.socket(socket.AF_UNIX)
        s.connect(st["socket"])
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        try:
            s.recv(1024)  # an answer, or the agent hangs up
        except ConnectionResetError:
            pass
        s.close()
    after = status(env)
    assert after["pid"] == st["pid"]
    assert hpcui(env, "exec", "true").returncode == 0 and logins(env, "dev") == 1


def test_agent_killed_next_call_works(agent_env):
    env = agent_env("5m")
    assert hpcui(env, "exec", "true").returncode == 0
    st = status(env)
    os.kill(st["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(st["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert Path(st["socket"]).exists()  # a stale socket: the next call cleans it
    res = hpcui(env, "jobs", "--json")
    assert res.returncode == 0, res.stderr
    new = status(env)
    assert new["pid"] != st["pid"] and logins(env, "dev") == 1


def test_agent_killed_mid_command_says_so_and_never_repeats_it(agent_env):
    """`exec` changes things: when the agent dies while it runs, the client says the
    outcome is unknown (exit 3) instead of running it a second time."""
    env = agent_env("5m")
    assert hpcui(env, "exec", "true").returncode == 0
    st = status(env)
    marker = f"agent-kill-{os.getpid()}-{time.monotonic_ns()}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpcui.cli", "exec", "--", "sh", "-c",
         f"echo x >> /tmp/{marker}; sleep 4"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    time.sleep(2)
    os.kill(st["pid"], signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, (out, err)
    assert "went away" in err and "unknown" in err
    time.sleep(3)  # the remote command's own 4 s are over
    res = hpcui(env, "exec", "--", "sh", "-c", f"cat /tmp/{marker}; rm -f /tmp/{marker}")
    assert res.returncode == 0 and res.stdout.splitlines() == ["x"], res  # ran once


def test_twenty_concurrent_clients_one_agent_one_login(agent_env):
    env = agent_env("5m")

    def call(i: int) -> subprocess.CompletedProcess:
        return hpcui(env, "exec", "--", "echo", f"client-{i}", timeout=120)

    with ThreadPoolExecutor(max_workers=20) as pool:  # all 20 race to start the agent too
        results = list(pool.map(call, range(20)))
    for i, res in enumerate(results):
        assert res.returncode == 0 and res.stdout.strip() == f"client-{i}", res
    st = status(env)
    assert st["served"] >= 20 and logins(env, "dev") == 1
    agents = list((Path(env["XDG_RUNTIME_DIR"]) / "hpcui").glob("agent-*.sock"))
    assert len(agents) == 1


def test_agent_exits_persist_after_the_last_call(agent_env):
    env = agent_env("3s")
    assert hpcui(env, "exec", "true").returncode == 0
    st = status(env)
    assert st["persist_s"] == 3
    time.sleep(1.5)
    assert hpcui(env, "exec", "true").returncode == 0  # a use restarts the count
    used = time.monotonic()
    deadline = used + 20
    while alive(st["pid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    gone_after = time.monotonic() - used
    assert not alive(st["pid"]) and 3 <= gone_after < 10, gone_after
    assert not Path(st["socket"]).exists()
    assert status(env)["running"] is False


def test_config_change_replaces_the_agent(agent_env):
    env = agent_env("5m")
    assert hpcui(env, "exec", "true").returncode == 0
    old = status(env)["pid"]
    time.sleep(0.01)
    agent_env("4m")  # the config file is written again
    assert hpcui(env, "exec", "true").returncode == 0
    new = status(env)
    assert new["pid"] != old and new["persist_s"] == 240


def test_persist_zero_means_no_agent(agent_env):
    env = agent_env(0)
    res = hpcui(env, "exec", "whoami")
    assert res.returncode == 0 and res.stdout.strip() == "hpcuser"
    assert status(env)["running"] is False
    assert not list(Path(env["XDG_RUNTIME_DIR"]).rglob("*.sock"))
    off = {**agent_env("5m"), "HPCUI_AGENT": "off"}  # per call, for scripts
    assert hpcui(off, "exec", "true").returncode == 0
    assert status(env)["running"] is False


# -- API scripts and the app's connections: AgentTransport ----------------------------------


def add(a: int, b: int) -> int:
    print(f"adding {a}+{b}", flush=True)
    return a + b


@pytest.fixture
def api_via_agent(agent_env, monkeypatch):  # type: ignore[no-untyped-def]
    """This test process as an API script with the agent on (the suite runs without)."""
    from hpcui.clusters import api

    env = agent_env("5m")
    for key in ("XDG_RUNTIME_DIR", "HPCUI_CONFIG", "HPCUI_DATA_DIR"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.delenv("HPCUI_AGENT", raising=False)
    monkeypatch.setattr(api, "_clusters", {})
    yield env
    for cluster in api._clusters.values():
        cluster.close()


SCRIPT = (
    "import hpcui\n"
    "c = hpcui.connect({name!r})\n"
    "print(type(c.transport).__name__, c.run(['whoami']).check().stdout.strip())\n"
)


def script(env: dict[str, str], name: str) -> str:
    res = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(name=name)],
        env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_api_script_submits_through_the_agent_and_others_share_its_login(api_via_agent):
    import hpcui
    from hpcui.transport.agent.remote import AgentTransport

    env = api_via_agent
    cluster = hpcui.connect("dev")
    assert isinstance(cluster.transport, AgentTransport)
    job = cluster.submit(add, 20, 22, time="5m", name="agent-api")
    assert job.result(timeout=180) == 42
    text = "".join(chunk.text for chunk in cluster.logs(job, "stdout"))
    assert "adding 20+22" in text
    assert script(env, "dev") == "AgentTransport hpcuser"  # another process, same login
    assert hpcui_cli_result(env, job.job_id) == "42"
    assert logins(env, "dev") == 1


def hpcui_cli_result(env: dict[str, str], job_id: str) -> str:
    res = hpcui(env, "result", job_id)  # runs in its own process, on the agent's login
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_api_2fa_callback_is_asked_once_for_every_process(api_via_agent):
    import hpcui

    env = api_via_agent
    seed = (DEVCLUSTER / "ssh" / "totp_seed").read_text().strip()
    asked: list[str] = []

    def prompt(title: str, instructions: str, prompts: list[tuple[str, bool]]) -> list[str]:
        if not prompts:  # an info request with nothing to ask (servers send them)
            return []
        asked.append(prompts[0][0])
        code = subprocess.run(
            ["oathtool", "--totp", "-b", seed], capture_output=True, text=True, check=True
        ).stdout.strip()
        return [code for _ in prompts]

    cluster = hpcui.connect("dev-2fa", prompt=prompt)
    assert cluster.run(["whoami"]).check().stdout.strip() == "hpcuser"
    assert cluster.run(["true"]).ok
    assert len(asked) == 1, asked
    assert script(env, "dev-2fa") == "AgentTransport hpcuser"  # no callback there: none needed
    assert len(asked) == 1 and logins(env, "dev-2fa") == 1


def test_api_errors_keep_their_type_through_the_agent(api_via_agent):
    import hpcui
    from hpcui.errors import CommandTimeout

    t = hpcui.connect("dev").transport
    with pytest.raises(FileNotFoundError):
        t.read_file("/nonexistent/hpcui-agent")
    assert t.run(["sh", "-c", "echo out; echo err >&2; exit 3"]).exit_status == 3
    with pytest.raises(CommandTimeout):
        t.run(["sleep", "5"], timeout=0.5)
    data = os.urandom(5 * 1024 * 1024 + 7)  # over one chunk, not a multiple of it
    path = f"/tmp/hpcui-agent-{os.getpid()}.bin"
    assert t.write_file(path, [data[:1000], data[1000:]]) == len(data)
    try:
        assert t.read_file(path) == data
        assert t.read_file(path, offset=10, length=20) == data[10:30]
        assert t.stat_size(path) == len(data)
    finally:
        t.run(["rm", "-f", path])
    assert t.home() == "/home/hpcuser"


def test_api_call_after_the_agent_was_killed_starts_a_new_one(api_via_agent):
    import hpcui
    from hpcui.errors import ConnectionLost

    env = api_via_agent
    t = hpcui.connect("dev").transport
    assert t.run(["true"]).ok
    first = status(env)["pid"]
    os.kill(first, signal.SIGKILL)
    assert t.run(["true"]).ok  # transparently: the request had not reached it
    second = status(env)["pid"]
    assert second != first
    # killed while a command runs: it may have run, so it is not run again
    with ThreadPoolExecutor(1) as pool:
        fut = pool.submit(t.run, ["sleep", "3"])
        time.sleep(1)
        os.kill(second, signal.SIGKILL)
        with pytest.raises(ConnectionLost, match="may or may not"):
            fut.result(timeout=30)
    assert t.read_file("/etc/hostname")  # read-only calls are simply asked again


def lines(n: int) -> int:
    import time as _t

    for i in range(n):
        print(f"line {i}", flush=True)
        _t.sleep(0.3)
    return n


def test_the_app_through_the_agent_follows_a_log_and_shares_the_login(api_via_agent):
    """The app's connection is the agent's too: the Job screen follows the log (streamed
    through the agent), and a CLI call afterwards logs in no more."""
    import asyncio

    from hpcui.transport.agent.remote import AgentTransport
    from hpcui.tui.app import HpcuiApp
    from hpcui.tui.widgets import LogPanel
    from tests.integration.test_tui_dev import wait_for

    env = api_via_agent
    from hpcui.clusters.api import connect

    job = connect("dev").submit(lines, 8, time="5m", name="agent-tui")

    async def go() -> tuple[str, list[str]]:
        app = HpcuiApp("dev", connect=["dev"])
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: app.hub.conns["dev"].status == "connected", 60, "dev")
            kind = type(app.hub.conns["dev"].cluster.transport).__name__
            app.open_job("dev", job.job_id)
            await wait_for(pilot, lambda: bool(app.screen.query(LogPanel)), 30, "the Job screen")
            panel = app.screen.query_one(LogPanel)
            await wait_for(
                pilot,
                lambda: sum(ln.startswith("line ") for ln in panel.lines) == 8,
                120,
                lambda: f"log lines, got {panel.lines}",
            )
            return kind, list(panel.lines)

    kind, shown = asyncio.run(go())
    assert kind == AgentTransport.__name__
    assert [ln for ln in shown if ln.startswith("line ")] == [f"line {i}" for i in range(8)]
    assert job.result(timeout=120) == 8
    assert hpcui(env, "jobs", "--json").returncode == 0
    assert logins(env, "dev") == 1


def test_the_apps_shell_key_opens_the_shell_on_the_agents_login(api_via_agent):
    """`!` in the app with the agent on (the default): the pty session is opened through
    the agent (it said "not available over the agent" before). A headless Pilot has no
    terminal to hand over, so the app says so, closes the session, and the agent ends
    its side: no active request, still one login."""
    import asyncio

    from hpcui.clusters.api import connect
    from hpcui.tui.app import HpcuiApp
    from tests.integration.test_any_job import sbatch_script, wait_state
    from tests.integration.test_tui_dev import open_foreign_job, wait_for

    env = api_via_agent
    dev = connect("dev")  # through the agent as well: the same login
    job_id = sbatch_script(dev, "#!/bin/bash\nsleep 120\n", "--time=3")

    def said() -> list[str]:
        return [n.message for n in app._notifications]

    app = HpcuiApp("dev", connect=["dev"])

    async def go() -> list[str]:
        async with app.run_test(size=(160, 45)) as pilot:
            await open_foreign_job(pilot, app, job_id)
            await pilot.press("exclamation_mark")
            await wait_for(
                pilot,
                lambda: any("terminal" in m for m in said()),
                60,
                lambda: f"the shell's outcome, got {said()}",
            )
            return said()

    try:
        wait_state(dev, job_id, {JobState.RUNNING})
        messages = asyncio.run(go())
    finally:
        dev.control.cancel([job_id])
    assert any("No terminal to hand over here" in m for m in messages), messages
    assert not any("not available over" in m for m in messages), messages
    deadline = time.monotonic() + 20
    while status(env)["active"]:  # the app closed the session: the relay ended
        assert time.monotonic() < deadline, "the agent still serves the closed shell"
        time.sleep(0.2)
    assert logins(env, "dev") == 1


def test_the_agents_connection_reconnects_when_its_link_is_cut(api_via_agent):
    """The sshd serving the agent's connection is killed: the next call reconnects (as a
    direct connection would), still through the same agent."""
    from hpcui.clusters.api import connect
    from tests.conftest import session_sshd_pids

    env = api_via_agent
    t = connect("dev").transport
    pids = session_sshd_pids(lambda cmd: t.run(cmd))
    pid = status(env)["pid"]
    subprocess.run(["kill", "-9", *map(str, pids)], check=False)
    deadline = time.monotonic() + 60
    while True:  # the cut may surface as one lost command; the next one reconnects
        try:
            res = t.run(["whoami"])
            break
        except Exception:
            assert time.monotonic() < deadline
            time.sleep(0.5)
    assert res.stdout.strip() == "hpcuser"
    assert status(env)["pid"] == pid and logins(env, "dev") == 2


def test_a_client_of_another_hpcui_version_gets_a_new_agent(agent_env):
    import socket as _socket

    from hpcui.transport.agent import wire

    env = agent_env("5m")
    assert hpcui(env, "exec", "true").returncode == 0
    old = status(env)
    s = _socket.socket(_socket.AF_UNIX)
    s.connect(old["socket"])
    wire.send(s, {"v": "0.0.1", "op": "cli", "argv": ["exec", "true"], "tty": {}})
    assert wire.recv(s) == {"retry": "agent replaced"}  # it withdraws for the newer one
    s.close()
    assert hpcui(env, "exec", "true").returncode == 0
    assert status(env)["pid"] != old["pid"]


def test_agent_killed_while_sbatch_runs_gives_one_job(api_via_agent, monkeypatch):
    """The submit's command dies with the agent (ConnectionLost, as when a link drops):
    the submission finds its job by its token through a new agent — never two jobs."""
    import threading

    from hpcui.clusters import api
    from tests.integration import stand_ins
    from tests.integration.test_submit_faults import (
        CALLS,
        _assert_one_known_job,
        _hold,
        _name,
        _release,
        _wait_reached,
    )
    from tests.integration.test_submit_faults import add as plus

    env = api_via_agent
    with monkeypatch.context() as m:  # the stand-in sbatch and the gates: a direct link
        m.setenv("HPCUI_AGENT", "off")
        ctl = stand_ins.install("sbatch")
    api._clusters.clear()
    try:
        ctl.run("mkdir -p ~/faultgates").check()
        dev = api.connect("dev")  # through the agent, whose login shell sees ~/bin first
        assert dev.run(["sh", "-c", "command -v sbatch"]).stdout.strip().endswith("bin/sbatch")
        name = _name()
        _hold(ctl, name, "sbatch")
        box: dict = {}
        t = threading.Thread(target=lambda: box.update(jobs=dev.map(plus, *CALLS, name=name)))
        t.start()
        _wait_reached(ctl, name, "sbatch")
        os.kill(status(env)["pid"], signal.SIGKILL)
        time.sleep(0.2)
        _release(ctl, name)
        t.join(timeout=90)
        assert not t.is_alive() and "jobs" in box, "the submit did not come back"
        array = _assert_one_known_job(ctl, name)
        assert {j.job_id.split("_")[0] for j in box["jobs"]} == {array}
    finally:
        ctl.close()


def test_a_client_that_leaves_ends_its_command_in_the_agent(agent_env):
    """Ctrl-C on `hpcui logs -f` of a quiet job: the agent's copy of the command stopped
    only when it next wrote (for a silent job: when the job ended). Now the agent sees the
    hang-up and interrupts it; its login shells are not leaked (later calls still run)."""
    env = agent_env("5m")
    res = hpcui(env, "exec", "--", "sbatch", "--parsable", "--time=3", "--wrap", "sleep 150")
    assert res.returncode == 0, res.stderr
    job_id = res.stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 60  # a quiet RUNNING job (not the pending wait)
        while "RUNNING" not in hpcui(env, "show", job_id).stdout:
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(1)
        for _ in range(3):  # more than once: a leaked shell slot would show by the third
            proc = subprocess.Popen(
                [sys.executable, "-m", "hpcui.cli", "logs", job_id, "-f"],
                env={**env, "PYTHONFAULTHANDLER": "1"}, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                # Ctrl-C as a terminal gives it: a test earlier in this worker may have left
                # SIGINT ignored (a notebook kernel's library does), which the child inherits
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )  # fmt: skip
            deadline = time.monotonic() + 30
            while status(env)["active"] < 1:
                assert time.monotonic() < deadline, "the follow never reached the agent"
                time.sleep(0.3)
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.communicate(timeout=60)
            except subprocess.TimeoutExpired as exc:
                proc.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: every thread's stack
                _out, err = proc.communicate(timeout=20)
                raise AssertionError(f"Ctrl-C did not end the client:\n{err.decode()}") from exc
            deadline = time.monotonic() + 20
            while (active := status(env)["active"]) > 0:
                assert time.monotonic() < deadline, f"still {active} request(s) in the agent"
                time.sleep(0.3)
        assert hpcui(env, "jobs").returncode == 0
        shown = hpcui(env, "show", job_id)
        assert shown.returncode == 0 and "RUNNING" in shown.stdout
    finally:
        hpcui(env, "cancel", job_id)


def test_a_stopped_agent_is_gone_around_by_the_cli_and_the_api(api_via_agent, caplog):
    """The adversarial run froze the agent (SIGSTOP): `hpcui jobs` and result(timeout=10)
    waited 60 s. Now a call the agent does not take within ACK_S runs on the caller's own
    connection, said once; the caller's own time limit bounds what follows."""
    import logging

    from hpcui.clusters import api
    from hpcui.transport.agent.reach import ACK_S

    env = api_via_agent
    t = api.connect("dev").transport
    assert t.run(["true"]).ok  # the agent is up and serves this process
    pid = status(env)["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        jobs = hpcui(env, "jobs", "--json", timeout=90)
        cli_took = time.monotonic() - started
        assert jobs.returncode == 0 and isinstance(json.loads(jobs.stdout), list), jobs.stderr
        assert "did not answer" in jobs.stderr and "running this call here" in jobs.stderr
        with caplog.at_level(logging.WARNING, logger="hpcui.transport.agent.remote"):
            started = time.monotonic()
            assert t.run(["echo", "direct"]).check().stdout.strip() == "direct"
            api_took = time.monotonic() - started
            assert t.run(["true"]).ok  # from now on this process's own connection
        said = [r.getMessage() for r in caplog.records if "does not answer" in r.getMessage()]
        assert len(said) == 1, said
        # a frozen agent costs one ACK_S, not a minute (loose bounds: a login here is ~1 s)
        assert cli_took < ACK_S + 30 and api_took < ACK_S + 30, (cli_took, api_took)
    finally:
        os.kill(pid, signal.SIGCONT)


def test_an_edited_ssh_config_is_used_by_the_next_call(agent_env, tmp_path):
    """The adversarial run: an edited Port (a removed key, a jump host) stayed in use by
    the agent, even after a reconnect. The agent is replaced when a file its logins read
    changes, so the next call logs in with the new config."""
    env = agent_env("5m")
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text((DEVCLUSTER / "ssh" / "config").read_text())
    config = Path(env["HPCUI_CONFIG"])
    config.write_text(
        config.read_text().replace(str(DEVCLUSTER / "ssh" / "config"), str(ssh_config))
    )
    first = hpcui(env, "exec", "--", "true")
    assert first.returncode == 0, first.stderr
    pid = status(env)["pid"]
    time.sleep(1.1)  # mtimes in whole seconds on some filesystems
    ssh_config.write_text(ssh_config.read_text().replace("Port 2222", "Port 1", 1))
    moved = hpcui(env, "exec", "--", "true")
    assert moved.returncode == 3 and ":1" in moved.stderr, moved.stderr  # the new Port
    assert status(env)["pid"] != pid  # a new agent read it


def size_of(blob: bytes) -> int:
    return len(blob)


def test_a_30_mb_argument_goes_through_the_agent(api_via_agent):
    """The adversarial run: "frame ... over the 33554432 limit" where the direct path took
    it. Large files of an upload follow the request in chunks."""
    from hpcui.clusters import api
    from hpcui.transport.agent.remote import AgentTransport

    cluster = api.connect("dev")
    assert isinstance(cluster.transport, AgentTransport)
    blob = os.urandom(30 * 1024 * 1024)
    job = cluster.submit(size_of, blob, time="5m", mem="1G", name="agent-30mb")
    assert job.result(timeout=180) == len(blob)


def test_a_prompt_left_unanswered_elsewhere_does_not_hold_a_call_past_its_timeout(api_via_agent):
    """The adversarial run: another terminal's unanswered 2FA prompt held run(timeout=10)
    through the agent for 29.7 s. The caller's time limit now travels with the call and
    bounds the caller's own wait for the agent's answer (2 s margin)."""
    import threading

    from hpcui.clusters import api
    from hpcui.errors import CommandTimeout, HpcuiError
    from tests.support.pty_session import run_on_pty

    env = api_via_agent
    asked = threading.Event()

    def never_answer(seen: bytes) -> bytes | None:
        if seen.rstrip().endswith(b"code:"):
            asked.set()
        return None

    argv = [sys.executable, "-m", "hpcui.cli", "-c", "dev-2fa", "exec", "whoami"]
    other = threading.Thread(target=run_on_pty, args=(argv, env, never_answer, 25), daemon=True)
    other.start()
    assert asked.wait(30), "the other terminal was never asked its code"
    t = api.connect("dev-2fa", prompt=lambda *a: []).transport
    started = time.monotonic()
    with pytest.raises(HpcuiError) as err:
        t.run(["true"], timeout=10)
    took = time.monotonic() - started
    assert took < 10 + 2 + 5, (took, err.value)  # before: 29.7 s
    assert isinstance(err.value, CommandTimeout) or "time" in str(err.value).lower(), err.value
    other.join(60)


def quiet(seconds: float) -> None:
    import time as _t

    print("started", flush=True)
    _t.sleep(seconds)


def test_following_a_quiet_log_through_the_agent_ends_at_its_timeout(api_via_agent):
    """The adversarial run: `logs(follow=True, timeout=10)` through the agent returned after
    16-17 s (10 s direct). The caller's budget travels with each request now."""
    from hpcui.clusters import api
    from hpcui.logs.follow import LogTimeout

    cluster = api.connect("dev")
    job = cluster.submit(quiet, 90, time="5m", name="agent-quiet")
    try:
        deadline = time.monotonic() + 60
        while "started" not in job.stdout():
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.3)
        started = time.monotonic()
        with pytest.raises(LogTimeout):
            for _ in cluster.logs(job, "stdout", follow=True, timeout=10):
                pass
        took = time.monotonic() - started
        assert took < 10 + 3, took  # the budget, and the 2 s margin for the agent's answer
    finally:
        job.cancel()
