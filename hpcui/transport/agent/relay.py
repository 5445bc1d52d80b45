"""`hpcui proxy CLUSTER JOB`, the thin side: what ssh runs as its ProxyCommand.

Standard library only and nothing else imported: ssh, scp, rsync, git and VS Code start it
for every connection to a job's node. It asks the agent for the node's port (the agent
logs in once per cluster; a first login's questions are asked on /dev/tty, since stdin
and stdout are ssh's stream), then either hands the agent's socket to ssh (`--fdpass`,
for `ProxyUseFdpass yes`: ssh and the agent then talk directly and this process exits)
or relays stdin and stdout to it until either side ends.
"""

from __future__ import annotations

import os
import select
import socket
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple, TextIO

from hpcui.transport.agent import paths, wire
from hpcui.transport.agent.reach import ACK_S, AgentUnavailable, open_agent

CHUNK = 1024 * 1024


class ProxyArgs(NamedTuple):
    cluster: str
    job: str
    port: int
    fdpass: bool


def parse(words: Sequence[str]) -> ProxyArgs | None:
    """`[--fdpass] [--port N] CLUSTER JOB` (or `CLUSTER:JOB`); None when it is anything
    else (the full CLI then parses it and says what is wrong)."""
    fdpass, port, rest = False, 22, []
    it = iter(words)
    for w in it:
        if w == "--fdpass":
            fdpass = True
        elif w == "--port":
            value = next(it, "")
            if not value.isdigit() or not 0 < int(value) < 65536:
                return None
            port = int(value)
        elif w.startswith("-"):
            return None
        else:
            rest.append(w)
    if len(rest) == 1 and ":" in rest[0]:
        rest = rest[0].split(":", 1)
    if len(rest) != 2 or not all(rest):
        return None
    return ProxyArgs(rest[0], rest[1], port, fdpass)


def run(args: ProxyArgs) -> int:
    """Through the agent; AgentUnavailable when it cannot serve (the caller goes direct)."""
    sock = open_agent()
    try:
        node = handshake(sock, args)
        if node is None:
            return 1
        if args.fdpass:
            socket.send_fds(_stdout_socket(), [b"\0"], [sock.fileno()])
            return 0
        relay(sock, sys.stdin.fileno(), sys.stdout.fileno())
        return 0
    finally:
        sock.close()


def handshake(sock: socket.socket, args: ProxyArgs) -> str | None:
    """The agent's answer: the node (the socket is then the node's stream), or None after
    its reason was said on stderr."""
    tty = _terminal()
    sock.settimeout(ACK_S)
    wire.send(
        sock,
        {"v": paths.version(), "op": "proxy", "cluster": args.cluster, "job": args.job,
         "port": args.port, "tty": {"stdin": tty is not None, "stdout": False,
                                    "stderr": _isatty(2)}},
    )  # fmt: skip
    acked = False
    try:
        while True:
            msg = wire.recv(sock)
            if "ack" in msg:
                acked = True
                sock.settimeout(None)
            elif "raw" in msg:
                return str(msg["raw"])
            elif "fail" in msg:
                print(f"hpcui proxy: {msg['fail']}", file=sys.stderr)
                return None
            elif "out" in msg or "err" in msg:  # notes: never on stdout (ssh's stream)
                sys.stderr.write(str(msg.get("out") or msg.get("err")))
                sys.stderr.flush()
            elif "ask" in msg:
                wire.send(sock, {"line": _ask(tty, str(msg["ask"]), bool(msg.get("secret")))})
            elif "retry" in msg:
                raise AgentUnavailable("replaced")
            elif not acked:
                raise AgentUnavailable(str(msg.get("error", msg)))
            else:
                print(f"hpcui proxy: {msg.get('error', msg)}", file=sys.stderr)
                return None
    except TimeoutError:
        raise AgentUnavailable(f"the agent did not answer in {ACK_S:.0f} s") from None
    except (wire.WireError, OSError) as exc:
        if not acked:
            raise AgentUnavailable(f"the agent went away: {exc}") from exc
        print(f"hpcui proxy: the agent went away: {exc}", file=sys.stderr)
        return None
    finally:
        if tty is not None:
            tty.close()


def relay(sock: Any, fd_in: int, fd_out: int) -> None:
    """stdin -> socket and socket -> stdout until the node's side ends; the end of stdin
    is passed on as a half-close (ssh's last bytes still get their answer). `sock`: a
    socket, or anything with its recv/sendall/shutdown/fileno (a paramiko channel)."""
    reading = {fd_in, sock.fileno()}
    while sock.fileno() in reading:
        ready, _, _ = select.select(list(reading), [], [])
        if fd_in in ready:
            data = os.read(fd_in, CHUNK)
            if data:
                sock.sendall(data)
            else:
                reading.discard(fd_in)
                try:
                    sock.shutdown(socket.SHUT_WR)
                except OSError:
                    return
        if sock.fileno() in ready:
            try:
                data = sock.recv(CHUNK)
            except OSError:
                return
            if not data:
                return
            view = memoryview(data)
            while view:
                view = view[os.write(fd_out, view) :]


def _stdout_socket() -> socket.socket:
    try:
        return socket.socket(fileno=os.dup(sys.stdout.fileno()))
    except OSError as exc:
        raise SystemExit(
            f"hpcui proxy: --fdpass needs ssh's ProxyUseFdpass (stdout is not a socket: {exc})"
        ) from None


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _terminal() -> TextIO | None:
    """The controlling terminal for a first login's questions, when there is one."""
    try:
        return open("/dev/tty", "r+", encoding="utf-8", errors="replace")
    except OSError:
        return None


def _ask(tty: TextIO | None, question: str, secret: bool) -> str:
    if tty is None:
        return ""  # no terminal (VS Code): the login fails and says to log in first
    if secret:
        import getpass

        return getpass.getpass(question, stream=tty)
    tty.write(question)
    tty.flush()
    return tty.readline()
