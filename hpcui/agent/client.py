"""What the `hpcui` script runs first: hand the command to the agent, or run it here.

Standard library only (no paramiko, no pydantic): a warm call costs Python's start, one
unix-socket round trip and the remote command. Commands that need this process's own
Python (submit, run, result: your modules, your pickles), the app, `--debug`, and
`HPCUI_AGENT=off` or `[agent] persist = 0` run directly, as before the agent.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Sequence

from hpcui.agent import paths, wire

#: run inside the agent: they read no local file and import no user code
AGENT_COMMANDS = frozenset(
    {"jobs", "show", "logs", "cancel", "stop", "quota", "modules", "partitions", "clusters",
     "profiles", "exec", "clean", "usage"}
)  # fmt: skip
#: safe to send again to a new agent when the first died before printing anything
READ_ONLY = frozenset(
    {"jobs", "show", "logs", "quota", "modules", "partitions", "clusters", "profiles", "usage"}
)
#: options that make a call run here: tracebacks, help and schemas are local matters
LOCAL_OPTIONS = frozenset({"--debug", "-h", "--help", "--version", "--json-schema"})
DEFAULT_PERSIST_S = 600.0
START_TIMEOUT_S = 20.0
EXIT_CONNECTION = 3
EXIT_INTERRUPTED = 130


class AgentUnavailable(Exception):
    """No agent can serve this call; it runs directly (the reason is said with --debug)."""


class AgentLost(Exception):
    """The agent went away after it took the command."""


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand word, skipping `-c NAME`/`--cluster NAME` before it."""
    words = iter(argv)
    for word in words:
        if word in ("-c", "--cluster"):
            next(words, None)
        elif word.startswith("--cluster=") or (word.startswith("-c") and len(word) > 2):
            continue
        elif word.startswith("-"):
            return None
        else:
            return word
    return None


def agent_enabled(env: dict[str, str] | None = None) -> bool:
    env = dict(os.environ) if env is None else env
    return env.get("HPCUI_AGENT", "").strip().lower() not in ("0", "off", "no", "false")


def wanted(argv: Sequence[str]) -> bool:
    return (
        agent_enabled()
        and command_of(argv) in AGENT_COMMANDS
        and not any(a.split("=")[0] in LOCAL_OPTIONS for a in argv)
    )


def persist_s() -> float:
    """`[agent] persist` of the config (0: no agent), read without pydantic."""
    import tomllib

    path = os.environ.get("HPCUI_CONFIG")
    if path:
        path = os.path.expanduser(path)
    else:
        home = os.path.expanduser("~")
        if sys.platform == "darwin":
            base = os.path.join(home, "Library", "Application Support")
        else:
            base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        path = os.path.join(base, "hpcui", "config.toml")
    try:
        with open(path, "rb") as fh:
            table = tomllib.load(fh).get("agent", {})
    except (OSError, ValueError):
        return DEFAULT_PERSIST_S  # the direct path reports a bad config, not us
    value = table.get("persist", DEFAULT_PERSIST_S) if isinstance(table, dict) else None
    try:
        return paths.persist_seconds(value)
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
    import time

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


def spawn(path: str, persist: float, logfile: str, *, keep_out: int) -> str:
    """Become the agent in a detached grandchild of this process, as `ssh -M` does: it
    has hpcui loaded already, so a cold call costs no second interpreter start. Returns
    '' once the agent listens, else what went wrong."""
    out = os.open(logfile, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    r, w = os.pipe()
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
            from hpcui.agent.server import main as serve

            code = serve([path, str(persist)], ready=w)
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


def request(argv: Sequence[str]) -> int:
    """Run `hpcui ARGV` in the agent, relaying its output and questions; the exit code."""
    path = paths.socket_path()
    paths.private_dir(os.path.dirname(path), create=False)  # others could reach it: no
    sock = connect(path)
    if sock is None:
        persist = persist_s()
        if persist <= 0:
            raise AgentUnavailable("[agent] persist = 0")
        sock = start(path, persist)
    return relay(sock, argv)


def relay(sock: socket.socket, argv: Sequence[str]) -> int:
    tty = {}
    for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout), ("stderr", sys.stderr)):
        try:
            tty[name] = bool(stream and stream.isatty())
        except (AttributeError, ValueError):
            tty[name] = False
    env = {k: os.environ[k] for k in ("NO_COLOR", "TERM") if k in os.environ}
    acked = printed = False
    try:
        wire.send(
            sock, {"v": paths.version(), "op": "cli", "argv": list(argv), "tty": tty, "env": env}
        )
        while True:
            msg = wire.recv(sock)
            if "out" in msg:
                printed = True
                sys.stdout.write(msg["out"])
                sys.stdout.flush()
            elif "err" in msg:
                printed = True
                sys.stderr.write(msg["err"])
                sys.stderr.flush()
            elif "ask" in msg:
                printed = True
                wire.send(sock, {"line": answer(str(msg["ask"]), bool(msg.get("secret")))})
            elif "ack" in msg:
                acked = True
            elif "exit" in msg:
                return int(msg["exit"])
            elif "retry" in msg:
                raise AgentUnavailable("replaced")  # version or config changed: start anew
            elif not acked:  # refused before starting: this call runs directly
                raise AgentUnavailable(str(msg.get("error", msg)))
            else:
                raise AgentLost(str(msg.get("error", msg)))
    except (wire.WireError, OSError) as exc:
        if not acked:
            raise AgentUnavailable(f"the agent went away before taking the command: {exc}") from exc
        if not printed and command_of(argv) in READ_ONLY:
            raise AgentUnavailable(f"the agent went away: {exc}") from exc  # safe to ask again
        raise AgentLost(str(exc)) from exc
    finally:
        sock.close()


def answer(question: str, secret: bool) -> str:
    if secret:
        import getpass

        try:
            return getpass.getpass(question)
        except EOFError:
            return ""
    sys.stdout.write(question)
    sys.stdout.flush()
    return sys.stdin.readline()


def direct(argv: Sequence[str]) -> int:
    from hpcui.cli import main as cli_main

    return cli_main(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `hpcui` script and `python -m hpcui.cli`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not wanted(argv):
        return direct(argv)
    for _attempt in range(2):  # a replaced or dead agent: once more with a new one
        try:
            return request(argv)
        except AgentUnavailable as exc:
            why = str(exc)
            if why in ("replaced",) or "went away" in why:
                continue
            return direct(argv)
        except paths.UnsafeDirectory as exc:
            print(f"hpcui: not using the agent: {exc}", file=sys.stderr)
            return direct(argv)
        except AgentLost as exc:
            print(
                f"hpcui: the agent went away while running `hpcui {' '.join(argv)}` ({exc}); "
                "whether it took effect is unknown. Check (e.g. `hpcui jobs`) and run it "
                "again if needed.",
                file=sys.stderr,
            )
            return EXIT_CONNECTION
        except KeyboardInterrupt:
            print("hpcui: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
    return direct(argv)
