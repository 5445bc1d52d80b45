"""The agent as an OpenSSH ControlMaster for `ssh -W`: the fast path of `hpcui proxy`.

A ProxyCommand starts for every ssh, scp, rsync, git and VS Code connection. OpenSSH's
own client starts in a few milliseconds where a Python process needs tens, so for each
cluster it is logged in to the agent also listens on a socket that speaks OpenSSH's
multiplexing protocol (PROTOCOL.mux, "stdio forwarding" only): `ssh -S SOCKET -W
node:22 x` hands the agent its stdin and stdout (SCM_RIGHTS), the agent opens
direct-tcpip to node:22 on the login it holds and carries the bytes between them. The
host entries try it first and fall back to `hpcui proxy` (which can log in and ask the
2FA code) when the socket is not there. Only this user reaches the socket (0600 in the
agent's 0700 directory; the peer's uid is checked as on the agent's own socket).
"""

from __future__ import annotations

import array
import contextlib
import logging
import os
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

from hpcui.jobs.forwarding import pump
from hpcui.transport.agent.paths import mux_socket_path

log = logging.getLogger("hpcui.agent")

MUX_VERSION = 4
MSG_HELLO = 0x00000001
C_ALIVE_CHECK = 0x10000004
C_NEW_STDIO_FWD = 0x10000008
S_FAILURE = 0x80000003
S_ALIVE = 0x80000005
S_SESSION_OPENED = 0x80000006
#: a mux message is small; anything larger is not a client of ours
MAX_MESSAGE = 64 * 1024

_U32 = struct.Struct(">I")


class MuxError(Exception):
    """The peer broke the protocol or left."""


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise MuxError("the client left")
        buf += chunk
    return bytes(buf)


def read_message(sock: socket.socket) -> bytes:
    (n,) = _U32.unpack(_recv_exact(sock, 4))
    if n > MAX_MESSAGE:
        raise MuxError(f"a {n}-byte message")
    return _recv_exact(sock, n)


def write_message(sock: socket.socket, *fields: int | str) -> None:
    body = b"".join(
        _U32.pack(f) if isinstance(f, int) else _U32.pack(len(f.encode())) + f.encode()
        for f in fields
    )
    sock.sendall(_U32.pack(len(body)) + body)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def u32(self) -> int:
        if self.at + 4 > len(self.data):
            raise MuxError("a short message")
        (value,) = _U32.unpack_from(self.data, self.at)
        self.at += 4
        return int(value)

    def string(self) -> str:
        n = self.u32()
        if self.at + n > len(self.data):
            raise MuxError("a short message")
        text = self.data[self.at : self.at + n].decode(errors="replace")
        self.at += n
        return text


def receive_fd(sock: socket.socket) -> int:
    """One descriptor, as OpenSSH's mm_send_fd sends it (one byte, SCM_RIGHTS)."""
    fds = array.array("i")
    _msg, ancdata, _flags, _addr = sock.recvmsg(1, socket.CMSG_SPACE(fds.itemsize))
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise MuxError("no descriptor came")
    return int(fds[0])


class _PipeEnds:
    """The mux client's stdin and stdout as one end of `pump`."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd

    def fileno(self) -> int:
        return self.read_fd

    def recv(self, n: int) -> bytes:
        return os.read(self.read_fd, n)

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.write_fd, view) :]

    def shutdown_write(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.write_fd)
        self.write_fd = -1

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)


def serve_client(conn: socket.socket, open_tunnel: Any) -> None:
    """One `ssh -S ... -W host:port` client: hello, alive check, the stdio forward."""
    write_message(conn, MSG_HELLO, MUX_VERSION)
    hello = _Reader(read_message(conn))
    if hello.u32() != MSG_HELLO or hello.u32() != MUX_VERSION:
        raise MuxError("not an OpenSSH mux client of version 4")
    while True:
        msg = _Reader(read_message(conn))
        kind, rid = msg.u32(), msg.u32()
        if kind == C_ALIVE_CHECK:
            write_message(conn, S_ALIVE, rid, os.getpid())
            continue
        if kind != C_NEW_STDIO_FWD:
            write_message(conn, S_FAILURE, rid, "hpcui's agent serves only ssh -W")
            return
        msg.string()  # reserved
        host, port = msg.string(), msg.u32()
        ends = _PipeEnds(receive_fd(conn), receive_fd(conn))
        try:
            try:
                chan = open_tunnel(host, port)
            except Exception as exc:  # the client says it and fails; the caller falls back
                write_message(conn, S_FAILURE, rid, f"hpcui: {exc}")
                return
            write_message(conn, S_SESSION_OPENED, rid, 1)
            try:
                # the node's end is the end: the mux client holds its own copy of the pipes,
                # so the outer ssh sees EOF only once the control socket closes (below)
                pump(ends, chan, threading.Event(), until_chan_ends=True)  # type: ignore[arg-type]  # pipes, not a socket: pump uses fileno/recv/sendall/shutdown_write only
            finally:
                chan.close()
        finally:
            ends.close()
        return


class MuxListener:
    """The multiplexing socket of one cluster, while the agent is logged in to it."""

    def __init__(self, path: str, open_tunnel: Any) -> None:
        self.path = path
        self._open_tunnel = open_tunnel
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            self._sock.bind(path)
        finally:
            os.umask(old)
        self._sock.listen(64)
        self._inode = os.stat(path).st_ino
        self._closed = threading.Event()
        threading.Thread(target=self._accept, name="hpcui-mux", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            uid = PEER_UID(conn) if PEER_UID is not None else None
            if uid is not None and uid != os.getuid():
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            serve_client(conn, self._open_tunnel)
        except (MuxError, OSError) as exc:
            log.info("mux client: %s", exc)
        finally:
            conn.close()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        with contextlib.suppress(OSError):  # only ours: a next agent may have bound it anew
            if os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)


# -- the listeners this agent holds, one per cluster it is logged in to ------------------------

#: the agent's own socket (set when it starts): the mux sockets are named after it
AGENT_SOCKET: str | None = None
#: the agent's check of who connects (hpcui.agent.server.peer_uid, set when it starts)
PEER_UID: Callable[[socket.socket], int | None] | None = None
_listeners: dict[str, MuxListener] = {}
_lock = threading.Lock()


def ensure(cluster: Any) -> None:
    """A mux socket for `cluster` once the agent holds a login to it (never logs in: a
    connection that dropped is made again by the fallback, `hpcui proxy`, which can ask)."""
    if AGENT_SOCKET is None or getattr(cluster._transport, "_conn", None) is None:
        return
    with _lock:
        if cluster.name in _listeners:
            return
        transport = cluster.transport
        path = mux_socket_path(AGENT_SOCKET, cluster.name)
        try:
            _listeners[cluster.name] = MuxListener(path, transport.open_tunnel)
        except OSError as exc:
            log.info("no mux socket for %s: %s", cluster.name, exc)


def close_all() -> None:
    with _lock:
        for listener in _listeners.values():
            listener.close()
        _listeners.clear()
