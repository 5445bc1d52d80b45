"""Resolve a host alias the way OpenSSH would: ~/.ssh/config with Include, plus overrides."""

from __future__ import annotations

import getpass
import glob
import os
from dataclasses import dataclass, field
from pathlib import Path

from hpcui.errors import ConfigError

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


def _expand_includes(path: Path, depth: int = 0) -> str:
    """Inline `Include` lines (paramiko does not support them); relative paths are under ~/.ssh."""
    if depth > 16:
        raise ConfigError(
            f"ssh config Include nesting too deep at {path}: check for an Include loop."
        )
    out: list[str] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        words = line.strip().split(None, 1)
        if len(words) == 2 and words[0].lower() == "include":
            for pattern in words[1].split():
                pattern = os.path.expanduser(pattern)
                if not os.path.isabs(pattern):
                    pattern = os.path.join(os.path.expanduser("~/.ssh"), pattern)
                for included in sorted(glob.glob(pattern)):
                    out.append(_expand_includes(Path(included), depth + 1))
        else:
            out.append(line)
    return "\n".join(out)


def resolve(
    host: str,
    *,
    ssh_config: str | None = None,
    user: str | None = None,
    port: int | None = None,
    identity_file: str | None = None,
    known_hosts: str | None = None,
    proxy_jump: str | None = None,
) -> SshTarget:
    """Resolve `host` through the ssh config file; explicit arguments win over the file."""
    import paramiko  # deferred: keeps `import hpcui` light

    cfg_path = Path(os.path.expanduser(ssh_config or DEFAULT_CONFIG))
    options: dict = {}
    if cfg_path.exists():
        text = _expand_includes(cfg_path)
        try:
            options = paramiko.SSHConfig.from_text(text).lookup(host)
        except Exception as exc:  # paramiko raises several types for bad files
            raise ConfigError(
                f"Could not read ssh config {cfg_path}: {exc}. Fix the file."
            ) from exc
    elif ssh_config:
        raise ConfigError(
            f"ssh config file {cfg_path} does not exist: fix `ssh_config` for {host}."
        )

    idents = options.get("identityfile") or []
    if identity_file:
        idents = [identity_file]
    kh = known_hosts or options.get("userknownhostsfile")
    kh_files = tuple(os.path.expanduser(p) for p in kh.split()) if kh else DEFAULT_KNOWN_HOSTS
    gkh = options.get("globalknownhostsfile")
    gkh_files = tuple(os.path.expanduser(p) for p in gkh.split()) if gkh else GLOBAL_KNOWN_HOSTS
    jump = proxy_jump or options.get("proxyjump")
    if jump and jump.lower() == "none":
        jump = None
    return SshTarget(
        alias=host,
        hostname=options.get("hostname", host),
        port=int(port or options.get("port", 22)),
        user=user or options.get("user") or getpass.getuser(),
        identity_files=tuple(os.path.expanduser(p) for p in idents),
        identities_only=options.get("identitiesonly", "no").lower() == "yes",
        known_hosts=tuple(os.path.expanduser(p) for p in kh_files),
        global_known_hosts=gkh_files,
        host_key_alias=options.get("hostkeyalias"),
        proxy_jump=jump,
        forward_agent=options.get("forwardagent", "no").lower() == "yes",
        connect_timeout=float(options.get("connecttimeout", 20)),
        ssh_config=str(cfg_path) if cfg_path.exists() else None,
        server_alive_interval=_number(options, "serveraliveinterval"),
        server_alive_count_max=None
        if (n := _number(options, "serveralivecountmax")) is None
        else int(n),
    )


def _number(options: dict, key: str) -> float | None:
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
