"""A port of a job's node on this machine: a listener on 127.0.0.1, each connection
carried over the cluster's SSH connection (direct-tcpip from the login node, through any
jump chain), until the job ends or the forward is closed.

`open_tunnel(host, port)` gives a socket-like channel (paramiko's, a local socket, or the
agent's relay); a connection that comes after the SSH connection was re-made uses the new
one. The listener binds 127.0.0.1 only: nobody else on this machine's network reaches it.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from hpcui.backends.nodelist import expand_nodelist
from hpcui.backends.records import JobDetails
from hpcui.backends.states import JobState
from hpcui.errors import HpcuiError, UsageError
from hpcui.transport.base import ByteChannel

log = logging.getLogger(__name__)

#: how often a forward asks whether its job still runs
JOB_CHECK_S = 15.0
#: Linux's SO_REUSEPORT shares a port only among sockets of the same user (BSD's does not)
SHARED_PORTS = sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")
#: a new connection asks the scheduler first when its last answer is older than this
FRESH_S = 2.0
#: bytes per read on either side (64 KiB gave 176 MiB/s, 1 MiB 209: benchmarks/forward_bench)
CHUNK = 1024 * 1024
#: the loopback address every listener binds (never 0.0.0.0)
LOOPBACK = "127.0.0.1"


def node_of(details: JobDetails, user: str | None) -> str:
    """The node a forward goes to: the job's first node, once it runs. A job of another
    user is refused (its node's ports are not the user's business)."""
    if user and details.user and details.user != user:
        raise UsageError(
            f"Job {details.job_id} belongs to {details.user}, not {user}: hpcui forwards "
            "ports of your own jobs only."
        )
    if details.state is not JobState.RUNNING or not details.nodelist:
        waits = " (wait for it to start)" if not details.state.is_final else ""
        raise UsageError(
            f"Job {details.job_id} is {details.state.value}: a connection to its node needs a running job{waits}."
        )
    return expand_nodelist(details.nodelist)[0]


def free_port(preferred: int | None = None) -> int:
    """`preferred` when it is free on 127.0.0.1, else one the system picks."""
    for port in (preferred, 0) if preferred else (0,):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((LOOPBACK, port))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise UsageError("No free local port on 127.0.0.1.")  # pragma: no cover - bind(0) fails


class Forward:
    """Connections to 127.0.0.1:`local_port` go to `node`:`remote_port` until `close()`
    or the job ends.

    A job's port is free for anyone once the job ended: another user may bind it and
    would receive what the browser sends (a token, a cookie). So no connection is carried
    once the job is known to be over: `known_over()` (what this process already knows,
    e.g. the status service fed by the pushed job ends: no round trip) is asked on every
    connection and every second; `ended()` (the scheduler) every JOB_CHECK_S, and before
    a new connection when it was last asked more than FRESH_S ago.
    """

    def __init__(
        self,
        *,
        cluster: str,
        job_id: str,
        node: str,
        remote_port: int,
        open_tunnel: Callable[[str, int], ByteChannel],
        local_port: int | None = None,
        ended: Callable[[], bool] | None = None,
        known_over: Callable[[], bool] | None = None,
        origin: dict[str, Any] | None = None,
        taking_over: bool = False,
    ) -> None:
        self.cluster, self.job_id, self.node = cluster, job_id, node
        self.remote_port = remote_port
        self._open_tunnel = open_tunnel
        self._ended = ended
        self._known_over = known_over
        self._asked_at = time.monotonic()  # when `ended()` was last asked (the caller just did)
        self._ask_lock = threading.Lock()
        self.refused = 0  # connections refused because the job was over
        #: how to make this forward again (a new agent takes it over: hpcui.agent.handover)
        self.origin = origin
        try:
            self._listener = listen(local_port, taking_over=taking_over)
        except OSError as exc:
            raise UsageError(
                f"Local port {local_port} is taken ({exc.strerror}): pick another with "
                "--local, or leave it out for a free one."
            ) from None
        self._listener.listen(16)
        self.local_port = int(self._listener.getsockname()[1])
        self.connections = 0  # accepted so far
        self.errors: list[str] = []  # why tunnels could not be opened (the last few)
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._thread = threading.Thread(
            target=self._serve, name=f"hpcui-forward-{self.local_port}", daemon=True
        )
        self._thread.start()

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.local_port}"

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def describe(self) -> str:
        return (
            f"{self.address} -> {self.node}:{self.remote_port} "
            f"(job {self.job_id} on {self.cluster})"
        )

    def close(self) -> None:
        """Stop listening (the port is free again) and end the open connections."""
        if self._closed.is_set():
            return
        self._closed.set()
        with contextlib.suppress(OSError):  # wakes the accept loop: LISTEN ends now
            self._listener.shutdown(socket.SHUT_RDWR)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)  # its select() holds the socket until it returns
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for conn in list(self._open):
                with contextlib.suppress(OSError):
                    conn.close()

    def wait(self, timeout: float | None = None) -> bool:
        """Until the forward closes (the job ended, close()); True when it did."""
        return self._closed.wait(timeout)

    def __enter__(self) -> Forward:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the accept loop and the byte pumps ---------------------------------------------------

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                ready, _, _ = select.select([self._listener], [], [], 1.0)
            except (OSError, ValueError):  # closed under us
                break
            if ready:
                try:
                    conn, _ = self._listener.accept()
                except OSError:
                    break
                self.connections += 1
                threading.Thread(target=self._carry, args=(conn,), daemon=True).start()
            if self._over(fresh_s=JOB_CHECK_S):
                log.info("forward %s: job %s ended", self.address, self.job_id)
                break
        self.close()

    def _over(self, fresh_s: float) -> bool:
        """The job is over: as this process knows it, else the scheduler when its last
        answer is older than `fresh_s` (one question for a burst of connections)."""
        if self._known_over is not None and self._known_over():
            return True
        if self._ended is None:
            return False
        with self._ask_lock:
            if time.monotonic() - self._asked_at < fresh_s:
                return False
            self._asked_at = time.monotonic()
            try:
                return bool(self._ended())
            except HpcuiError as exc:  # a dropped link: the forward stays, asked again later
                log.info("forward %s: could not check job %s: %s", self.address, self.job_id, exc)
                return False

    def _carry(self, conn: socket.socket) -> None:
        if self._over(fresh_s=FRESH_S):  # its port may be another user's by now
            self.refused += 1
            log.info("forward %s: job %s is over: connection refused", self.address, self.job_id)
            conn.close()
            self.close()
            return
        try:
            chan = self._open_tunnel(self.node, self.remote_port)
        except Exception as exc:  # this connection fails; the forward serves the next one
            said = str(exc) if isinstance(exc, HpcuiError) else f"{type(exc).__name__}: {exc}"
            self.errors = [*self.errors[-4:], said]
            log.info("forward %s: %s", self.address, said)
            conn.close()
            return
        with self._lock:
            self._open.add(conn)
        try:
            pump(conn, chan, self._closed)
        finally:
            with self._lock:
                self._open.discard(conn)
            for end in (conn, chan):
                with contextlib.suppress(Exception):
                    end.close()


def pump(
    conn: socket.socket, chan: ByteChannel, stop: threading.Event, *, until_chan_ends: bool = False
) -> None:
    """Bytes both ways (one thread, select on both) until both sides ended; a side that
    stops sending (a half-close: a request sent in full) is passed on as such, and the
    answer still comes back. `until_chan_ends`: the far side's end is the end (an ssh
    session the node closed: the near side may never close by itself)."""
    ends = {conn.fileno(): (conn, chan), chan.fileno(): (chan, conn)}
    reading = set(ends)
    while reading and not stop.is_set():
        try:
            ready, _, _ = select.select(list(reading), [], [], 1.0)
        except (OSError, ValueError):
            return
        for fd in ready:
            source, sink = ends[fd]
            try:
                data = source.recv(CHUNK)
                if data:
                    sink.sendall(data)
                    continue
            except (OSError, EOFError):
                return
            reading.discard(fd)  # this side is done sending: tell the other
            _shut_write(sink)
            if until_chan_ends and source is chan:
                return


def _shut_write(end: object) -> None:
    with contextlib.suppress(OSError, EOFError):
        if isinstance(end, socket.socket):
            end.shutdown(socket.SHUT_WR)
        elif hasattr(end, "shutdown_write"):  # paramiko.Channel
            end.shutdown_write()


# -- the forwards this process holds (the agent's outlive the command that made them) ------

_ACTIVE: list[Forward] = []
_ACTIVE_LOCK = threading.Lock()


def keep(forward: Forward) -> Forward:
    """Hold `forward` in this process until it closes (`hpcui forward --list` shows it)."""
    with _ACTIVE_LOCK:
        _ACTIVE.append(forward)
    return forward


def listen(port: int | None, *, taking_over: bool = False) -> socket.socket:
    """A listener on 127.0.0.1:`port` (a free one for None).

    On Linux with SO_REUSEPORT, so that a new agent can bind the same port while the old
    one still listens (a forward handed over has no gap another local user could bind
    in: the kernel lets only the same user share it). A port someone listens on already
    is refused unless `taking_over`.
    """
    if port and not taking_over:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((LOOPBACK, port))  # OSError when it is in use, ours or not
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if SHARED_PORTS:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((LOOPBACK, port or 0))
    except OSError:
        sock.close()
        raise
    return sock


def active() -> list[Forward]:
    """The forwards still open, oldest first (closed ones are dropped)."""
    with _ACTIVE_LOCK:
        _ACTIVE[:] = [f for f in _ACTIVE if not f.closed]
        return list(_ACTIVE)
