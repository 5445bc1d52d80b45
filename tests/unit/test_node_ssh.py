"""The ssh side of a job's node, without a cluster: the Host entries hpcui writes are read
by OpenSSH itself (`ssh -G`), the Include line is added once with a backup, the proxy's
arguments and its byte relay (real pipes and sockets)."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from hpcui.services import node_ssh
from hpcui.transport.agent import relay


def entry(**kw: object) -> node_ssh.NodeHost:
    base = dict(alias="hpcui-dev-2fa-42", cluster="dev-2fa", job_id="42", node="node1",
                user="hpcuser", identity_files=("/keys/id_ed25519",),
                key_alias="hpcui-dev-2fa.node1", pinned=True)  # fmt: skip
    return node_ssh.NodeHost(**{**base, **kw})  # type: ignore[arg-type]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def ssh_g(config: Path, host: str) -> dict[str, str]:
    """What OpenSSH makes of `host` in `config` (ssh -G: resolved, nothing connected)."""
    out = subprocess.run(
        ["ssh", "-G", "-F", str(config), host], capture_output=True, text=True, check=True
    ).stdout
    return {k: v for k, _, v in (line.partition(" ") for line in out.splitlines())}


def test_openssh_reads_each_entry_as_complete(home: Path) -> None:
    text = node_ssh.render([entry(), entry(alias="hpcui-dev-2fa-43", job_id="43", pinned=False)])
    cfg = home / "cfg"
    cfg.write_text(text)
    seen = ssh_g(cfg, "hpcui-dev-2fa-42")
    assert seen["hostname"] == "node1" and seen["user"] == "hpcuser"
    assert seen["identityfile"] == "/keys/id_ed25519" and seen["identitiesonly"] == "yes"
    assert seen["hostkeyalias"] == "hpcui-dev-2fa.node1"
    assert seen["stricthostkeychecking"] == "true"
    assert seen["userknownhostsfile"] == str(home / ".ssh" / "hpcui" / "known_hosts")
    # OpenSSH's own client to the agent's mux socket first, `hpcui proxy` when it fails
    assert " -W %h:%p hpcui-agent 2>/dev/null || exec " in seen["proxycommand"]
    assert seen["proxycommand"].endswith("proxy dev-2fa 42'")
    assert ssh_g(cfg, "hpcui-dev-2fa-43")["stricthostkeychecking"] == "accept-new"


def test_a_job_id_or_node_that_could_inject_is_refused() -> None:
    with pytest.raises(node_ssh.UsageError, match="cannot name an ssh host"):
        node_ssh.key_alias("dev", "node1\n    ProxyCommand evil")
    with pytest.raises(node_ssh.UsageError):
        node_ssh._check("42; rm -rf ~", "Job id")


def test_proxy_command_carries_the_config_and_doubles_percent(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    for var in node_ssh.CARRIED_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HPCUI_CONFIG", "/my 100%/hpcui.toml")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    line = node_ssh.proxy_command("dev", "42")
    assert "HPCUI_CONFIG=/my 100%%/hpcui.toml" in line  # quoted, its % doubled for ssh
    assert f"XDG_RUNTIME_DIR={tmp_path} " in line
    assert f"ControlPath={tmp_path}/hpcui/agent-" in line  # that environment's agent
    assert line.endswith("proxy dev 42'")


def test_include_is_added_once_at_the_top_with_a_backup(home: Path) -> None:
    ssh = home / ".ssh"
    ssh.mkdir()
    (ssh / "config").write_text("Host old\n    User me\n")
    node_ssh.remember("dev-2fa", [entry()], replace=True)
    first = node_ssh.install()
    assert first.include_added and first.backup is not None
    assert first.backup.read_text() == "Host old\n    User me\n"
    text = (ssh / "config").read_text()
    assert text.index("Include hpcui/config") < text.index("Host old")
    again = node_ssh.install()
    assert not again.include_added and again.backup is None
    assert (ssh / "config").read_text().count("Include hpcui/config") == 1
    assert oct((ssh / "hpcui" / "config").stat().st_mode & 0o777) == "0o600"
    assert ssh_g(ssh / "config", "hpcui-dev-2fa-42")["hostname"] == "node1"  # through Include


def test_remember_replaces_one_clusters_entries_and_keeps_the_others(home: Path) -> None:
    node_ssh.remember("dev-2fa", [entry()], replace=True)
    node_ssh.remember("dev", [entry(alias="hpcui-dev-7", cluster="dev", job_id="7")], replace=True)
    node_ssh.remember("dev-2fa", [], replace=True, track=True)  # its job ended
    assert [e.alias for e in node_ssh.remembered()] == ["hpcui-dev-7"]
    assert node_ssh.installed_clusters() == {"dev-2fa"}  # kept while it has no job
    assert "Host hpcui-dev-7\n" in node_ssh.hosts_file().read_text()
    assert "hpcui-dev-2fa-42" not in node_ssh.hosts_file().read_text()


def test_writers_at_once_lose_no_entry(home: Path) -> None:
    """The agent's keeper and a command write the state at the same time: each entry that
    one of them added is still there after both."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    aliases = [f"hpcui-dev-{n}" for n in range(16)]
    workers = [
        ctx.Process(
            target=node_ssh.remember,
            args=("dev", [entry(alias=a, cluster="dev", job_id=a.rsplit("-", 1)[1])]),
            kwargs={"replace": False},
        )
        for a in aliases
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    assert sorted(e.alias for e in node_ssh.remembered()) == sorted(aliases)
    text = node_ssh.hosts_file().read_text()
    assert all(f"Host {a}\n" in text for a in aliases)


@pytest.mark.parametrize(
    ("words", "parsed"),
    [
        (["dev", "42"], relay.ProxyArgs("dev", "42", 22, False)),
        (["--fdpass", "dev:42"], relay.ProxyArgs("dev", "42", 22, True)),
        (["--port", "2200", "dev", "42"], relay.ProxyArgs("dev", "42", 2200, False)),
        (["dev"], None),
        (["--port", "x", "dev", "42"], None),
        (["-c", "dev", "42"], None),
    ],
)
def test_the_thin_proxy_parses_only_its_own_form(words: list[str], parsed: object) -> None:
    assert relay.parse(words) == parsed


def test_relay_carries_both_ways_and_passes_the_end_of_input_on() -> None:
    """stdin's end reaches the far side as a half-close; its answer still comes back."""
    near, far = socket.socketpair()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    blob = os.urandom(3 * 1024 * 1024)

    def far_side() -> None:
        got = bytearray()
        while chunk := far.recv(65536):
            got += chunk
        far.sendall(bytes(reversed(got[-10:])) + b"|" + str(len(got)).encode())
        far.close()

    def feed() -> None:
        with os.fdopen(in_w, "wb") as w:
            w.write(blob)

    threads = [threading.Thread(target=far_side), threading.Thread(target=feed)]
    for t in threads:
        t.start()
    relay.relay(near, in_r, out_w)
    os.close(out_w)
    with os.fdopen(out_r, "rb") as r:
        answer = r.read()
    for t in threads:
        t.join(10)
    assert answer == bytes(reversed(blob[-10:])) + b"|" + str(len(blob)).encode()


def test_the_agent_sees_no_change_when_only_the_include_line_was_added(home: Path) -> None:
    """Adding the Include line must not replace the agent (its 2FA login would be asked
    again); an edit of the user's own lines must."""
    config = home / ".ssh" / "config"
    config.parent.mkdir()
    config.write_text("Host old\n    User me\n")
    before = node_ssh.without_own_lines(config.read_text())
    node_ssh.ensure_include()
    assert node_ssh.without_own_lines(config.read_text()) == before
    config.write_text(config.read_text().replace("User me", "User you"))
    assert node_ssh.without_own_lines(config.read_text()) != before


def test_a_new_config_holding_only_the_include_line_is_no_change(home: Path) -> None:
    from hpcui.agent.server import config_stamp

    before = config_stamp()
    node_ssh.ensure_include()
    assert (home / ".ssh" / "config").exists()
    assert config_stamp() == before


def test_this_machine_needs_no_ssh_entry() -> None:
    from hpcui.clusters.cluster import Cluster
    from hpcui.config import ClusterConfig

    with pytest.raises(node_ssh.UsageError, match="is this machine"):
        node_ssh.hosts(Cluster(ClusterConfig(name="local")), {"1": "here"})


def echo_server() -> tuple[socket.socket, int]:
    """A TCP server on 127.0.0.1 that sends back what it gets, upper-cased."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data.upper())

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


def mux_ssh(path: Path, target: str, data: bytes) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ssh", "-F", "/dev/null", "-o", "ControlMaster=no", "-o", f"ControlPath={path}",
         "-o", "ProxyCommand=false", "-W", target, "hpcui-agent"],
        input=data, capture_output=True, timeout=30,
    )  # fmt: skip


def test_openssh_forwards_its_stdio_through_the_agents_mux_socket(tmp_path: Path) -> None:
    """The real OpenSSH client (`ssh -S ... -W`) speaks to hpcui.agent.mux: hello, alive
    check, its stdin/stdout handed over, bytes both ways, exit 0 at the end."""
    from hpcui.agent.mux import MuxListener

    server, port = echo_server()
    asked: list[tuple[str, int]] = []

    def open_tunnel(host: str, to: int) -> socket.socket:
        asked.append((host, to))
        return socket.create_connection(("127.0.0.1", port))

    listener = MuxListener(str(tmp_path / "m.sock"), open_tunnel)
    try:
        blob = os.urandom(1024 * 1024).hex().encode()
        res = mux_ssh(tmp_path / "m.sock", "node7:22", blob)
        assert res.returncode == 0, res.stderr
        assert res.stdout == blob.upper()
        assert asked == [("node7", 22)]
    finally:
        listener.close()
        server.close()
    assert not (tmp_path / "m.sock").exists()


def test_a_tunnel_the_agent_cannot_open_fails_the_client_with_the_reason(tmp_path: Path) -> None:
    from hpcui.agent.mux import MuxListener

    def refuse(host: str, port: int) -> socket.socket:
        raise node_ssh.UsageError(f"{host}:{port} is not reachable")

    listener = MuxListener(str(tmp_path / "m.sock"), refuse)
    try:
        res = mux_ssh(tmp_path / "m.sock", "node7:22", b"")
    finally:
        listener.close()
    assert res.returncode == 255  # the fallback (`|| exec hpcui proxy`) then runs
    assert b"hpcui: node7:22 is not reachable" in res.stderr


def test_the_far_side_closing_ends_the_client_though_its_stdin_stays_open(tmp_path: Path) -> None:
    """A node that refuses a user closes the connection at once, while ssh keeps its end
    open: the agent must end the session then, or the user's ssh would hang."""
    from hpcui.agent.mux import MuxListener

    server = socket.create_server(("127.0.0.1", 0))

    def refuse() -> None:
        conn, _ = server.accept()
        conn.sendall(b"refused\n")
        conn.close()

    threading.Thread(target=refuse, daemon=True).start()
    port = server.getsockname()[1]
    listener = MuxListener(
        str(tmp_path / "m.sock"), lambda host, to: socket.create_connection(("127.0.0.1", port))
    )
    proc = subprocess.Popen(
        ["ssh", "-F", "/dev/null", "-o", "ControlMaster=no", "-o",
         f"ControlPath={tmp_path / 'm.sock'}", "-o", "ProxyCommand=false", "-W", "n:22", "x"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.read() == b"refused\n"  # EOF came: the session ended
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
        proc.communicate()
        listener.close()
        server.close()
