"""A job's node for the user's own tools: ssh, scp, rsync, git and VS Code.

Each running job becomes an OpenSSH `Host` entry (`hpcui-CLUSTER-JOB`) whose ProxyCommand
is `hpcui proxy CLUSTER JOB`: the agent's login to the cluster carries the connection to
port 22 of the job's node (no second login, no second 2FA code); the node's sshd then
admits the user with their own key while they have a job there (pam_slurm_adopt at most
sites). Each entry carries what OpenSSH needs by itself (user, identity file, the node's
host key pinned under an alias of its own), so `ssh -F FILE HOST` works with FILE alone.

The node's host key is read through the login (`ssh-keyscan` run on the login node, over
the authenticated connection, as the login node itself sees the node) and pinned in
hpcui's own known_hosts file; a key that changes later is refused by ssh, as any changed
key is. `--install` keeps the entries in ~/.ssh/hpcui/config, which ~/.ssh/config includes
once (the line is added at its top, after a backup).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpcui.backends.nodelist import expand_nodelist
from hpcui.backends.states import JobState
from hpcui.common.file_lock import locked
from hpcui.errors import UsageError
from hpcui.jobs.forwarding import pump
from hpcui.transport.agent import paths
from hpcui.transport.agent.paths import KEY_VARS
from hpcui.transport.agent.relay import relay
from hpcui.transport.ssh.config import resolve

#: what may stand in an alias or a ProxyCommand word unquoted (job ids, cluster names)
SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
#: variables that choose the config and the agent (its key, and where its socket is): a
#: ProxyCommand started by VS Code from a desktop session must reach the same agent, and
#: so the same login, as the shell that wrote the entry
CARRIED_VARS = (*KEY_VARS, "XDG_RUNTIME_DIR")
INCLUDE_LINE = "Include hpcui/config"
#: OpenSSH's client as the proxy when the agent's mux socket is there (POSIX: unix sockets)
FAST_PATH = sys.platform != "win32"


@dataclass(frozen=True)
class NodeHost:
    """One job's node as an ssh `Host` entry."""

    alias: str
    cluster: str
    job_id: str
    node: str
    user: str | None
    identity_files: tuple[str, ...]
    key_alias: str
    #: False: the node's key could not be read through the login; ssh then records it on
    #: first use (`StrictHostKeyChecking accept-new`)
    pinned: bool


def alias_of(cluster: str, job_id: str) -> str:
    return f"hpcui-{cluster}-{job_id}"


def own_dir() -> Path:
    return Path.home() / ".ssh" / "hpcui"


def hosts_file() -> Path:
    return own_dir() / "config"


def known_hosts_file() -> Path:
    return own_dir() / "known_hosts"


def _check(word: str, what: str) -> str:
    if not SAFE.match(word):
        raise UsageError(f"{what} {word!r} cannot name an ssh host (letters, digits, . _ + -).")
    return word


def launcher() -> list[str]:
    """How ssh starts hpcui: the `hpcui` script beside this Python, else on PATH, else
    this Python with `-m hpcui.cli`."""
    beside = Path(sys.executable).parent / ("hpcui.exe" if sys.platform == "win32" else "hpcui")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("hpcui")
    return [found] if found else [sys.executable, "-m", "hpcui.cli"]


def proxy_command(cluster: str, job_id: str) -> str:
    """The ProxyCommand line (ssh expands `%` tokens in it: doubled here, then %h:%p).

    On POSIX, OpenSSH's own client first (`ssh -W` to the agent's mux socket for the
    cluster: a C program starts in milliseconds, hpcui.agent.mux), `hpcui proxy` when that
    socket is not there (no agent yet, or not logged in: it can start one and ask)."""
    env = [f"{k}={os.environ[k]}" for k in CARRIED_VARS if os.environ.get(k)]
    words = (["env", *env] if env else []) + launcher() + ["proxy", cluster, job_id]
    slow = " ".join(shlex.quote(w) for w in words)
    if not FAST_PATH:
        return slow.replace("%", "%%")
    mux = [
        "ssh", "-F", "/dev/null", "-o", "ControlMaster=no",
        "-o", f"ControlPath={mux_socket(cluster)}", "-o", "ProxyCommand=false",
        "-o", "LogLevel=QUIET", "-W", "HOSTPORT", "hpcui-agent",
    ]  # fmt: skip
    fast = " ".join(shlex.quote(w) for w in mux)
    inner = f"{fast} 2>/dev/null || exec {slow}".replace("%", "%%")
    return "sh -c " + shlex.quote(inner).replace("HOSTPORT", "%h:%p")


def mux_socket(cluster: str) -> str:
    """Where this environment's agent listens as a ControlMaster for `cluster`."""
    return paths.mux_socket_path(paths.socket_path(), cluster)


def login_settings(cluster: Any) -> tuple[str | None, tuple[str, ...]]:
    """The user and identity files of the cluster's login, as ssh resolves them: the node
    takes the same key (sites put users' authorized_keys in the shared home)."""
    cfg = cluster.config
    target = resolve(
        cfg.host, ssh_config=cfg.ssh_config, user=cfg.user, port=cfg.port,
        identity_file=cfg.identity_file, known_hosts=cfg.known_hosts, proxy_jump=cfg.proxy_jump,
    )  # fmt: skip
    files = tuple(f for f in target.identity_files if Path(os.path.expanduser(f)).is_file())
    return target.user, files


def running_nodes(cluster: Any, job_ids: Iterable[str] | None = None) -> dict[str, str]:
    """Job id -> first node of the user's running jobs (one queue listing)."""
    wanted = set(job_ids) if job_ids is not None else None
    nodes = {}
    for job in cluster.site.queue():
        if job.state is JobState.RUNNING and job.nodelist and SAFE.match(job.job_id):
            if wanted is None or job.job_id in wanted:
                nodes[job.job_id] = expand_nodelist(job.nodelist)[0]
    return nodes


def hosts(cluster: Any, nodes: dict[str, str]) -> list[NodeHost]:
    """The entries for `nodes` (job id -> node), each node's key pinned once."""
    name = _check(cluster.name, "Cluster name")
    if cluster.config.host is None:
        raise UsageError(
            f"{name} is this machine (no `host` in its config): its jobs run here, and "
            "reaching them needs no ssh."
        )
    user, files = login_settings(cluster)
    pinned = {n: pin_key(cluster, n) for n in sorted(set(nodes.values()))}
    return [
        NodeHost(alias=alias_of(name, job_id), cluster=name, job_id=job_id, node=node,
                 user=user, identity_files=files, key_alias=key_alias(name, node),
                 pinned=pinned[node])
        for job_id, node in sorted(nodes.items())
    ]  # fmt: skip


def key_alias(cluster: str, node: str) -> str:
    """One known_hosts name per node of a cluster: every job on that node shares it."""
    return f"hpcui-{cluster}.{_check(node, 'Node name')}"


def pin_key(cluster: Any, node: str) -> bool:
    """The node's host keys in hpcui's known_hosts under its alias, read on the login node;
    True when they are there (kept from before, or read now)."""
    alias = key_alias(cluster.name, node)
    path = known_hosts_file()
    lines = path.read_text().splitlines() if path.exists() else []
    if any(line.split(" ", 1)[0] == alias for line in lines):
        return True
    scan = cluster.run(["ssh-keyscan", "-T", "5", "-t", "ed25519,ecdsa,rsa", node], timeout=20)
    keys = [
        f"{alias} {parts[1]} {parts[2]}"
        for parts in (line.split() for line in scan.stdout.splitlines())
        if len(parts) >= 3 and not parts[0].startswith("#") and parts[0] == node
    ]
    if not keys:
        return False
    _write_private(path, "\n".join([*lines, *keys]) + "\n")
    return True


def render(entries: list[NodeHost], *, stamp: str | None = None) -> str:
    """The ssh config text: one `Host` block per entry, complete by itself."""
    out = [
        "# hpcui: the nodes of your running jobs (`hpcui ssh-config`); rewritten as jobs start",
        "# and end: edits here are lost. " + (stamp or time.strftime("%Y-%m-%d %H:%M:%S")),
    ]
    known = str(known_hosts_file()).replace("%", "%%")
    for e in entries:
        out += ["", f"# job {e.job_id} on {e.cluster}, node {e.node}", f"Host {e.alias}"]
        out.append(f"    HostName {e.node}")
        if e.user:
            out.append(f"    User {e.user}")
        for f in e.identity_files:
            out.append(f'    IdentityFile "{f.replace("%", "%%")}"')
        if e.identity_files:
            out.append("    IdentitiesOnly yes")
        out += [
            f"    HostKeyAlias {e.key_alias}",
            f'    UserKnownHostsFile "{known}"',
            f"    StrictHostKeyChecking {'yes' if e.pinned else 'accept-new'}",
            f"    ProxyCommand {proxy_command(e.cluster, e.job_id)}",
        ]
    return "\n".join(out) + "\n"


def state_file() -> Path:
    """What the installed file holds, as data (what a refresh starts from), and the
    clusters `--install` was run for (kept while they have no running job)."""
    return own_dir() / "state.json"


def _read_state() -> tuple[set[str], list[NodeHost]]:
    try:
        data = json.loads(state_file().read_text())
        rows = [
            NodeHost(**{**r, "identity_files": tuple(r["identity_files"])}) for r in data["hosts"]
        ]
        return set(data["clusters"]), rows
    except (OSError, ValueError, TypeError, KeyError):
        return set(), []


def remembered() -> list[NodeHost]:
    return _read_state()[1]


def installed_clusters() -> set[str]:
    return _read_state()[0]


@contextlib.contextmanager
def _state_locked() -> Iterator[None]:
    """The agent's keeper and a command (`--install`, the Job screen's V) may both write."""
    own_dir().mkdir(mode=0o700, parents=True, exist_ok=True)
    path = own_dir() / ".lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    with os.fdopen(fd, "r+b") as fh, locked(fh, path):
        yield


def remember(
    cluster: str, entries: list[NodeHost], *, replace: bool, track: bool = False
) -> list[NodeHost]:
    """Merge `entries` into the state and rewrite the installed file from it, in one
    step: with `replace`, they are all of `cluster`'s (jobs that ended go), else they are
    added (or updated by alias); `track` keeps `cluster` in the file while it has no job."""
    new = {e.alias for e in entries}
    with _state_locked():
        clusters, old = _read_state()
        kept = [e for e in old if e.alias not in new and not (replace and e.cluster == cluster)]
        rows = sorted([*kept, *entries], key=lambda e: (e.cluster, e.alias))
        if track:
            clusters.add(cluster)
        state = {"clusters": sorted(clusters), "hosts": [asdict(e) for e in rows]}
        _write_private(state_file(), json.dumps(state, indent=1))
        _write_private(hosts_file(), render(rows))
    return rows


def refresh(cluster: Any) -> bool:
    """Rewrite the installed file when `cluster`'s running jobs changed; True if it did.
    Only for a file the user installed, and a cluster it already lists."""
    if not hosts_file().exists():
        return False
    clusters, rows = _read_state()
    before = [e for e in rows if e.cluster == cluster.name]
    if not before and cluster.name not in clusters:
        return False
    nodes = running_nodes(cluster)
    if {(e.job_id, e.node) for e in before} == set(nodes.items()):
        return False
    remember(cluster.name, hosts(cluster, nodes), replace=True)
    return True


@dataclass(frozen=True)
class Installed:
    hosts_file: Path
    include_added: bool
    backup: Path | None


def install() -> Installed:
    """Make ~/.ssh/config include hpcui's own file (written by `remember`) once."""
    added, backup = ensure_include()
    return Installed(hosts_file(), added, backup)


def included() -> bool:
    config = Path.home() / ".ssh" / "config"
    try:
        lines = config.read_text().splitlines()
    except OSError:
        return False
    targets = {INCLUDE_LINE.split()[1], str(hosts_file()), "~/.ssh/hpcui/config"}
    for line in lines:
        words = line.split()
        if len(words) >= 2 and words[0].lower() == "include" and targets & set(words[1:]):
            return True
    return False


INCLUDE_NOTE = "# added by `hpcui ssh-config --install`: your running jobs' nodes"


def without_own_lines(text: str) -> str:
    """~/.ssh/config as the user wrote it: what the agent compares (adding the Include
    line must not replace the agent, whose 2FA login would then be asked again)."""
    own = {INCLUDE_NOTE, INCLUDE_LINE}
    lines = text.splitlines()
    if lines[:2] == [INCLUDE_NOTE, INCLUDE_LINE]:
        lines = lines[3:] if lines[2:3] == [""] else lines[2:]
    return "\n".join(line for line in lines if line not in own)


def ensure_include() -> tuple[bool, Path | None]:
    """`Include hpcui/config` at the top of ~/.ssh/config (an Include below a `Host` line
    would belong to that Host only); the old file is kept beside it first."""
    if included():
        return False, None
    config = Path.home() / ".ssh" / "config"
    config.parent.mkdir(mode=0o700, exist_ok=True)
    old = config.read_text() if config.exists() else ""
    backup = None
    if config.exists():
        backup = config.with_name(f"config.hpcui-backup-{time.strftime('%Y%m%d-%H%M%S')}")
        shutil.copy2(config, backup)
    head = f"{INCLUDE_NOTE}\n{INCLUDE_LINE}\n"
    _write_private(config, head + ("\n" + old if old else ""))
    return True, backup


def _write_private(path: Path, text: str) -> None:
    """Atomically, 0600 (ssh refuses a config others may write)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def proxy_here(connect: Callable[[], Any], job_id: str, port: int, *, fdpass: bool) -> None:
    """`hpcui proxy` in this process (no agent): log in, open port `port` of the job's
    node, carry it. With `fdpass` ssh waits for this process to exit before it uses the
    socket it was handed, so a child carries the connection (it logs in after the fork:
    a connection's threads would not survive one) and the parent exits at once."""
    if fdpass:
        ours, theirs = socket.socketpair()
        if os.fork():
            socket.send_fds(socket.socket(fileno=os.dup(1)), [b"\0"], [theirs.fileno()])
            os._exit(0)
        theirs.close()
        os.setsid()  # ssh's Ctrl-C is for ssh; this carrier ends with the connection
    cluster = connect()
    chan = cluster.transport.open_tunnel(cluster.control.node(job_id), port)
    try:
        if fdpass:
            pump(ours, chan, threading.Event())
        else:
            relay(chan, sys.stdin.fileno(), sys.stdout.fileno())
    finally:
        chan.close()


def vscode_command(cluster: Any, job_id: str) -> tuple[NodeHost, list[str]]:
    """The job's node as a host entry, and VS Code's command to open its folder there."""
    entry = hosts(cluster, {job_id: cluster.control.node(job_id)})[0]
    folder = cluster.files.folder(job_id)
    return entry, ["code", "--remote", f"ssh-remote+{entry.alias}", folder]


def keep_entry(entry: NodeHost) -> Installed:
    """Add one entry to the installed file (VS Code reads ~/.ssh/config, which includes it)."""
    remember(entry.cluster, [entry], replace=False)
    return install()
