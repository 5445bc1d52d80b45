"""Resolve a host alias the way OpenSSH would (`ssh_options` reads the files), plus overrides."""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, field
from pathlib import Path

from hpcui.errors import ConfigError
from hpcui.transport.ssh.options import (
    OptionsReader,
    env_expand,
    expand_hostname,
    path_tokens,
    percent_expand,
)

DEFAULT_CONFIG = "~/.ssh/config"
DEFAULT_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
DEFAULT_IDENTITIES = ("~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa")


@dataclass(frozen=True)
class SshTarget:
    """Everything needed to open one SSH connection (after config resolution)."""

    alias: str
    hostname: str
    port: int = 22
    user: str = field(default_factory=getpass.getuser)
    identity_files: tuple[str, ...] = ()
    identities_only: bool = False
    known_hosts: tuple[str, ...] = DEFAULT_KNOWN_HOSTS
    global_known_hosts: tuple[str, ...] = GLOBAL_KNOWN_HOSTS
    host_key_alias: str | None = None
    proxy_jump: str | None = None
    #: ProxyCommand with its tokens expanded; run by /bin/sh, its stdio is the connection
    proxy_command: str | None = None
    forward_agent: bool = False
    connect_timeout: float = 20.0
    ssh_config: str | None = None
    #: ServerAliveInterval / ServerAliveCountMax when the ssh config sets them (0: off)
    server_alive_interval: float | None = None
    server_alive_count_max: int | None = None

    @property
    def known_hosts_name(self) -> str:
        """The name under which known_hosts stores this server's key."""
        name = self.host_key_alias or self.hostname
        return name if self.port == 22 else f"[{name}]:{self.port}"

    @property
    def label(self) -> str:
        return f"{self.user}@{self.hostname}:{self.port}"


SYSTEM_CONFIG = "/etc/ssh/ssh_config"
_YES = {"yes": True, "true": True, "no": False, "false": False}


def local_user_name() -> str:
    """This machine's user name as ssh uses it (%u, and the remote user by default).

    getpass reads LOGNAME/USER/LNAME/USERNAME first (Windows sets USERNAME), then the
    password database, which a Python without `pwd` (Windows) or a user without an entry
    (a container) lacks: that is a question for the config, not a traceback."""
    try:
        return getpass.getuser()
    except (ImportError, KeyError, OSError) as exc:
        raise ConfigError(
            f"Cannot tell this machine's user name ({exc}): set `user = ...` in the cluster's "
            "table, or USER / USERNAME in the environment."
        ) from None


def read_options(
    host: str,
    config: Path | None,
    *,
    system: Path | None = None,
    home: str | None = None,
    local_user: str | None = None,
    preset: dict[str, object] | None = None,
) -> tuple[dict[str, object], str]:
    """The options OpenSSH would find for `host` in `config` then `system` (either may be
    None or missing), and the final host name (HostName with %h, lowercased).

    `preset` holds what the command line would set first (-l, -p, -J): it wins over the
    files and, like there, Match user sees it."""
    reader = OptionsReader(
        original=host,
        local_user=local_user or local_user_name(),
        home=home or os.path.expanduser("~"),
        options=dict(preset or {}),
    )

    def read_all() -> None:
        if config is not None and config.is_file():
            reader.read_file(config, user_conf=True)
        if system is not None and system.is_file():
            reader.read_file(system, user_conf=False)

    read_all()
    hostname = reader._first("hostname")
    final_name = (expand_hostname(hostname, host) if hostname else host).lower()
    canonicalize = (reader._first("canonicalizehostname") or "no").lower() in ("yes", "always")
    if reader.want_final or canonicalize:
        # ssh re-reads its files once more: Host now matches the final name, `Match final`
        # and `canonical` match, and what the first pass set still wins
        reader.final, reader.host = True, final_name
        reader.options["hostname"] = [final_name]
        read_all()
    return reader.options, final_name


def resolve(
    host: str,
    *,
    ssh_config: str | None = None,
    user: str | None = None,
    port: int | None = None,
    identity_file: str | None = None,
    known_hosts: str | None = None,
    proxy_jump: str | None = None,
    home: str | None = None,
    system_config: str | None = SYSTEM_CONFIG,
) -> SshTarget:
    """Resolve `host` as ``ssh`` would: ~/.ssh/config then /etc/ssh/ssh_config, or only
    `ssh_config` when given (like ``ssh -F``); explicit arguments win over the files."""
    home = home or os.path.expanduser("~")
    if ssh_config:
        given = Path(os.path.expanduser(ssh_config))
        if not given.exists():
            raise ConfigError(
                f"ssh config file {given} does not exist: fix `ssh_config` for {host}."
            )
        cfg_path: Path | None = given
        system = None
    else:
        cfg_path = Path(home) / ".ssh" / "config"
        system = Path(system_config) if system_config else None
    if not host or host.startswith("-") or any(c.isspace() for c in host):
        raise ConfigError(f"{host!r} is not a host name or ssh config alias.")
    preset: dict[str, object] = {}
    if user:
        preset["user"] = [user]
    if port:
        preset["port"] = [str(port)]
    if proxy_jump:
        preset["proxyjump"] = proxy_jump
    local_user = local_user_name()
    options, hostname = read_options(
        host, cfg_path, system=system, home=home, local_user=local_user, preset=preset
    )
    first = _firsts(options)
    remote_user = first.get("user") or local_user
    port_number = _port(first.get("port"))
    alias = first.get("hostkeyalias")
    alias = alias.lower() if alias else None
    tokens = path_tokens(host, hostname, port_number, remote_user, alias, local_user, home)
    listed = options.get("identityfile")  # every IdentityFile line counts: a list
    idents = [identity_file] if identity_file else list(listed if isinstance(listed, list) else [])
    kh = [known_hosts] if known_hosts else options.get("userknownhostsfile")
    gkh = options.get("globalknownhostsfile")
    jump = options.get("proxyjump")
    command = options.get("proxycommand")
    return SshTarget(
        alias=host,
        hostname=hostname,
        port=port_number,
        user=remote_user,
        identity_files=tuple(_path(p, tokens, home, "IdentityFile") for p in idents),
        identities_only=_flag(first, "identitiesonly"),
        known_hosts=_paths(kh, tokens, home, "UserKnownHostsFile", DEFAULT_KNOWN_HOSTS),
        global_known_hosts=_paths(gkh, tokens, home, "GlobalKnownHostsFile", GLOBAL_KNOWN_HOSTS),
        host_key_alias=alias,
        proxy_jump=None if jump is None or str(jump).lower() == "none" else str(jump),
        proxy_command=None
        if command is None or str(command).lower() == "none"
        else percent_expand(
            str(command),
            {k: tokens[k] for k in "hnpr"},
            "ProxyCommand",
        ),
        forward_agent=_flag(first, "forwardagent"),
        connect_timeout=_timeout(first.get("connecttimeout")),
        ssh_config=str(cfg_path) if cfg_path is not None and cfg_path.exists() else None,
        server_alive_interval=_number(first, "serveraliveinterval"),
        server_alive_count_max=None
        if (n := _number(first, "serveralivecountmax")) is None
        else int(n),
    )


def _firsts(options: dict[str, object]) -> dict[str, str]:
    """Each single-valued option's (first) argument."""
    return {
        key: value[0] if isinstance(value, list) else str(value)
        for key, value in options.items()
        if value and key not in ("identityfile", "certificatefile")
    }


def _path(template: str, tokens: dict[str, str], home: str, what: str) -> str:
    path = percent_expand(env_expand(template, what), tokens, what)
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    return os.path.expanduser(path)


def _paths(
    values: object, tokens: dict[str, str], home: str, what: str, default: tuple[str, ...]
) -> tuple[str, ...]:
    if not values:
        return tuple(_path(p, tokens, home, what) for p in default)
    items = values if isinstance(values, list) else [str(values)]
    return tuple(_path(p, tokens, home, what) for p in items if p.lower() != "none")


def _flag(first: dict[str, str], key: str) -> bool:
    value = first.get(key, "no").lower()
    if key == "forwardagent" and value not in _YES:
        return True  # a socket path or $VAR: forwarding on, to that agent
    if value not in _YES:
        raise ConfigError(f"ssh config: {key} {value!r} is not yes or no.")
    return _YES[value]


def _port(value: str | None) -> int:
    if value is None:
        return 22
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise ConfigError(f"ssh config: Port {value!r} is not a port number (1-65535).")
    return int(value)


def _timeout(value: str | None) -> float:
    if value is None or value.lower() == "none":
        return 20.0
    if not value.isdigit():
        raise ConfigError(f"ssh config: ConnectTimeout {value!r} is not a number of seconds.")
    return float(value) or 20.0


def _number(options: dict[str, str], key: str) -> float | None:
    """An optional numeric option; a malformed one is a clear error, not a crash later."""
    value = options.get(key)
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"ssh config: {key} {value!r} is not a number.") from None
    if number < 0:
        raise ConfigError(f"ssh config: {key} {value!r} may not be negative.")
    return number


def parse_jump(spec: str) -> list[tuple[str | None, str, int | None]]:
    """Split a ProxyJump value `[user@]host[:port][,...]` into hops (first hop first)."""
    hops = []
    for hop in spec.split(","):
        hop = hop.strip()
        if hop.startswith("ssh://"):
            hop = hop[len("ssh://") :]
        user, _, hostport = hop.rpartition("@")
        host, port = hostport, None
        if hostport.startswith("["):
            host, _, rest = hostport[1:].partition("]")
            port = int(rest[1:]) if rest.startswith(":") else None
        elif hostport.count(":") == 1:
            host, p = hostport.split(":")
            port = int(p)
        hops.append((user or None, host, port))
    return hops
