"""Forwards outlive the agent that held them.

An agent is replaced when a file its logins read changes (hpcui's config, ~/.ssh/config,
a key): its next caller starts a new one. The forwards it held would die with it while
their jobs run on; instead they are handed over. The old agent writes what each forward
is (`Forward.origin`) beside its socket path (0600), stops taking requests and keeps
forwarding; the new agent makes each forward again on the same local port with the new
config and removes the file; then the old agent closes its own and exits.

On Linux the new listener shares the port with the old one (SO_REUSEPORT, which the
kernel allows only for the same user): no moment where the port is free for another
local user to bind. Elsewhere the old agent closes its listeners first and the new one
binds them as soon as it can (a short gap).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from hpcui.jobs import forwarding

log = logging.getLogger(__name__)

#: how long the old agent waits for a new one to take its forwards (the caller that
#: found it stale starts the new one at once); past it, it keeps them until they end
TAKE_S = 60.0
#: how long the new agent tries to bind a port the old agent has not released yet
BIND_S = 10.0


def handover_path(socket_path: str) -> Path:
    return Path(f"{socket_path}.handover.json")


def taken_path(socket_path: str) -> Path:
    """The local ports the new agent listens on now (written before the offer goes)."""
    return Path(f"{socket_path}.handover.taken")


def offer(socket_path: str) -> list[forwarding.Forward]:
    """Write the forwards a new agent should take over; those that can be made again."""
    forwards = [f for f in forwarding.active() if f.origin]
    if not forwards:
        return []
    entries = [{**(f.origin or {}), "local_port": f.local_port} for f in forwards]
    path = handover_path(socket_path)
    tmp = path.with_name(path.name + f".{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"pid": os.getpid(), "forwards": entries}, fh)
    os.replace(tmp, path)
    if not forwarding.SHARED_PORTS:  # the port cannot be shared: free it for the new agent
        for f in forwards:
            f.close()
    log.info("offered %d forward(s) to the next agent", len(entries))
    return forwards


def wait_taken(socket_path: str, forwards: list[forwarding.Forward]) -> None:
    """Until the new agent took the forwards (then ours close), or they ended: one it
    could not make again (its cluster asks a code no one can give here) stays ours."""
    path, taken_file = handover_path(socket_path), taken_path(socket_path)
    ends = time.monotonic() + TAKE_S
    while path.exists() and time.monotonic() < ends and any(not f.closed for f in forwards):
        time.sleep(0.1)
    taken: set[int] = set()
    if not path.exists():
        with contextlib.suppress(OSError, ValueError):
            taken = set(json.loads(taken_file.read_text()))
    else:
        with contextlib.suppress(OSError):
            path.unlink()  # too late now: a slow new agent must not take them twice
    with contextlib.suppress(OSError):
        taken_file.unlink()
    for f in forwards:
        if f.local_port in taken:
            f.close()
    kept = [f for f in forwards if not f.closed]
    if kept:
        log.info("keeping %d forward(s) no agent took until they end", len(kept))
    while any(not f.closed for f in kept):
        time.sleep(1.0)


def take(socket_path: str) -> list[forwarding.Forward]:
    """Make again, with this agent's config, the forwards the old agent offered."""
    path = handover_path(socket_path)
    try:
        offered = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    made = []
    try:
        for entry in offered.get("forwards", []):
            try:
                made.append(forwarding.keep(_again(entry)))
            except Exception as exc:  # that job ended meanwhile, its cluster is gone, ...
                log.info("could not take over forward %s: %s", entry, exc)
    finally:
        taken = taken_path(socket_path)
        fd = os.open(taken, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump([f.local_port for f in made], fh)
        with contextlib.suppress(OSError):
            path.unlink()  # the old agent closes the ones taken now
    log.info("took over %d forward(s)", len(made))
    return made


def _again(entry: dict[str, Any]) -> forwarding.Forward:
    from hpcui.clusters.api import connect
    from hpcui.errors import UsageError

    cluster = connect(str(entry["cluster"]))
    ends = time.monotonic() + BIND_S
    while True:
        try:
            if entry.get("kind") == "login":
                from hpcui.services import web

                service = web.LoginService(str(entry["folder"]), int(entry["pid"]))
                return web.forward_login(
                    cluster, service, int(entry["port"]),
                    local_port=int(entry["local_port"]), taking_over=True,
                )  # fmt: skip
            return cluster.control.forward(
                str(entry["job_id"]), int(entry["port"]),
                local_port=int(entry["local_port"]), taking_over=True,
            )  # fmt: skip
        except UsageError as exc:
            if "is taken" not in str(exc) or time.monotonic() > ends:
                raise
            time.sleep(0.1)  # the old agent is releasing it
