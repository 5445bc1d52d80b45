"""hpcui resolves a host as OpenSSH does: every config here is given to ``ssh -G`` (OpenSSH's
own answer, run in an empty network namespace) and to hpcui's resolver, and the options
that decide where and how hpcui connects must agree: user, host name, port, identity
files, known_hosts files, HostKeyAlias, ProxyJump/ProxyCommand, IdentitiesOnly,
ForwardAgent, ConnectTimeout, ServerAlive*.

The configs are our own, one per semantic that differed before (paramiko's reader), plus
the everyday ones. ``{home}`` stands for the case's home folder.
"""

from __future__ import annotations

import os
import shutil

import pytest

from hpcui.errors import ConfigError
from hpcui.transport.ssh import options as ssh_options
from hpcui.transport.ssh.config import read_options, resolve
from hpcui.transport.ssh.options import percent_expand
from tests.support.openssh_g import ssh_g, write_case

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="OpenSSH client missing")

ENV = {"CLUSTER_KEYS": "/keys"}

CASES: list[tuple[str, dict[str, str], list[str]]] = [
    # -- everyday ----------------------------------------------------------------------
    ("alias", {"config": "Host mn5\n  HostName glogin1.bsc.es\n  User bsc12345\n"}, ["mn5"]),
    ("unknown-host", {"config": "Host mn5\n  HostName glogin1.bsc.es\n"}, ["other.org"]),
    ("uppercase-typed", {"config": "Host *\n  User u\n"}, ["LOGIN.Example.ORG"]),
    ("uppercase-hostname", {"config": "Host x\n  HostName Login.EXAMPLE.org\n"}, ["x"]),
    (
        "host-star-after",
        {"config": "Host a\n  User alice\nHost *\n  User bob\n  Port 2200\n"},
        ["a", "b"],
    ),
    (
        "host-star-before",
        {"config": "Host *\n  User bob\nHost a\n  User alice\n  Port 2200\n"},
        ["a", "b"],
    ),
    (
        "first-value-wins",
        {"config": "Host a\n  Port 1001\n  Port 1002\nHost a b\n  Port 1003\n"},
        ["a", "b"],
    ),
    (
        "wildcards",
        {"config": "Host *.cluster\n  User w\nHost login?\n  Port 2201\n"},
        ["a.cluster", "login1", "login12", "cluster"],
    ),
    (
        "negation",
        {"config": "Host *.bsc.es !transfer*.bsc.es\n  User u1\nHost *\n  User u2\n"},
        ["glogin1.bsc.es", "transfer1.bsc.es"],
    ),
    ("negation-only", {"config": "Host !a\n  User neg\n"}, ["a", "b"]),
    ("case-sensitive-host", {"config": "Host FOO\n  User upper\n"}, ["FOO", "foo"]),
    (
        "brackets-are-literal",
        {"config": "Host node[1-3]\n  User classy\nHost *\n  User plain\n"},
        ["node1", "node[1-3]"],
    ),
    ("hostname-token", {"config": "Host *.short\n  HostName %h.example.org\n"}, ["a.short"]),
    ("percent-percent", {"config": "Host p\n  HostName 100%%.example\n"}, ["p"]),
    # -- lines ---------------------------------------------------------------------------
    (
        "trailing-comments",
        {
            "config": (
                "Host gw # the gateway\n  HostName gw.example.org  # its name\n  Port 2222 # ssh\n"
                "  User me #me\n"
            )
        },
        ["gw"],
    ),
    (
        "equals-forms",
        {"config": "Host=a\n  Port=2202\n  User = eq\n  HostName =h.example\n"},
        ["a"],
    ),
    (
        "quoting",
        {
            "config": (
                'Host "q"\n  User "name with space"\n  IdentityFile "{home}/.ssh/my key"\n'
                "  UserKnownHostsFile '{home}/kh_one' \"{home}/kh\"2\n"
            )
        },
        ["q"],
    ),
    (
        "booleans",
        {
            "config": (
                "Host t\n  IdentitiesOnly true\n  ForwardAgent TRUE\nHost f\n  IdentitiesOnly false\n"
                "  ForwardAgent no\n"
            )
        },
        ["t", "f"],
    ),
    (
        "timeouts",
        {
            "config": (
                "Host k\n  ConnectTimeout 7\n  ServerAliveInterval 15\n  ServerAliveCountMax 4\n"
            )
        },
        ["k", "other"],
    ),
    (
        "keyword-case",
        {"config": "HOST a\n  hostname H.example\n  PORT 2203\n  uSeR mixed\n"},
        ["a"],
    ),
    # -- Include -------------------------------------------------------------------------
    (
        "include-on-top",
        {
            "config": "Include conf.d/*.conf\n\nUser global\nIdentityFile ~/.ssh/id_global\n",
            "conf.d/10-mn5.conf": "Host mn5\n  HostName glogin1.bsc.es\n",
            "conf.d/20-lumi.conf": "Host lumi\n  HostName lumi.csc.fi\n  User lumiuser\n",
        },
        ["mn5", "lumi", "elsewhere"],
    ),
    (
        "include-scope-restored",
        {
            "config": "Host a\n  Include inc\n  Port 2204\nHost b\n  User bee\n",
            "inc": "User from-inc\nHost *\n  IdentityFile ~/.ssh/id_inc\n",
        },
        ["a", "b"],
    ),
    (
        "include-inactive-block",
        {
            "config": "Host nothere\n  Include inc\nHost *\n  User star\n",
            "inc": "User never\nHost *\n  Port 2299\n",
        },
        ["a"],
    ),
    (
        "include-equals-and-quotes",
        {
            "config": 'Include="{home}/.ssh/quoted inc"\nInclude=plain.inc\n',
            "quoted inc": "Host a\n  User quoted\n",
            "plain.inc": "Host a b\n  Port 2205\n",
        },
        ["a", "b"],
    ),
    ("include-missing-is-fine", {"config": "Include nothing/*.conf\nHost a\n  User ok\n"}, ["a"]),
    (
        "include-nested",
        {
            "config": "Include one\n",
            "one": "Host a\n  Include two\n",
            "two": "User nested\n",
        },
        ["a", "b"],
    ),
    (
        "include-tilde",
        {
            "config": "Include ~/.ssh/tilde.conf\n",
            "tilde.conf": "Host a\n  User tilde\n",
        },
        ["a"],
    ),
    # -- Match ---------------------------------------------------------------------------
    (
        "match-all",
        {"config": "Host a\n  User first\nMatch all\n  User all\n  Port 2206\n"},
        ["a", "b"],
    ),
    (
        "match-host-expanded",
        {
            "config": (
                "Host short\n  HostName long.example.org\nMatch host long.example.org\n  User via-match\n"
            )
        },
        ["short", "long.example.org"],
    ),
    (
        "match-originalhost",
        {
            "config": (
                "Host s\n  HostName real.example\nMatch originalhost s\n  Port 2207\n"
                "Match originalhost real.example\n  Port 2208\n"
            )
        },
        ["s"],
    ),
    (
        "match-user",
        {
            "config": (
                "Host a\n  User alice\nMatch user alice\n  Port 2209\nMatch user !alice\n  Port 2210\n"
            )
        },
        ["a", "b"],
    ),
    ("match-localuser", {"config": "Match localuser root,hpcuser\n  User local-known\n"}, ["a"]),
    (
        "match-negated-host",
        {"config": "Match !host *.internal\n  ProxyJump gw.example\n"},
        ["x.internal", "x.example"],
    ),
    (
        "match-final",
        {
            "config": (
                "Host alias\n  HostName Real.Example.ORG\nMatch final host real.example.org\n"
                "  User final-user\nHost real.example.org\n  Port 2211\n"
            )
        },
        ["alias"],
    ),
    (
        "match-canonical",
        {
            "config": (
                "Host alias\n  HostName real.example\n  CanonicalizeHostname yes\n"
                "Match canonical\n  User canon\nHost real.example\n  Port 2212\n"
            )
        },
        ["alias"],
    ),
    (
        "canonicalize-keeps-hostname",
        {
            "config": (
                "CanonicalizeHostname yes\nCanonicalDomains example.invalid\n"
                "Host login\n  HostName 127.0.0.9\n"
            )
        },
        ["login", "other"],
    ),
    (
        "match-final-first-pass-wins",
        {"config": ("Host a\n  User pass1\nMatch final\n  User pass2\n  Port 2213\n")},
        ["a"],
    ),
    # -- Match exec: ssh runs the command with $SHELL -c while it reads -------------------
    (
        "match-exec-true-and-false",
        {"config": 'Match exec "true"\n  User by-exec\nMatch exec "exit 1"\n  Port 2214\n'},
        ["a"],
    ),
    (
        "match-exec-vpn-idiom",  # a jump host only outside the VPN (centre docs' pattern)
        {
            "config": (
                "Host jureca\n  HostName jureca.example.org\n"
                'Match host jureca.example.org exec "! test -e {home}/vpn-up"\n'
                "  ProxyJump gw.example.org\n"
                'Match host jureca.example.org !exec "test -e {home}/vpn-up"\n  Port 2215\n'
            )
        },
        ["jureca", "other"],
    ),
    (
        "match-exec-tokens",
        {
            "config": (
                "Host a\n  HostName h.example\n  Port 2222\n  User bob\n  HostKeyAlias kalias\n"
                'Match exec "test %h = h.example -a %p = 2222 -a %r = bob -a %n = a -a %k = kalias '
                "-a %d = {home} -a %u = $(id -un) -a %i = $(id -u) -a %l = $(uname -n) "
                '-a %C = $(printf %%s%%s%%s%%s $(uname -n) h.example 2222 bob | sha1sum | cut -c1-40)"\n'
                "  IdentityFile ~/.ssh/tokens_matched\n"
            )
        },
        ["a"],
    ),
    (
        "match-exec-runs-after-earlier-values",  # it sees the User set above it, not below
        {"config": 'Host a\n  User early\nMatch exec "test %r = early"\n  Port 2216\n'},
        ["a", "b"],
    ),
    (
        "match-exec-hangs",  # ssh would wait for ever; both give up (hpcui: its timeout)
        {"config": 'Match exec "sleep 30"\n  User never\n'},
        ["a"],
    ),
    # -- jumps and proxies -----------------------------------------------------------------
    ("proxyjump", {"config": "Host c\n  ProxyJump gw\n"}, ["c"]),
    ("proxyjump-chain", {"config": "Host c\n  ProxyJump u1@gw1:2222,gw2\n"}, ["c"]),
    (
        "bastion-idiom",
        {"config": "Host bastion\n  ProxyJump none\nHost *\n  ProxyJump bastion\n"},
        ["bastion", "node"],
    ),
    ("proxycommand", {"config": "Host old\n  ProxyCommand ssh -W %h:%p gw.example\n"}, ["old"]),
    (
        "proxycommand-first",
        {"config": "Host a\n  ProxyCommand ssh -W %h:%p g1\n  ProxyJump g2\n"},
        ["a"],
    ),
    (
        "proxyjump-first",
        {"config": "Host a\n  ProxyJump g2\n  ProxyCommand ssh -W %h:%p g1\n"},
        ["a"],
    ),
    (
        "proxycommand-none",
        {
            "config": (
                "Host gw\n  ProxyCommand none\nHost *\n  ProxyCommand ssh -W %h:%p gw\n"
                "  ProxyJump gw\n"
            )
        },
        ["gw", "node"],
    ),
    (
        "proxyjump-none-then-command",
        {"config": "Host b\n  ProxyJump none\n  ProxyCommand foo %h\n"},
        ["b"],
    ),
    # -- files and tokens ------------------------------------------------------------------
    (
        "identity-accumulates",
        {
            "config": (
                "Host a\n  IdentityFile ~/.ssh/id_a\nHost *\n  IdentityFile ~/.ssh/id_star\n"
                "  IdentityFile ~/.ssh/id_a\n"
            )
        },
        ["a", "b"],
    ),
    (
        "identity-tokens",
        {
            "config": (
                "Host *\n  IdentityFile ~/.ssh/id_%r@%h:%p\n  IdentityFile ${CLUSTER_KEYS}/%k\n"
                "  User someone\n"
            )
        },
        ["node.example"],
    ),
    (
        "known-hosts-tokens",
        {
            "config": (
                "Host a\n  HostKeyAlias Front.Example\n  UserKnownHostsFile ~/.ssh/kh_%k %d/kh_%h_%p "
                "${CLUSTER_KEYS}/kh_%r_%u_%n_%C\n"
            )
        },
        ["a", "b"],
    ),
    (
        "known-hosts-several-lines",
        {
            "config": (
                "Host a\n  UserKnownHostsFile /kh/one /kh/two\nHost *\n  UserKnownHostsFile /kh/three\n"
                "  GlobalKnownHostsFile /kh/global1 /kh/global2\n"
            )
        },
        ["a", "b"],
    ),
    ("known-hosts-none", {"config": "Host a\n  UserKnownHostsFile none\n"}, ["a"]),
    (
        "hostkeyalias",
        {"config": "Host a b\n  HostKeyAlias Cluster-Front\n  HostName 10.0.0.1\n"},
        ["a", "b"],
    ),
]


def _expected(ssh: dict[str, list[str]], host: str) -> dict:
    first = {k: v[0] for k, v in ssh.items()}
    proxy = first.get("proxycommand")
    if proxy is not None:
        proxy = percent_expand(
            proxy, {"h": first["hostname"], "p": first["port"], "r": first["user"], "n": host},
            "ProxyCommand",
        )  # fmt: skip
    kh = ssh["userknownhostsfile"][0].split()
    return {
        "user": first["user"],
        "hostname": first["hostname"],
        "port": int(first["port"]),
        "identity_templates": ssh.get("identityfile", []),
        "known_hosts": [] if kh == ["none"] else kh,
        "global_known_hosts": first["globalknownhostsfile"].split(),
        "host_key_alias": first.get("hostkeyalias"),
        "proxy_jump": first.get("proxyjump"),
        "proxy_command": proxy,
        "identities_only": first["identitiesonly"] == "yes",
        "forward_agent": first["forwardagent"] == "yes",
        "connect_timeout": 20.0 if first["connecttimeout"] == "none"
        else float(first["connecttimeout"]),
        "server_alive": (int(first["serveraliveinterval"]), int(first["serveralivecountmax"])),
    }  # fmt: skip


_OPENSSH_DEFAULT_IDS = ["~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ecdsa_sk",
                        "~/.ssh/id_ed25519", "~/.ssh/id_ed25519_sk", "~/.ssh/id_xmss",
                        "~/.ssh/id_dsa"]  # fmt: skip


def _ours(home, config, host) -> dict:
    target = resolve(host, ssh_config=str(config), home=str(home), system_config=None)
    options, _ = read_options(host, config, home=str(home))
    return {
        "user": target.user,
        "hostname": target.hostname,
        "port": target.port,
        "identity_templates": list(options.get("identityfile") or []) or _OPENSSH_DEFAULT_IDS,
        "known_hosts": list(target.known_hosts),
        "global_known_hosts": list(target.global_known_hosts),
        "host_key_alias": target.host_key_alias,
        "proxy_jump": target.proxy_jump,
        "proxy_command": target.proxy_command,
        "identities_only": target.identities_only,
        "forward_agent": target.forward_agent,
        "connect_timeout": target.connect_timeout,
        "server_alive": (
            int(target.server_alive_interval or 0),
            3 if target.server_alive_count_max is None else target.server_alive_count_max,
        ),
    }


#: configs ssh -G cannot finish (it is stopped after HANG_S) and hpcui refuses
REFUSED_BY_BOTH = {"match-exec-hangs"}
HANG_S = 1.5
REFUSALS: dict[str, str] = {}


@pytest.fixture(scope="module")
def answers(tmp_path_factory, monkeypatch_module) -> dict[str, list[tuple[str, dict, dict | str]]]:
    """Every case's hosts resolved by both, in one sweep (one namespace per case)."""
    if os.geteuid() != 0:
        pytest.fail("this comparison needs root (unshare) as the dev cluster does")
    monkeypatch_module.setattr(ssh_options, "MATCH_EXEC_TIMEOUT_S", 0.5)
    base = tmp_path_factory.mktemp("openssh")
    saved = {k: os.environ.get(k) for k in ENV}
    os.environ.update(ENV)
    try:
        out = {}
        for name, files, hosts in CASES:
            home = base / name
            write_case(home, {k: v.replace("{home}", str(home)) for k, v in files.items()})
            config = home / ".ssh" / "config"
            env = {**os.environ, **ENV, "HOME": str(home)}
            limit = HANG_S if name in REFUSED_BY_BOTH else 30.0
            theirs = ssh_g(home, config, hosts, env, limit_s=limit)
            rows = []
            for host, ssh in zip(hosts, theirs, strict=True):
                if name in REFUSED_BY_BOTH:
                    with pytest.raises(ConfigError) as refused:
                        _ours(home, config, host)
                    rows.append((host, "refused" if "error" in ssh else ssh, "refused"))
                    REFUSALS[name] = str(refused.value)
                    continue
                assert "error" not in ssh, f"{name}/{host}: ssh -G failed: {ssh['error']}"
                try:
                    ours: dict | str = _ours(home, config, host)
                except ConfigError as exc:
                    ours = f"ConfigError: {exc}"
                rows.append((host, _expected(ssh, host), ours))
            out[name] = rows
        return out
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_a_hanging_match_exec_is_refused_with_its_timeout(answers):
    assert answers["match-exec-hangs"] == [("a", "refused", "refused")]
    assert "match exec 'sleep 30' did not finish in 0.5 s" in REFUSALS["match-exec-hangs"]


def test_the_match_exec_cases_match_where_they_mean_to(answers):
    """Agreement alone would pass if both sides skipped every block: ssh's own answers."""
    theirs = {name: {host: t for host, t, _ in answers[name]} for name in answers}
    assert (theirs["match-exec-true-and-false"]["a"]["user"],
            theirs["match-exec-true-and-false"]["a"]["port"]) == ("by-exec", 22)  # fmt: skip
    vpn = theirs["match-exec-vpn-idiom"]
    assert vpn["jureca"]["proxy_jump"] == "gw.example.org" and vpn["jureca"]["port"] == 2215
    assert vpn["other"]["proxy_jump"] is None and vpn["other"]["port"] == 22
    assert "~/.ssh/tokens_matched" in theirs["match-exec-tokens"]["a"]["identity_templates"]
    after = theirs["match-exec-runs-after-earlier-values"]
    assert (after["a"]["port"], after["b"]["port"]) == (2216, 22)


def test_there_are_at_least_forty_configs():
    assert len(CASES) >= 40 and len({name for name, _, _ in CASES}) == len(CASES)


@pytest.mark.parametrize("name", [name for name, _, _ in CASES])
def test_hpcui_resolves_as_openssh_does(answers, name):
    for host, theirs, ours in answers[name]:
        assert ours == theirs, f"{name}: {host}"


def test_the_agreement_count(answers, capsys):
    agree = sum(all(o == t for _, t, o in rows) for rows in answers.values())
    with capsys.disabled():
        print(f"\nssh -G differential: {agree} of {len(answers)} configs agree")
    assert agree == len(answers)
