"""The agent process: `python -m hpcui.agent.server SOCKET PERSIST_S`.

Started detached by the first `hpcui` call that needs it (hpcui.agent.client). It binds
its socket first (so the client can connect at once), then serves each connection in a
thread: a CLI command run in-process on the agent's shared Cluster objects (one SSH
connection per cluster, 2FA answered once), `status` or `stop`. It exits `persist`
seconds after the last request ended, when its config file changes, or on `stop`.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from hpcui.agent import handover
from hpcui.cli.routing import Client, ClientGone, serving
from hpcui.jobs import forwarding
from hpcui.transport.agent import paths, wire

log = logging.getLogger("hpcui.agent")

#: a first frame must arrive this fast: a silent or garbage-sending peer holds no thread
FIRST_FRAME_TIMEOUT_S = 10.0


#: macOS/FreeBSD's struct xucred: u_int cr_version, uid_t cr_uid, short cr_ngroups,
#: gid_t cr_groups[16] (76 bytes with the padding after cr_ngroups); version 0
XUCRED = struct.Struct("=IIh2x16I")
#: LOCAL_PEERCRED at level SOL_LOCAL (0) in <sys/un.h>; Python names them on some builds
SOL_LOCAL = getattr(socket, "SOL_LOCAL", 0)
LOCAL_PEERCRED = getattr(socket, "LOCAL_PEERCRED", 0x001)


def peer_uid(conn: socket.socket) -> int | None:
    """The connecting process's uid from the kernel: SO_PEERCRED on Linux, LOCAL_PEERCRED
    (what getpeereid(3) reads) on macOS and the BSDs; None elsewhere, where the 0700
    directory is the only guard."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is not None:
        raw = conn.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", raw)
        return uid
    if sys.platform == "darwin" or "bsd" in sys.platform:
        raw = conn.getsockopt(SOL_LOCAL, LOCAL_PEERCRED, XUCRED.size)
        version, uid, *_ = XUCRED.unpack_from(raw.ljust(XUCRED.size, b"\0"))
        return uid if version == 0 else None
    return None


def config_stamp() -> tuple[str, tuple[tuple[str, float | str | None], ...]]:
    """hpcui's config and every file its clusters' logins read (ssh configs, keys): an
    edited Port, a removed key or jump host must not stay in use in a long-lived agent,
    which is replaced when any of them changes (its next caller starts a new one)."""

    from hpcui.config import (
        config_path,
        load_config,
    )

    p = config_path()
    files = [p, Path.home() / ".ssh" / "config"]
    try:
        for c in load_config().clusters.values():
            files += [Path(f).expanduser() for f in (c.ssh_config, c.identity_file) if f]
    except Exception:  # a config that does not load: its own mtime says it changed
        pass

    user_config = Path.home() / ".ssh" / "config"

    def mtime(f: Path) -> float | str | None:
        if f == user_config:  # the Include line hpcui adds (to a new file too) changes no login
            from hpcui.services.node_ssh import (
                without_own_lines,
            )

            try:
                return without_own_lines(f.read_text(errors="replace"))
            except OSError:
                return ""
        try:
            return f.stat().st_mtime
        except OSError:
            return None

    return str(p), tuple((str(f), mtime(f)) for f in dict.fromkeys(files))


class Agent:
    def __init__(self, path: str, persist_s: float) -> None:
        self.path = path
        self.persist_s = persist_s
        self.started = time.time()
        self.last_used = time.monotonic()
        self.active = 0
        self.served = 0
        self.refused = 0
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._inode: int | None = None
        self._stamp: tuple[str, tuple[tuple[str, float | str | None], ...]] | None = None
        self._handed: list[forwarding.Forward] = []  # offered to the next agent

    # -- lifetime ---------------------------------------------------------------------------

    def bind(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is born 0600: no window where others may connect
        try:
            sock.bind(self.path)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        sock.listen(64)
        sock.settimeout(0.5)
        self._listener = sock
        self._inode = os.stat(self.path).st_ino

    def prepare(self) -> None:
        """What every request needs, loaded once: the CLI, routed stdio, shared clusters."""
        from hpcui.cli import (
            common,
            routing,
        )

        os.environ.pop("NO_COLOR", None)  # each client says its own
        routing.install()
        common.SHARED_BY_AGENT = True
        self._stamp = config_stamp()
        from hpcui.agent import mux, ssh_hosts

        mux.AGENT_SOCKET = self.path
        mux.PEER_UID = peer_uid  # the same check of who connects as on the agent's socket
        ssh_hosts.keep(self.stopping)

    def serve(self) -> None:
        assert self._listener is not None
        while not self.stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                with self._lock:
                    idle = self.active == 0 and time.monotonic() - self.last_used >= self.persist_s
                    idle = idle and not forwarding.active()  # a forward keeps the agent
                if idle:
                    log.info("idle for %.0f s: exiting", self.persist_s)
                    break
                continue
            except OSError:
                break
            with self._lock:
                self.active += 1
            threading.Thread(target=self._serve_one, args=(conn,), daemon=True).start()
        self.shutdown()

    def withdraw(self) -> None:
        """Stop taking requests: the socket path goes (a new agent may bind it at once)."""
        self.stopping.set()
        from hpcui.agent import mux

        mux.close_all()
        try:
            if self._inode is not None and os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)
        except OSError:
            pass
        self._inode = None

    def shutdown(self) -> None:
        self.withdraw()
        if self._listener is not None:
            self._listener.close()
        deadline = time.monotonic() + 30  # requests in flight may finish, boundedly
        while self.active and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._handed:  # forwarding until the next agent holds them (or they end)
            handover.wait_taken(self.path, self._handed)
        from hpcui.clusters import api

        for cluster in list(api._clusters.values()):
            try:
                cluster.close()
            except Exception:  # closing is best effort; the process is ending
                pass

    # -- one connection ---------------------------------------------------------------------

    def _serve_one(self, conn: socket.socket) -> None:
        try:
            uid = peer_uid(conn)
            if uid is not None and uid != os.getuid():
                with self._lock:
                    self.refused += 1
                log.warning(
                    "refused a client of uid %d (this agent serves uid %d)", uid, os.getuid()
                )
                try:
                    wire.send(conn, {"error": "refused: this agent serves another user"})
                except OSError:
                    pass
                return
            conn.settimeout(FIRST_FRAME_TIMEOUT_S)
            req = wire.recv(conn)
            conn.settimeout(None)
            self._dispatch(conn, req)
        except (wire.WireError, OSError, ClientGone, KeyboardInterrupt) as exc:
            log.info("dropped a client: %r", exc)
        except Exception:  # one request's bug never takes the agent down
            log.exception("request failed")
        finally:
            conn.close()
            with self._lock:
                self.active -= 1
                self.served += 1
                self.last_used = time.monotonic()

    def _dispatch(self, conn: socket.socket, req: dict[str, Any]) -> None:
        op = req.get("op")
        if req.get("v") != paths.version() or self._stale_config():
            with self._lock:  # its forwards go on in the next agent (hpcui.agent.handover)
                if not self.stopping.is_set() and not self._handed:
                    self._handed = handover.offer(self.path)
            self.withdraw()  # the client starts the agent its version and config need
            wire.send(conn, {"retry": "agent replaced"})
            return
        if op == "status":
            wire.send(conn, self.status())
        elif op == "stop":
            self.withdraw()
            wire.send(conn, {"ok": True, "pid": os.getpid()})
        elif op == "cli":
            self._cli(conn, req)
        elif op == "proxy":
            from hpcui.agent.proxy import (
                serve_proxy,
            )

            serve_proxy(conn, req)
        elif op == "call":
            from hpcui.agent.calls import (
                serve_call,
            )

            serve_call(conn, req)
        else:
            wire.send(conn, {"error": f"unknown request {op!r}"})

    def _stale_config(self) -> bool:
        return self._stamp is not None and config_stamp() != self._stamp

    def _cli(self, conn: socket.socket, req: dict[str, Any]) -> None:
        argv = req.get("argv")
        tty, env = req.get("tty"), req.get("env")
        if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
            wire.send(conn, {"error": "argv must be a list of strings"})
            return
        from hpcui.agent.this_machine import (
            local_clusters,
        )

        here = local_clusters(argv)
        if here:  # before the ack: nothing ran, the caller runs it with its environment
            wire.send(conn, {"here": f"{', '.join(here)} is this machine"})
            return
        client = Client(
            conn, tty if isinstance(tty, dict) else {}, env if isinstance(env, dict) else {}
        )
        client.send({"ack": True})
        from hpcui.cli import main

        watch = HangupWatch(conn)
        with serving(client), watch:
            try:
                code: Any = main(argv)
            except SystemExit as exc:  # argparse: usage error (2) or --help (0)
                code = exc.code
            if not isinstance(code, int):
                if code is not None:
                    client.write("err", f"{code}\n")
                code = 1 if code is not None else 0
            client.flush()
        client.send({"exit": code})

    def status(self) -> dict[str, Any]:
        from hpcui.clusters import api

        clusters = []
        for name, cluster in sorted(api._clusters.items()):
            t = cluster._transport
            conn = getattr(t, "_conn", None)
            clusters.append(
                {
                    "name": name,
                    "transport": getattr(t, "description", "not opened"),
                    "connected": bool(conn is not None and conn.is_active()),
                    "connects": getattr(t, "connects", 0),
                }
            )
        with self._lock:
            others = self.active - 1  # not counting the status request itself
            idle = 0.0 if others else time.monotonic() - self.last_used
            return {
                "pid": os.getpid(),
                "version": paths.version(),
                "socket": self.path,
                "started": self.started,
                "persist_s": self.persist_s,
                "idle_s": round(idle, 3),
                "expires_in_s": None if others else round(max(0.0, self.persist_s - idle), 3),
                "active": others,
                "served": self.served,
                "refused": self.refused,
                "config": self._stamp[0] if self._stamp else None,
                "clusters": clusters,
                "forwards": [f.describe() for f in forwarding.active()],
            }


class HangupWatch:
    """Ends the command a client left (Ctrl-C, a closed pipe): `hpcui logs -f` of a quiet
    job would otherwise poll in the agent until the job ends. Watches the socket for the
    peer's hang-up without reading it (answers to questions travel on it too) and raises
    KeyboardInterrupt in the command's thread, as Ctrl-C does in a direct call; the
    command stops at its next Python line (a sleep ends first)."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.thread_id = threading.get_ident()
        self._lock = threading.Lock()
        self._done = False
        self.interrupted = False

    def __enter__(self) -> HangupWatch:
        threading.Thread(target=self._watch, daemon=True, name="hangup-watch").start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._done = True

    def _watch(self) -> None:
        while True:
            with self._lock:
                if self._done:
                    return
            if hung_up(self.conn, 0.5):
                break
        # not inside the connection's code: an exception raised between a lock's acquire
        # and its `try` there (paramiko has many) would leave the lock held, and the next
        # command on that connection would wait forever
        deadline = time.monotonic() + DEFER_S
        while in_connection_code(self.thread_id) and time.monotonic() < deadline:
            time.sleep(0.02)
        with self._lock:
            if self._done:
                return
            self._done = self.interrupted = True
            log.info("client hung up: interrupting its command")
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self.thread_id), ctypes.py_object(KeyboardInterrupt)
            )


#: how long an interrupt waits for the command to leave the connection's code
DEFER_S = 5.0
#: modules whose locks an asynchronous exception must not interrupt
CONNECTION_CODE = ("paramiko", "hpcui.transport")


def in_connection_code(thread_id: int) -> bool:
    """The thread is running (or blocked) somewhere inside the SSH connection's code."""
    frame = sys._current_frames().get(thread_id)
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(CONNECTION_CODE):
            return True
        frame = frame.f_back
    return False


def hung_up(conn: socket.socket, wait_s: float) -> bool:
    """True once the peer closed its end; never consumes what it sent."""
    try:
        readable, _, _ = select.select([conn], [], [], wait_s)
        if not readable:
            return False
        if conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
            return True
        time.sleep(wait_s)  # an answer waits for the command to read it
        return False
    except BlockingIOError:
        return False
    except OSError:
        return True


def main(argv: list[str], ready: int | None = None) -> int:
    """Serve until idle. `ready`: a pipe told "ok" once the socket listens (or why not)."""
    path, persist_s = argv[0], float(argv[1])
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s: %(message)s"
    )
    logging.getLogger("paramiko").setLevel(logging.WARNING)
    os.environ["HPCUI_AGENT"] = "off"  # what runs here connects by itself
    agent = Agent(path, persist_s)
    try:
        agent.bind()
    except OSError as exc:  # another agent won the race for this path: it serves
        log.info("not starting: %s", exc)
        if ready is not None:
            os.write(ready, b"ok")
            os.close(ready)
        return 0
    if ready is not None:
        os.write(ready, b"ok")
        os.close(ready)
    log.info("agent %d listening on %s (persist %.0f s)", os.getpid(), path, persist_s)
    agent.prepare()
    if handover.handover_path(path).exists():  # the forwards of the agent this one replaces
        threading.Thread(target=handover.take, args=(path,), name="handover", daemon=True).start()
    agent.serve()
    log.info("agent %d exits", os.getpid())
    return 0


if __name__ == "__main__":  # argv: SOCKET PERSIST_S [READY_FD] [--detach]
    args = [a for a in sys.argv[1:] if a != "--detach"]
    if "--detach" in sys.argv and os.fork():
        os._exit(0)  # the launcher returns at once; the agent carries on, nobody's child
    sys.exit(main(args[:2], ready=int(args[2]) if len(args) > 2 else None))
