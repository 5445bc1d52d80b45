"""`hpcui agent status|stop`: the per-user agent of this config (see hpcui.agent)."""

from __future__ import annotations

import argparse
import glob
import os
import socket
import time

from hpcui.cli import EXIT_OK
from hpcui.cli import output as out
from hpcui.cli.models import AgentStatus
from hpcui.errors import UsageError
from hpcui.transport.agent import paths, wire


def _ask(path: str, op: str) -> dict | None:
    """The agent's answer to `op`, None when no agent listens at `path`."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    try:
        sock.connect(path)
        wire.send(sock, {"v": paths.version(), "op": op})
        return wire.recv(sock)
    except (FileNotFoundError, ConnectionRefusedError):
        return None
    finally:
        sock.close()


def _gone(pid: int | None, path: str, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = pid is not None and os.path.exists(f"/proc/{pid}")
        if not alive and not os.path.exists(path):
            return True
        time.sleep(0.05)
    return False


def cmd_agent(args: argparse.Namespace) -> int:
    from hpcui.transport.agent.reach import (
        platform_without_agent,
    )

    why = platform_without_agent()
    if why:
        raise UsageError(f"there is no agent here: {why}. Every call logs in by itself.")
    path = paths.socket_path()
    if args.action == "stop":
        targets = sorted(glob.glob(os.path.join(os.path.dirname(path), "agent-*.sock")))
        if not args.all:
            targets = [path] if path in targets else []
        stopped = []
        for target in targets:
            reply = _ask(target, "stop")
            if reply is not None and reply.get("ok"):
                _gone(reply.get("pid"), target)
                stopped.append(reply.get("pid"))
        if args.json:
            out.emit_json(list[int], [p for p in stopped if isinstance(p, int)])
        elif stopped:
            print(f"stopped {len(stopped)} agent(s): pid {', '.join(map(str, stopped))}")
        else:
            print("no agent was running")
        return EXIT_OK
    reply = _ask(path, "status")
    status = AgentStatus(running=False, socket=path)
    if reply is not None and "pid" in reply:
        status = AgentStatus.model_validate({**reply, "running": True})
    if args.json:
        out.emit_json(AgentStatus, status)
        return EXIT_OK
    if not status.running:
        print(f"no agent serves this config (it starts with the next command; socket {path})")
        return EXIT_OK
    expires = "busy" if status.expires_in_s is None else f"exits in {status.expires_in_s:.0f} s"
    out.key_values(
        [
            ("agent", f"pid {status.pid}, hpcui {status.version}, {expires}"),
            ("persist", f"{status.persist_s:.0f} s after the last call"),
            ("served", f"{status.served} request(s), {status.refused} refused"),
            ("socket", status.socket),
            ("config", status.config),
        ]
    )
    for c in status.clusters:
        state = "connected" if c.connected else "not connected"
        print(f"  {c.name:<12} {state}, {c.connects} login(s)  {c.transport}")
    for f in status.forwards:
        print(f"  forward {f}")
    return EXIT_OK
