"""Reaching this user's agent: find its socket, start it when needed (stdlib only).

Used by the thin client (`hpcui.agent.client`) and by `AgentTransport`; the agent itself
is another program (`hpcui.agent.server`), started here by name, as `python -m` would.
"""

from __future__ import annotations

import os
import socket
import sys
import time

from hpcui.transport.agent import paths

DEFAULT_PERSIST_S = 600.0
START_TIMEOUT_S = 20.0


class AgentUnavailable(Exception):
    """No agent can serve this call; it runs directly (the reason is said with --debug)."""


class AgentSilent(AgentUnavailable):
    """The agent took the connection but did not acknowledge the request in ACK_S (stopped,
    hung or swamped): asking again would wait as long, so the caller goes around it."""


#: an agent acknowledges a request as soon as it has read it, before any remote work
ACK_S = 3.0


def platform_without_agent() -> str | None:
    """Why this Python can have no agent (it listens on a unix socket), or None."""
    if not hasattr(socket, "AF_UNIX"):
        return "this platform's Python has no unix sockets (native Windows)"
    return None


def turned_off(env: dict[str, str] | None = None) -> bool:
    env = dict(os.environ) if env is None else env
    return env.get("HPCUI_AGENT", "").strip().lower() in ("0", "off", "no", "false")


def agent_enabled(env: dict[str, str] | None = None) -> bool:
    return not turned_off(env) and platform_without_agent() is None


def persist_s() -> float:
    """`[agent] persist` of the config (0: no agent), read without pydantic."""

    # read only when no agent answers: a warm call (`hpcui proxy` for every ssh connection
    # VS Code opens) imports neither TOML nor the units
    import tomllib

    from hpcui.common.config_path import config_path
    from hpcui.common.units import persist_seconds

    try:
        with open(config_path(), "rb") as fh:
            table = tomllib.load(fh).get("agent", {})
    except (OSError, ValueError):
        return DEFAULT_PERSIST_S  # the direct path reports a bad config, not us
    value = table.get("persist", DEFAULT_PERSIST_S) if isinstance(table, dict) else None
    try:
        return persist_seconds(value, warn=False)  # the config's validation says it
    except ValueError:
        return DEFAULT_PERSIST_S  # the direct path (config validation) says what is wrong


# -- reaching the agent ------------------------------------------------------------------


def connect(path: str) -> socket.socket | None:
    """A connection to a live agent; a stale socket (its agent died) is removed."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        return sock
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        sock.close()
        if isinstance(exc, ConnectionRefusedError):
            try:
                os.unlink(path)
            except OSError:
                pass
        return None
    except OSError as exc:
        sock.close()
        raise AgentUnavailable(f"cannot reach {path}: {exc}") from exc


def start(path: str, persist: float) -> socket.socket:
    """Start the agent (one, even when several calls race) and connect to it."""
    import fcntl

    folder = os.path.dirname(path)
    paths.private_dir(folder, create=True)
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:  # bounded: whoever holds the lock starts the agent within the timeout
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AgentUnavailable(
                        "another hpcui call is still starting the agent"
                    ) from None
                time.sleep(0.02)
        sock = connect(path)
        if sock is not None:
            return sock  # another call started it while we waited
        logfile = path[: -len(".sock")] + ".log"
        why = spawn(path, persist, logfile, keep_out=fd)
        if why:
            raise AgentUnavailable(f"the agent did not start: {why} (see {logfile})")
        while time.monotonic() < deadline:
            sock = connect(path)
            if sock is not None:
                return sock
            time.sleep(0.005)
        raise AgentUnavailable(f"the agent did not answer within {START_TIMEOUT_S:.0f} s")
    finally:
        os.close(fd)


#: all of hpcui a thin-client process has loaded: it may fork into the agent
THIN = frozenset(
    {"hpcui", "hpcui.version", "hpcui.agent", "hpcui.agent.client", "hpcui.transport",
     "hpcui.transport.agent", "hpcui.transport.agent.paths", "hpcui.transport.agent.wire",
     "hpcui.transport.agent.reach", "hpcui.transport.agent.relay"}
)  # fmt: skip


def _fork_is_safe() -> bool:
    """Only a bare thin client forks: a process with connections, threads or a registry
    open (an API script, the app) would hand copies of them to the agent."""
    loaded = {m for m in sys.modules if m == "hpcui" or m.startswith("hpcui.")}
    threads = sys.modules.get("threading")
    return loaded <= THIN and (threads is None or threads.active_count() == 1)


def spawn(path: str, persist: float, logfile: str, *, keep_out: int) -> str:
    """Start the detached agent and wait until it listens: '' then, else what went wrong.

    A thin client becomes the agent in a grandchild of its own, as `ssh -M` does (hpcui
    is loaded already: no second interpreter start); any other process starts
    `python -m hpcui.agent.server` afresh.
    """
    out = os.open(logfile, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    r, w = os.pipe()
    if not _fork_is_safe():
        return _spawn_fresh(path, persist, out, r, w)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child (covered by the agent tests)
        code = 1
        try:
            os.close(keep_out)  # the start lock stays with the caller
            os.close(r)
            os.setsid()  # its own session: the terminal's Ctrl-C and hang-up spare it
            if os.fork():
                os._exit(0)  # the grandchild is nobody's child: no zombie
            for var in paths.KEY_VARS:  # resolved as the caller sees them, before the chdir
                if os.environ.get(var):
                    os.environ[var] = os.path.realpath(os.path.expanduser(os.environ[var]))
            os.chdir("/")
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.closerange(3, w)  # nothing of the caller's stays open (pipes, sockets)
            os.closerange(w + 1, 1 << 16)
            import runpy

            # the agent program, by name, as `python -m hpcui.agent.server` would run it
            sys.argv = ["hpcui-agent", path, str(persist), str(w)]
            runpy.run_module("hpcui.agent.server", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:
            try:
                os.write(w, f"{type(exc).__name__}: {exc}".encode()[:500])
            except OSError:
                pass
        os._exit(code)
    os.close(w)
    os.close(out)
    os.waitpid(pid, 0)  # the child exits as soon as the grandchild exists
    said = b""
    while chunk := os.read(r, 512):  # until the agent listens (or fails) and closes it
        said += chunk
    os.close(r)
    return "" if said == b"ok" else (said.decode(errors="replace") or "it exited at once")


def _spawn_fresh(path: str, persist: float, out: int, r: int, w: int) -> str:
    import subprocess  # only to start an agent, not on a warm call

    env = dict(os.environ)
    for var in paths.KEY_VARS:  # the agent runs in /: paths resolved as the caller sees them
        if env.get(var):
            env[var] = os.path.realpath(os.path.expanduser(env[var]))
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hpcui.agent.server", path, str(persist), str(w), "--detach"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, cwd="/", env=env,
            start_new_session=True, pass_fds=(w,),
        )  # fmt: skip
    finally:
        os.close(w)
        os.close(out)
    proc.wait()  # the launcher leaves at once; the agent is nobody's child (no zombie)
    said = b""
    while chunk := os.read(r, 512):
        said += chunk
    os.close(r)
    return "" if said == b"ok" else (said.decode(errors="replace") or "it exited at once")


def open_agent(persist: float | None = None) -> socket.socket:
    """A connection to this environment's agent, started if it is not running.
    `persist`: the config's, when the caller has read it already."""
    path = paths.socket_path()
    paths.private_dir(os.path.dirname(path), create=False)  # others could reach it: no
    sock = connect(path)
    if sock is None:
        persist = persist_s() if persist is None else persist
        if persist <= 0:
            raise AgentUnavailable("[agent] persist = 0")
        sock = start(path, persist)
    return sock
