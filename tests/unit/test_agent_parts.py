"""The agent's pieces that need no cluster: which calls go to it, `persist`, the private
directory, frames, and the `[agent]` table of the config."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import pytest

from hpcui.agent import client
from hpcui.common import units
from hpcui.config import load_config
from hpcui.errors import ConfigError
from hpcui.transport.agent import paths, reach, wire


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["jobs", "--json"], "jobs"),
        (["-c", "dev", "quota"], "quota"),
        (["--cluster=dev", "exec", "true"], "exec"),
        (["-cdev", "modules"], "modules"),
        (["--debug", "jobs"], None),
        ([], None),
    ],
)
def test_command_of(argv, command):
    assert client.command_of(argv) == command


def test_which_calls_go_to_the_agent(monkeypatch):
    monkeypatch.delenv("HPCUI_AGENT", raising=False)
    assert client.wanted(["jobs", "--json"])
    assert client.wanted(["-c", "dev", "exec", "--", "true"])
    for argv in (
        ["submit", "m:f"],  # your module is imported here, not in the agent
        ["result", "12"],  # unpickled here
        ["jobs", "--debug"],
        ["jobs", "--help"],
        ["jobs", "--json-schema"],
        ["trust", "dev"],
        ["profiles", "local"],  # describes this machine: the caller's PATH and GPUs
        [],  # the app
    ):
        assert not client.wanted(argv), argv
    monkeypatch.setenv("HPCUI_AGENT", "off")
    assert not client.wanted(["jobs"])


def test_calls_on_a_cluster_without_host_are_left_to_the_caller(tmp_path, monkeypatch):
    from hpcui.agent.this_machine import local_clusters

    cfg = tmp_path / "hpcui.toml"
    cfg.write_text(
        'default = "hpc"\n[clusters.hpc]\nhost = "login.example"\n[clusters.box]\n'
        'profile = "local"\n'
    )
    monkeypatch.setenv("HPCUI_CONFIG", str(cfg))
    assert local_clusters(["jobs"]) == []  # the default is remote: the agent serves it
    assert local_clusters(["jobs", "-c", "box"]) == ["box"]
    assert local_clusters(["jobs", "--cluster=hpc,box"]) == ["box"]
    assert local_clusters(["show", "box:12"]) == ["box"]
    assert local_clusters(["logs", "-cbox", "3"]) == ["box"]
    assert local_clusters(["jobs", "-c", "all"]) == []  # the remote ones share the login
    assert local_clusters(["exec", "-c", "hpc", "--", "echo", "box:1"]) == []
    cfg.write_text('default = "box"\n[clusters.box]\nprofile = "local"\n')
    assert local_clusters(["jobs"]) == ["box"]


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (0, 0),
        (90, 90),
        (1.5, 1.5),
        ("10m", 600),
        ("90s", 90),
        ("2h", 7200),
        ("1d", 86400),
    ],
)
def test_persist_seconds(value, seconds):
    assert units.persist_seconds(value) == seconds


@pytest.mark.parametrize("value", ["ten minutes", "-1", -5, True, [1], "5x"])
def test_persist_rejects_what_is_not_a_duration(value):
    with pytest.raises(ValueError, match="persist"):
        units.persist_seconds(value)


def test_config_agent_table(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[agent]\npersist = "2m"\n')
    assert load_config(p).agent.persist_s == 120
    p.write_text("")
    assert load_config(p).agent.persist_s == 600  # the default
    p.write_text('[agent]\npersist = "soon"\n')
    with pytest.raises(ConfigError, match=r"agent\.persist.*10m"):
        load_config(p)
    p.write_text("[agent]\npersists = 5\n")
    with pytest.raises(ConfigError, match="persists"):
        load_config(p)


def test_client_reads_persist_without_pydantic(tmp_path, monkeypatch):
    p = tmp_path / "c.toml"
    monkeypatch.setenv("HPCUI_CONFIG", str(p))
    p.write_text("[agent]\npersist = 0\n")
    assert reach.persist_s() == 0
    p.write_text('[agent]\npersist = "5m"\n')
    assert reach.persist_s() == 300
    p.write_text("not toml [")
    assert reach.persist_s() == reach.DEFAULT_PERSIST_S  # the direct path reports it


def test_private_dir_is_made_0700_and_an_open_one_refused(tmp_path):
    d = tmp_path / "run"
    assert paths.private_dir(str(d), create=True)
    assert (d.stat().st_mode & 0o777) == 0o700
    d.chmod(0o750)
    with pytest.raises(paths.UnsafeDirectory, match="chmod 700"):
        paths.private_dir(str(d), create=False)
    assert not paths.private_dir(str(tmp_path / "absent"), create=False)


def test_one_agent_per_config_data_and_home(tmp_path):
    base = {"HOME": str(tmp_path), "HPCUI_CONFIG": str(tmp_path / "a.toml")}
    other = {**base, "HPCUI_CONFIG": str(tmp_path / "b.toml")}
    assert paths.socket_path(base) != paths.socket_path(other)
    assert paths.socket_path(base) == paths.socket_path(dict(base))
    import shutil
    import tempfile
    from pathlib import Path

    run = Path(tempfile.mkdtemp(prefix="hpx-"))  # short enough for AF_UNIX
    try:
        got = paths.socket_path({**base, "XDG_RUNTIME_DIR": str(run)})
    finally:
        shutil.rmtree(run)
    assert got.startswith(str(run / "hpcui"))
    deep = {**base, "HOME": str(tmp_path / ("d" * 120))}  # over the AF_UNIX limit
    assert paths.socket_path(deep).startswith(f"/tmp/hpcui-{os.getuid()}/")


def test_frames_round_trip_and_garbage_is_refused():
    a, b = socket.socketpair()
    wire.send(a, {"op": "status", "x": "é"})
    assert wire.recv(b) == {"op": "status", "x": "é"}
    a.sendall(struct.pack(">I", wire.MAX_FRAME + 1))
    with pytest.raises(wire.WireError, match="limit"):
        wire.recv(b)
    a.sendall(b"\x00\x00\x00\x03[1]")
    with pytest.raises(wire.WireError, match="object"):
        wire.recv(b)
    a.close()
    with pytest.raises(wire.WireError, match="closed"):
        wire.recv(b)


def test_the_thin_client_imports_neither_pydantic_nor_paramiko():
    import subprocess
    import sys

    code = (
        "import sys, hpcui.agent.client\n"
        "print(','.join(m for m in ('pydantic', 'paramiko', 'argparse', 'textual') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_the_config_file_has_one_place_for_every_face(monkeypatch, tmp_path):
    """The thin client (standard library only) and the core find the same config file:
    platformdirs' answer on this platform, XDG_CONFIG_HOME honoured, HPCUI_CONFIG first."""
    from platformdirs import user_config_dir

    from hpcui.config import config_path
    from hpcui.transport.agent import reach

    monkeypatch.delenv("HPCUI_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_path() == Path(user_config_dir("hpcui")) / "config.toml"
    assert config_path() == tmp_path / "xdg" / "hpcui" / "config.toml"
    config_path().parent.mkdir(parents=True)
    config_path().write_text('[agent]\npersist = "90s"\n')
    assert reach.persist_s() == 90
    monkeypatch.setenv("HPCUI_CONFIG", str(tmp_path / "other.toml"))
    (tmp_path / "other.toml").write_text("[agent]\npersist = 0\n")
    assert config_path() == tmp_path / "other.toml" and reach.persist_s() == 0


def test_a_terminal_relayed_by_the_agent_reads_frames_and_its_end():
    """The client side of `hpcui shell` through the agent (remote._Terminal) on a real
    socket pair: output frames come back as bytes, keys and window sizes go out as frames,
    the exit frame ends it with its status, an agent error is raised as its own class, and
    a vanished agent reads as ssh's 255."""
    from hpcui.agent.calls import describe
    from hpcui.errors import UsageError
    from hpcui.transport.agent.remote import _Terminal

    agent, mine = socket.socketpair()
    term = _Terminal(mine)
    wire.send(agent, {"o": wire.b64(b"")})  # an empty output frame is skipped
    wire.send(agent, {"o": wire.b64(b"prompt$ ")})
    assert term.recv(65536) == b"prompt$ " and not term.exit_status_ready()
    term.sendall(b"exit 3\r")
    term.resize_pty(width=120, height=40)
    assert wire.recv(agent) == {"k": wire.b64(b"exit 3\r")}
    assert wire.recv(agent) == {"size": [120, 40]}
    wire.send(agent, {"exit": 3})
    assert term.recv(65536) == b"" and term.exit_status_ready() and term.recv_exit_status() == 3
    term.sendall(b"late keys")  # after the end: dropped, not an error
    term.close()
    agent.close()

    agent, mine = socket.socketpair()
    term = _Terminal(mine)
    wire.send(
        agent, {"error": describe(UsageError("Job 7 is PENDING: a shell needs a running job"))}
    )
    with pytest.raises(UsageError, match="needs a running job"):
        term.recv(65536)
    agent.close()
    term.close()

    agent, mine = socket.socketpair()
    term = _Terminal(mine)
    term.close()  # the user left first: the agent is told to close the session
    assert wire.recv(agent) == {"close": True}
    agent.close()

    agent, mine = socket.socketpair()
    term = _Terminal(mine)
    agent.close()  # the agent went away mid-session
    assert term.recv(65536) == b"" and term.recv_exit_status() == _Terminal.LOST == 255
    term.close()


def test_peer_uid_uses_local_peercred_on_macos(monkeypatch):
    """macOS has no SO_PEERCRED: the check reads LOCAL_PEERCRED's struct xucred (what
    getpeereid(3) reads). Simulated: the kernel's answer is packed as macOS packs it."""
    import sys as _sys

    from hpcui.agent import server

    monkeypatch.delattr(socket, "SO_PEERCRED", raising=False)
    monkeypatch.setattr(_sys, "platform", "darwin")
    asked = []

    class Conn:
        def getsockopt(self, level, opt, size):  # type: ignore[no-untyped-def]
            asked.append((level, opt, size))
            return server.XUCRED.pack(0, 501, 1, 20, *[0] * 15)

    assert server.peer_uid(Conn()) == 501  # type: ignore[arg-type]
    assert asked == [(0, 1, 76)]  # SOL_LOCAL, LOCAL_PEERCRED, sizeof(struct xucred)
    monkeypatch.setattr(_sys, "platform", "win32")
    assert server.peer_uid(Conn()) is None  # no call of its own there (and no agent)


def test_file_lock_without_flock_or_msvcrt(monkeypatch, tmp_path):
    from hpcui.common import file_lock

    monkeypatch.setattr(file_lock, "fcntl", None)
    monkeypatch.setattr(file_lock, "msvcrt", None)
    path = tmp_path / "spool"
    with open(path, "ab") as one, open(path, "ab") as two:
        with file_lock.locked(one, path):
            assert (tmp_path / "spool.lockdir").is_dir()
            with pytest.raises(file_lock.LockBusy), file_lock.locked(two, path, wait=False):
                pass
        with file_lock.locked(two, path, wait=False):  # released: free again
            pass
    assert not (tmp_path / "spool.lockdir").exists()


def test_a_hang_up_waits_while_the_command_is_inside_the_connections_code():
    """The interrupt of a command whose client left must not land in paramiko, where a
    lock taken before its `try` would stay held: a thread blocked in paramiko's own
    buffered pipe is inside it, one asleep in hpcui's command code is not."""
    import threading
    import time

    from paramiko.buffered_pipe import BufferedPipe

    from hpcui.agent.server import in_connection_code

    pipe = BufferedPipe()
    inside = threading.Thread(target=lambda: pipe.read(10, timeout=2), daemon=True)
    outside = threading.Thread(target=lambda: time.sleep(2), daemon=True)
    inside.start()
    outside.start()
    time.sleep(0.2)
    assert in_connection_code(inside.ident)
    assert not in_connection_code(outside.ident)
    pipe.close()
