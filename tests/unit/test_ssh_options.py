"""What hpcui's ssh config reader refuses, and how it says so (ssh -G agreement is in
test_ssh_config_vs_openssh.py)."""

from __future__ import annotations

import time

import pytest

from hpcui.errors import ConfigError
from hpcui.transport.ssh import options as ssh_options
from hpcui.transport.ssh.config import resolve
from hpcui.transport.ssh.options import split_args, split_keyword


def _resolve(tmp_path, text: str, host: str = "a", **kw):
    cfg = tmp_path / "config"
    cfg.write_text(text)
    return resolve(host, ssh_config=str(cfg), home=str(tmp_path), system_config=None, **kw)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('Match exec "kill -9 $$"\n  User u\n', "match exec 'kill -9 $$' error"),
        ('Match exec "echo %j"\n  User u\n', "%j, which is not defined"),
        ('Match host other exec "echo %j"\n  User u\n', "%j, which is not defined"),  # as ssh
        ("Match localnetwork 10.0.0.0/8\n  User u\n", "network interfaces"),
        ("Host a\n  Port 99999\n", "not a port number"),
        ("Host a\n  Port twenty\n", "not a port number"),
        ('Host a\n  User "unclosed\n', "invalid quotes"),
        ("Host a\n  IdentityFile ~/.ssh/id_%z\n", "%z, which is not defined"),
        ("Host a\n  UserKnownHostsFile ${HPCUI_SURELY_UNSET}/kh\n", "HPCUI_SURELY_UNSET"),
        ("Host a\n  IdentitiesOnly maybe\n", "not yes or no"),
        ("Host a\n  ConnectTimeout soon\n", "ConnectTimeout"),
        ("Match\n", 'no argument after keyword "match"'),
        ("Match bogus x\n", "unsupported Match attribute"),
        ("Match host\n", "needs a value"),
        ("Host a\n  ProxyJump gw;rm -rf ~\n", "not a [user@]host[:port]"),
        ("Host a\n  User\n", 'no argument after keyword "user"'),
    ],
)
def test_refused_with_a_clear_reason(tmp_path, text, words):
    with pytest.raises(ConfigError, match=r"line|ssh config") as info:
        _resolve(tmp_path, text)
    assert words in str(info.value)


def test_match_exec_after_a_failed_criterion_is_not_reached(tmp_path):
    # ssh skips an exec once an earlier criterion failed: so does hpcui (no error)
    target = _resolve(tmp_path, 'Match host other exec "false"\n  User u\n')
    assert target.user != "u"


def test_match_exec_runs_once_per_resolution_and_again_in_the_next(tmp_path):
    """Both passes (Match final) share one answer; a new resolution asks again (a VPN may
    have come up since)."""
    count = tmp_path / "count"
    text = f'Match exec "echo x >> {count}"\n  User u\nMatch final exec "echo x >> {count}"\n'
    assert _resolve(tmp_path, text).user == "u"
    assert count.read_text() == "x\n"
    _resolve(tmp_path, text)
    assert count.read_text() == "x\nx\n"


def test_a_hanging_match_exec_ends_with_its_timeout_and_what_it_started(tmp_path, monkeypatch):
    monkeypatch.setattr(ssh_options, "MATCH_EXEC_TIMEOUT_S", 0.3)
    marker = tmp_path / "child-lived"
    text = f'Match exec "(sleep 0.5; touch {marker}) & sleep 30"\n  User u\n'
    with pytest.raises(ConfigError, match=r"did not finish in 0.3 s.*nc -z -w 1"):
        _resolve(tmp_path, text)
    time.sleep(0.8)  # the background child was killed with its group: it never touches
    assert not marker.exists()


def test_match_exec_keeps_stderr_for_the_error_and_refuses_shell_names(tmp_path, monkeypatch):
    monkeypatch.setenv("SHELL", "/bin/sh")
    with pytest.raises(ConfigError, match=r"exited abnormally.*went wrong"):
        _resolve(tmp_path, 'Match exec "echo went wrong >&2; kill -9 $$"\n  User u\n')
    with pytest.raises(ConfigError, match="characters a shell reads"):
        _resolve(tmp_path, 'Match exec "test %n = x"\n  User u\n', host="a;touch_pwned")
    assert not (tmp_path / "touch_pwned").exists()
    monkeypatch.setenv("SHELL", str(tmp_path / "noshell"))
    with pytest.raises(ConfigError, match="is not executable"):
        _resolve(tmp_path, 'Match exec "true"\n  User u\n')


def test_an_include_loop_is_an_error_not_a_hang(tmp_path):
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "loop").write_text("Include loop\n")
    with pytest.raises(ConfigError, match="Include loop"):
        _resolve(tmp_path, "Include loop\n")


def test_command_line_values_win_and_match_user_sees_them(tmp_path):
    text = "Match user bob\n  Port 2200\nHost a\n  User alice\n  Port 2300\n"
    assert (_resolve(tmp_path, text).user, _resolve(tmp_path, text).port) == ("alice", 2300)
    target = _resolve(tmp_path, text, user="bob")
    assert (target.user, target.port) == ("bob", 2200)


def test_known_hosts_name_is_lowercased_as_ssh_writes_it(tmp_path):
    target = _resolve(tmp_path, "Host a\n  HostName Login.Example.ORG\n  Port 2222\n")
    assert target.known_hosts_name == "[login.example.org]:2222"
    aliased = _resolve(tmp_path, "Host a\n  HostKeyAlias Front-Node\n")
    assert aliased.known_hosts_name == "front-node"


def test_the_system_config_is_read_after_the_user_one(tmp_path):
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host a\n  User mine\n")
    system = tmp_path / "ssh_config"
    system.write_text("Host *\n  User theirs\n  Port 2201\n")
    target = resolve("a", home=str(tmp_path), system_config=str(system))
    assert (target.user, target.port) == ("mine", 2201)
    assert resolve("a", ssh_config=str(tmp_path / ".ssh" / "config"), home=str(tmp_path),
                   system_config=str(system)).port == 22  # -F: only that file  # fmt: skip


@pytest.mark.parametrize(
    ("line", "args"),
    [
        ('a "b c" d', ["a", "b c", "d"]),
        ("a 'b c'", ["a", "b c"]),
        (r"a\ b c", ["a b", "c"]),
        ("a # comment", ["a"]),
        ("a#b", ["a#b"]),
        ('"#x" y', ["#x", "y"]),
    ],
)
def test_arguments_split_as_openssh_splits_them(line, args):
    assert split_args(line, "test") == args


@pytest.mark.parametrize(
    ("line", "split"),
    [
        ("Port=22", ("port", "22")),
        ("  Port = 22", ("port", "22")),
        ("# comment", None),
        ("", None),
        ('"Host" a', ("host", "a")),
    ],
)
def test_keyword_split(line, split):
    assert split_keyword(line) == split
