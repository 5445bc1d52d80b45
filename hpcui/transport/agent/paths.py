"""Where an agent listens, and which agent serves which environment (stdlib only)."""

from __future__ import annotations

import os
import stat
import sys

from hpcui.version import __version__

#: what changes the agent's answers: a client with another value gets another agent
KEY_VARS = ("HPCUI_CONFIG", "HPCUI_DATA_DIR", "HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")
#: AF_UNIX paths are limited to 108 bytes on Linux, 104 on macOS (with the final NUL)
MAX_SOCKET_PATH = 103 if sys.platform == "darwin" else 107


class UnsafeDirectory(Exception):
    """The agent's directory is not private to this user: no agent (direct connections)."""


def version() -> str:

    return __version__


def runtime_dir(env: dict[str, str] | None = None) -> str:
    """`$XDG_RUNTIME_DIR/hpcui` when that is this user's, else the user cache dir."""
    env = dict(os.environ) if env is None else env
    xdg = env.get("XDG_RUNTIME_DIR", "")
    if xdg and os.path.isdir(xdg) and os.stat(xdg).st_uid == os.getuid():
        return os.path.join(xdg, "hpcui")
    home = env.get("HOME") or os.path.expanduser("~")
    if sys.platform == "darwin":
        cache = os.path.join(home, "Library", "Caches")
    else:
        cache = env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    return os.path.join(cache, "hpcui", "run")


def agent_key(env: dict[str, str] | None = None) -> str:
    """One agent per hpcui version and per config/data/home: a test or a second config
    never talks to an agent that reads another config."""
    env = dict(os.environ) if env is None else env
    parts = [version(), str(os.getuid())]
    for var in KEY_VARS:
        value = env.get(var, "")
        parts.append(os.path.realpath(os.path.expanduser(value)) if value else "")
    try:  # the built-in module: hashlib would load OpenSSL first (~4 ms of a warm call)
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - an interpreter without it
        from hashlib import blake2b
    return blake2b("\0".join(parts).encode(), digest_size=8).hexdigest()


def socket_path(env: dict[str, str] | None = None) -> str:
    base = runtime_dir(env)
    path = os.path.join(base, f"agent-{agent_key(env)}.sock")
    if len(path.encode()) > MAX_SOCKET_PATH:  # a deep HOME: a short private dir instead
        path = os.path.join(f"/tmp/hpcui-{os.getuid()}", f"agent-{agent_key(env)}.sock")
    return path


def private_dir(path: str, *, create: bool) -> bool:
    """The directory exists, belongs to this user and nobody else may enter it (0700).

    Made on demand; one that another user owns or that others may enter raises
    UnsafeDirectory (never loosened or used: the socket would be reachable).
    """
    if create:
        os.makedirs(path, mode=0o700, exist_ok=True)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise UnsafeDirectory(f"{path} is not a directory of this user")
    if st.st_mode & 0o077:
        raise UnsafeDirectory(
            f"{path} may be entered by other users (mode {stat.S_IMODE(st.st_mode):o}); "
            f"run `chmod 700 {path}`"
        )
    return True


def mux_socket_path(agent_socket: str, cluster: str) -> str:
    """The agent's OpenSSH-mux socket for `cluster` (hpcui.agent.mux), beside its own
    socket: one short name per cluster (AF_UNIX paths are short)."""
    import hashlib  # a host entry is being written, not a warm call

    digest = hashlib.sha256(cluster.encode()).hexdigest()[:12]
    return f"{agent_socket.removesuffix('.sock')}.mux-{digest}.sock"
