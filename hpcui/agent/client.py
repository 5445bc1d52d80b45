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

from hpcui.transport.agent import paths, wire
from hpcui.transport.agent.reach import (
    ACK_S,
    AgentSilent,
    AgentUnavailable,
    agent_enabled,
    open_agent,
    platform_without_agent,
    turned_off,
)

#: run inside the agent: they read no local file and import no user code (`profiles`
#: reads no cluster and describes this machine: the caller's own environment answers it)
AGENT_COMMANDS = frozenset(
    {"jobs", "show", "logs", "cancel", "stop", "quota", "modules", "partitions", "clusters",
     "exec", "clean", "usage", "hold", "release", "requeue", "update", "free", "budget", "files",
     "forward", "jupyter", "tensorboard", "ssh-config"}
)  # fmt: skip
#: safe to send again to a new agent when the first died before printing anything
READ_ONLY = frozenset(
    {
        "jobs",
        "show",
        "logs",
        "quota",
        "modules",
        "partitions",
        "clusters",
        "usage",
        "free",
        "budget",
        "ssh-config",
    }
)
#: options that make a call run here: tracebacks, help and schemas are local matters
LOCAL_OPTIONS = frozenset({"--debug", "-h", "--help", "--version", "--json-schema"})
EXIT_CONNECTION = 3
EXIT_INTERRUPTED = 130


class AgentLost(Exception):
    """The agent went away after it took the command."""


class RunHere(Exception):
    """The call is about this machine: the caller runs it, with its own environment
    (hpcui.agent.this_machine says why)."""


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


def wanted(argv: Sequence[str]) -> bool:
    return (
        agent_enabled()
        and command_of(argv) in AGENT_COMMANDS
        and not any(a.split("=")[0] in LOCAL_OPTIONS for a in argv)
    )


def request(argv: Sequence[str]) -> int:
    """Run `hpcui ARGV` in the agent, relaying its output and questions; the exit code."""
    return relay(open_agent(), argv)


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
        sock.settimeout(ACK_S)  # a stopped or hung agent must not hang the caller
        wire.send(
            sock, {"v": paths.version(), "op": "cli", "argv": list(argv), "tty": tty, "env": env}
        )
        while True:
            try:
                msg = wire.recv(sock)
            except TimeoutError:
                if acked:
                    raise
                raise AgentSilent(f"the agent did not answer in {ACK_S:.0f} s") from None
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
                sock.settimeout(None)  # the command itself takes as long as it takes
            elif "exit" in msg:
                return int(msg["exit"])
            elif "here" in msg and not acked:  # about this machine: run with our own env
                raise RunHere(str(msg["here"]))
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


def proxy(argv: list[str]) -> int:
    """`hpcui proxy CLUSTER JOB` through the agent (ssh's ProxyCommand: it starts for every
    connection, so it loads nothing beyond the thin client); directly when the agent
    cannot serve it."""
    from hpcui.transport.agent import relay

    parsed = relay.parse(argv[1:])
    if parsed is None:  # the full CLI says what is wrong with it
        return direct(argv)
    for _attempt in range(2):
        try:
            return relay.run(parsed)
        except AgentUnavailable as exc:
            if str(exc) == "replaced" or "went away" in str(exc):
                continue
            break
        except paths.UnsafeDirectory as exc:
            print(f"hpcui: not using the agent: {exc}", file=sys.stderr)
            break
    return direct(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `hpcui` script and `python -m hpcui.cli`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["proxy"] and agent_enabled():
        return proxy(argv)
    if argv == ["--version"]:  # scripts ask it to check the install: no argparse, no CLI
        from hpcui.version import __version__

        print(f"hpcui {__version__}")
        return 0
    if not wanted(argv):
        if command_of(argv) in AGENT_COMMANDS and not turned_off():
            why = platform_without_agent()
            if why:  # one line: a 2FA site asks its code on every call here
                print(f"hpcui: no agent: {why}; each call logs in by itself", file=sys.stderr)
        return direct(argv)
    for _attempt in range(2):  # a replaced or dead agent: once more with a new one
        try:
            return request(argv)
        except RunHere:
            return direct(argv)
        except AgentSilent as exc:
            print(
                f"hpcui: {exc}; running this call here (`hpcui agent stop` ends it)",
                file=sys.stderr,
            )
            return direct(argv)
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


if __name__ == "__main__":  # `python -m hpcui.cli` runs this module by name
    sys.exit(main())
