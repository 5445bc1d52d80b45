"""The SSH transport against the dev cluster's real sshd instances."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from hpcui.errors import (
    AuthenticationError,
    ClusterConnectionError,
    ConnectionLost,
    HostKeyError,
)
from hpcui.transport.ssh.session import SshTransport
from tests.conftest import DEVCLUSTER, session_sshd_pids

pytestmark = pytest.mark.devcluster
SSH_CONFIG = str(DEVCLUSTER / "ssh" / "config")


def _transport(host: str = "hpcui-dev", **kw) -> SshTransport:
    return SshTransport.from_config(host, ssh_config=SSH_CONFIG, **kw)


def _server_fingerprint(name: str) -> str:
    pub = DEVCLUSTER / "ssh" / f"host_{name}_ed25519.pub"
    out = subprocess.run(
        ["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True, check=True
    )
    return out.stdout.split()[1]


def test_run_separates_streams_and_exit_status(devcluster):
    with _transport() as t:
        res = t.run("echo out; echo err >&2; exit 7")
        assert (res.exit_status, res.stdout, res.stderr) == (7, "out\n", "err\n")
        assert t.run(["whoami"]).stdout.strip() == "hpcuser"
        # A syntax error or `exit` in one command does not kill the persistent shell.
        assert t.run("if then fi").exit_status != 0
        assert t.run("cd /tmp; exit 0").ok
        assert t.run("pwd").stdout.strip() == "/home/hpcuser"
        assert t.connects == 1


def test_large_output_on_both_streams_does_not_deadlock(devcluster):
    with _transport() as t:
        res = t.run(
            "head -c 30000000 /dev/zero | tr '\\0' o & head -c 20000000 /dev/zero | tr '\\0' e >&2; wait",
            timeout=120,
        )
        assert res.ok
        assert len(res.stdout_bytes) == 30_000_000 and set(res.stdout_bytes) == {ord("o")}
        assert len(res.stderr_bytes) == 20_000_000 and set(res.stderr_bytes) == {ord("e")}


HOSTILE = [
    "it's",
    'say "hi"',
    "a;touch /tmp/hpcui-pwned",
    "$(touch /tmp/hpcui-pwned)",
    "`touch /tmp/hpcui-pwned`",
    "line1\nline2\n",
    "*",
    "-n",
    "--",
    "$HOME",
    "\\",
    "",
    " lead and trail ",
    "tab\there",
    "||",
    "&&",
    b"\xff\xfe not utf-8 \x80",
    "ünïcödé ☃",
    "a'\"'\"'b",
]


def test_hostile_arguments_arrive_verbatim_and_run_nothing(devcluster):
    with _transport() as t:
        t.run(["rm", "-f", "/tmp/hpcui-pwned"]).check()
        res = t.run(["printf", "%s\\0", *HOSTILE]).check()
        got = res.stdout_bytes.split(b"\0")[:-1]
        want = [h if isinstance(h, bytes) else h.encode() for h in HOSTILE]
        assert got == want
        assert t.run(["test", "-e", "/tmp/hpcui-pwned"]).exit_status == 1
        # The same strings as file names through SFTP and through the one-stream upload.
        for i, h in enumerate(x for x in HOSTILE if isinstance(x, str) and "/" not in x and x):
            assert t.run(["sh", "-c", 'printf %s "$1" > "/tmp/hpcui-h-$2"', "sh", h, str(i)]).ok
            assert t.read_file(f"/tmp/hpcui-h-{i}") == h.encode()


def test_files_sftp_offsets_and_one_stream_upload(devcluster):
    data = bytes(range(256)) * 20000  # ~5 MB
    with _transport() as t:
        base = t.run("mktemp -d").check().stdout.strip()
        assert t.write_file(f"{base}/blob", data) == len(data)
        assert t.stat_size(f"{base}/blob") == len(data)
        assert t.read_file(f"{base}/blob") == data
        assert t.read_file(f"{base}/blob", offset=4_000_000) == data[4_000_000:]
        assert t.read_file(f"{base}/blob", offset=10, length=5) == data[10:15]
        assert t.stat_size(f"{base}/missing") is None
        big = bytes(range(251)) * 50_000  # ~12 MB: streamed through a channel, not SFTP
        assert t.write_file(f"{base}/big", big, mode=0o640) == len(big)
        assert t.run(["stat", "-c", "%a %s", f"{base}/big"]).stdout.split() == [
            "640",
            str(len(big)),
        ]
        assert t.read_file(f"{base}/big") == big
        assert (
            t.read_file(f"{base}/big", offset=1_000_001, length=9_000_000)
            == big[1_000_001:10_000_001]
        )
        files = {f"d/f{i}.txt": f"content {i}".encode() for i in range(50)}
        res = t.put_files(base, files, then=["cat", f"{base}/d/f49.txt"])
        assert res.stdout == "content 49"
        assert t.run(["sh", "-c", f"ls {base}/d | wc -l"]).stdout.strip() == "50"
        t.run(["rm", "-rf", base]).check()


def test_unknown_host_key_is_refused_with_fingerprint(devcluster, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    t = _transport(known_hosts=str(empty))
    with pytest.raises(HostKeyError) as err:
        t.run("true")
    fp = _server_fingerprint("main")
    assert err.value.fingerprint == fp
    assert fp in str(err.value) and "[127.0.0.1]:2222" in str(err.value)
    assert "hpcui trust" in str(err.value)
    assert empty.read_text() == ""  # never auto-added


def test_unknown_host_key_accepted_by_callback_is_written(devcluster, tmp_path):
    kh = tmp_path / "known_hosts"
    seen = []
    t = _transport(known_hosts=str(kh), on_unknown_host=lambda *a: seen.append(a) or True)
    assert t.run("echo ok").stdout == "ok\n"
    assert seen == [("[127.0.0.1]:2222", "ssh-ed25519", _server_fingerprint("main"))]
    assert kh.read_text().startswith("[127.0.0.1]:2222 ssh-ed25519 ")
    t.close()
    # From now on it is known: no callback needed.
    with _transport(known_hosts=str(kh)) as t2:
        assert t2.run("echo again").ok


def test_changed_host_key_is_refused(devcluster, tmp_path):
    other = (DEVCLUSTER / "ssh" / "host_jump_ed25519.pub").read_text().split()
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:2222 {other[0]} {other[1]}\n")
    with pytest.raises(HostKeyError, match="HOST KEY CHANGED") as err:
        _transport(known_hosts=str(kh)).run("true")
    assert "ssh-keygen -R" in str(err.value)


def test_wrong_key_is_refused_clearly(devcluster):
    t = _transport(identity_file=str(DEVCLUSTER / "ssh" / "wrong_ed25519"))
    with pytest.raises(AuthenticationError, match="refused our credentials") as err:
        t.run("true")
    assert "wrong_ed25519" in str(err.value)


def _totp() -> str:
    seed = (DEVCLUSTER / "ssh" / "totp_seed").read_text().strip()
    return subprocess.run(
        ["oathtool", "--totp", "-b", seed], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_two_factor_keyboard_interactive_prompt(devcluster):
    prompts = []

    def answer(title, instructions, questions):
        prompts.append([q for q, _echo in questions])
        return [_totp() for _ in questions]

    with _transport("hpcui-2fa", prompt=answer) as t:
        assert t.run("whoami").stdout.strip() == "hpcuser"
    assert prompts and "code" in prompts[0][0].lower()


def test_two_factor_without_prompt_fails_clearly(devcluster):
    with pytest.raises(AuthenticationError, match="cannot prompt"):
        _transport("hpcui-2fa").run("true")


def test_two_factor_wrong_code_fails_clearly(devcluster):
    with pytest.raises(AuthenticationError):
        _transport("hpcui-2fa", prompt=lambda t, i, qs: ["000000" for _ in qs]).run("true")


def test_proxyjump_through_second_sshd(devcluster):
    with _transport("hpcui-via-jump") as t:
        assert t.run("echo $SSH_CONNECTION").ok
        assert t._jump is not None and t._jump.target.port == 2223
        assert t._jump._conn is not None and t._jump._conn.is_active()
        # The target saw the connection come from the jump host's tunnel.
        conn = t.run("echo $SSH_CONNECTION").stdout.split()
        assert conn[2:] == ["127.0.0.1", "2222"]


def _kill_session_sshd(t: SshTransport, pids: list[int] | None = None) -> None:
    """SIGKILL the per-connection sshd serving `t` (`pids`: found earlier)."""
    subprocess.run(["kill", "-9", *map(str, pids or session_sshd_pids(t.run))], check=False)


def test_killed_connection_reconnects_on_next_call(devcluster):
    with _transport() as t:
        assert t.run("echo one").ok
        _kill_session_sshd(t)
        time.sleep(0.3)
        deadline = time.monotonic() + 20
        while True:  # the first call may still see the dying connection
            try:
                assert t.run("echo two").stdout == "two\n"
                break
            except ConnectionLost:
                assert time.monotonic() < deadline
        assert t.connects == 2


def test_command_interrupted_by_drop_raises_connection_lost(devcluster):
    with _transport() as t:
        assert t.run("true").ok
        session = int(t.run("echo $PPID").stdout.strip())
        killer = threading.Timer(1.0, lambda: subprocess.run(["kill", "-9", str(session)]))
        killer.start()
        with pytest.raises(ConnectionLost, match="may or may not have run"):
            t.run("sleep 20")
        killer.join()
        assert t.run("echo back").stdout == "back\n"


def test_ssh_config_include_and_alias(devcluster, tmp_path):
    """`Include` (which paramiko lacks) is expanded in place; the alias resolves through it."""
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "dev.conf").write_text((DEVCLUSTER / "ssh" / "config").read_text())
    main = tmp_path / "config"
    main.write_text(f"Include {tmp_path}/conf.d/*.conf\n")
    t = SshTransport.from_config("hpcui-dev", ssh_config=str(main))
    assert (t.target.hostname, t.target.port, t.target.user) == ("127.0.0.1", 2222, "hpcuser")
    with t:
        assert t.run("whoami").stdout.strip() == "hpcuser"


def test_ssh_agent_key_is_used(devcluster, tmp_path, monkeypatch):
    """No IdentityFile at all: the key comes from a real ssh-agent."""
    out = subprocess.run(
        ["ssh-agent", "-s", "-a", str(tmp_path / "agent.sock")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    pid = int(out.split("SSH_AGENT_PID=")[1].split(";")[0])
    try:
        env = {"SSH_AUTH_SOCK": str(tmp_path / "agent.sock"), "PATH": "/usr/bin:/bin"}
        subprocess.run(
            ["ssh-add", str(DEVCLUSTER / "ssh" / "id_ed25519")],
            env=env,
            check=True,
            capture_output=True,
        )
        monkeypatch.setenv("SSH_AUTH_SOCK", env["SSH_AUTH_SOCK"])
        monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/id_* fallbacks
        cfg = tmp_path / "config"
        cfg.write_text(
            "Host agentdev\n  HostName 127.0.0.1\n  Port 2222\n  User hpcuser\n"
            f"  UserKnownHostsFile {DEVCLUSTER}/ssh/known_hosts\n"
        )
        t = SshTransport.from_config("agentdev", ssh_config=str(cfg))
        assert t.target.identity_files == ()
        with t:
            assert t.run("whoami").stdout.strip() == "hpcuser"
    finally:
        subprocess.run(["kill", str(pid)], check=False)


def _host_key(name: str = "main") -> str:
    return " ".join((DEVCLUSTER / "ssh" / f"host_{name}_ed25519.pub").read_text().split()[:2])


def test_cert_authority_and_revoked_lines_do_not_break_known_hosts(devcluster, tmp_path):
    """Before, paramiko's loader raised InvalidHostKey on the first marker line: no host
    could be verified at all."""
    kh = tmp_path / "known_hosts"
    kh.write_text(
        f"@cert-authority *.example.org {_host_key('jump')}\n"
        f"@revoked old.example.org {_host_key('2fa')}\n"
        f"[127.0.0.1]:2222 {_host_key()}\n"
    )
    with _transport(known_hosts=str(kh)) as t:
        assert t.run("echo ok").stdout == "ok\n"


def test_revoked_host_key_is_refused_even_when_known(devcluster, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:2222 {_host_key()}\n@revoked * {_host_key()}\n")
    with pytest.raises(HostKeyError, match="REVOKED host key") as err:
        _transport(known_hosts=str(kh)).run("true")
    assert err.value.fingerprint == _server_fingerprint("main")


def test_cert_authority_only_says_host_certificates_are_not_checked(devcluster, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text(f"@cert-authority [127.0.0.1]:* {_host_key('jump')}\n")
    with pytest.raises(HostKeyError, match="Unknown host key") as err:
        _transport(known_hosts=str(kh)).run("true")
    assert "@cert-authority" in str(err.value) and "hpcui trust" in str(err.value)


@pytest.fixture
def locked_key(tmp_path):
    """A copy of the dev key protected by a passphrase (OpenSSH format, as ssh-keygen writes
    ed25519 keys), with its .pub beside it."""
    key = tmp_path / "locked_ed25519"
    key.write_bytes((DEVCLUSTER / "ssh" / "id_ed25519").read_bytes())
    key.chmod(0o600)
    subprocess.run(
        ["ssh-keygen", "-q", "-p", "-N", "s3cret pass", "-f", str(key)],
        check=True,
        capture_output=True,
    )
    (tmp_path / "locked_ed25519.pub").write_text(
        (DEVCLUSTER / "ssh" / "id_ed25519.pub").read_text()
    )
    assert key.read_bytes().startswith(b"-----BEGIN OPENSSH PRIVATE KEY")
    locked = subprocess.run(["ssh-keygen", "-y", "-P", "", "-f", str(key)], capture_output=True)
    assert locked.returncode != 0  # really needs the passphrase
    return key


def test_passphrase_key_prompts_and_unlocks(devcluster, locked_key, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    asked = []

    def prompt(title, instructions, prompts):
        asked.append([p for p, _ in prompts])
        return ["s3cret pass"]

    with _transport(identity_file=str(locked_key), prompt=prompt) as t:
        assert t.run("whoami").stdout.strip() == "hpcuser"
    assert asked == [[f"Passphrase for {locked_key}: "]]


def test_passphrase_key_wrong_answer_is_a_clear_error(devcluster, locked_key, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    t = _transport(identity_file=str(locked_key), prompt=lambda *a: ["nope"])
    with pytest.raises(AuthenticationError, match="passphrase is wrong") as err:
        t.run("true")
    assert "ssh-add" in str(err.value) and "nope" not in str(err.value)


def test_passphrase_key_without_a_prompt_says_what_to_do(devcluster, locked_key, monkeypatch):
    """Before: TypeError from paramiko 5 ("password was not provided")."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    with pytest.raises(AuthenticationError, match="passphrase-protected") as err:
        _transport(identity_file=str(locked_key)).run("true")
    assert f"ssh-add {locked_key}" in str(err.value)


def test_passphrase_key_held_by_the_agent_needs_no_prompt(devcluster, locked_key, tmp_path,
                                                          monkeypatch):  # fmt: skip
    sock = tmp_path / "agent.sock"
    out = subprocess.run(
        ["ssh-agent", "-s", "-a", str(sock)], capture_output=True, text=True, check=True
    ).stdout
    pid = int(out.split("SSH_AGENT_PID=")[1].split(";")[0])
    try:
        env = {"SSH_AUTH_SOCK": str(sock), "PATH": "/usr/bin:/bin"}
        subprocess.run(  # the user unlocked it once with ssh-add (here: the plain original)
            ["ssh-add", str(DEVCLUSTER / "ssh" / "id_ed25519")], env=env, check=True,
            capture_output=True,
        )  # fmt: skip
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))

        def never(*a):
            raise AssertionError("asked for a passphrase although the agent has the key")

        with _transport(identity_file=str(locked_key), prompt=never) as t:
            assert t.run("whoami").stdout.strip() == "hpcuser"
    finally:
        subprocess.run(["kill", str(pid)], check=False)


#: SFTP just under the size where files take a plain channel (hpcui.transport.ssh.sftp):
#: with TCP_NODELAY and AES-GCM a 6 MB upload sometimes ended before a kill at 50 ms
@pytest.mark.parametrize("size", [8_000_000, 20_000_000], ids=["sftp", "stream"])
def test_an_upload_cut_by_a_drop_is_retried_whole(devcluster, size):
    """Before: a raw EOFError (SFTP) or OSError "Socket is closed" (the `cat` stream)."""
    with _transport() as t:
        assert t.run("true").ok
        pids = session_sshd_pids(t.run)  # found before the upload, killed during it
        killer = threading.Timer(0.02, _kill_session_sshd, args=(t, pids))
        killer.start()
        assert t.write_file(f"drop-{size}", b"x" * size) == size
        killer.join()
        assert t.connects >= 2, "the drop did not happen: the test proved nothing"
        assert t.stat_size(f"drop-{size}") == size  # whole, not the cut-off part
        t.run(["rm", "-f", f"drop-{size}"])


def test_file_operations_on_a_dead_link_raise_connection_lost(devcluster):
    """No raw EOFError/SSHException/socket error reaches the caller: after the one retry,
    ConnectionLost names what was being done."""
    with _transport() as t:
        calls = []

        def always_dropping():
            calls.append(1)
            raise EOFError()

        with pytest.raises(ConnectionLost, match="dropped while reading x"):
            t._files.file_op("reading x", always_dropping, retry=True)
        assert len(calls) == 2  # tried again once
        calls.clear()
        with pytest.raises(ConnectionLost, match="dropped while creating y"):
            t._files.file_op("creating y", always_dropping, retry=False)
        assert len(calls) == 1
        # the server's own answers pass unchanged while the link is up
        assert t.run("true").ok
        with pytest.raises(FileNotFoundError):
            t.read_file("/nonexistent/file")
        assert t.run("echo still").stdout == "still\n"


def test_a_drop_during_the_login_is_not_a_refusal(devcluster):
    """The link dies while the user answers the 2FA prompt (the sshd serving us is
    SIGKILLed): hpcui connects again and asks again. Before: "rejected the
    keyboard-interactive answers", as if the code had been wrong."""
    from tests.conftest import sshd_pid

    listener = sshd_pid("2fa")
    asked = []

    def answer(title, instructions, questions):
        if not questions:  # PAM's closing round asks nothing
            return []
        asked.append(title)
        if len(asked) == 1:  # the newest child of the listener serves this login
            child = subprocess.run(
                ["pgrep", "-n", "-P", str(listener)], capture_output=True, text=True
            ).stdout.strip()
            assert child, "no sshd child serving the login"
            subprocess.run(["kill", "-9", child], check=True)
            time.sleep(0.3)
        return [_totp() for _ in questions]

    with _transport("hpcui-2fa", prompt=answer) as t:
        assert t.run("whoami").stdout.strip() == "hpcuser"
        assert t.connects == 1  # one successful connection, after one failed attempt
    assert len(asked) == 2


def test_proxycommand_is_followed_not_bypassed(devcluster, tmp_path):
    """An older centre's `ProxyCommand ssh -W %h:%p gw` runs (here: OpenSSH's own client
    to the dev jump host) and carries the connection; the login node's sshd sees it come
    from the jump host's side, so the session proves the proxy was used."""
    dev = (DEVCLUSTER / "ssh" / "config").read_text()
    block = dev.split("Host hpcui-dev\n", 1)[1].split("\nHost ", 1)[0]
    log = tmp_path / "proxy.log"
    cfg = tmp_path / "config"
    cfg.write_text(
        dev + "\nHost viaproxy\n" + block + f"\n    ProxyCommand sh -c 'echo used >> {log}; "
        f"exec ssh -F {DEVCLUSTER}/ssh/config -W %h:%p hpcui-jump'\n"
    )
    t = SshTransport.from_config("viaproxy", ssh_config=str(cfg))
    assert t.target.proxy_command and "-W 127.0.0.1:2222 hpcui-jump" in t.target.proxy_command
    with t:
        assert t.run("whoami").stdout.strip() == "hpcuser"
    assert log.read_text() == "used\n"


def test_a_proxycommand_that_fails_is_a_clear_connection_error(devcluster, tmp_path):
    cfg = tmp_path / "config"
    block = (DEVCLUSTER / "ssh" / "config").read_text().split("Host hpcui-dev\n", 1)[1]
    cfg.write_text("Host broken\n" + block.split("\nHost ", 1)[0] + "\n    ProxyCommand false\n")
    t = SshTransport.from_config("broken", ssh_config=str(cfg), reconnect_attempts=1)
    with pytest.raises(ClusterConnectionError):
        t.connect()
