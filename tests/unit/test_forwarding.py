"""hpcui.jobs.forwarding without a cluster: a real listener on 127.0.0.1 carrying connections
to a real local TCP server over the local transport's tunnel (the SSH one is tested on the
dev cluster, tests/integration/test_services.py)."""

from __future__ import annotations

import socket
import socketserver
import threading

import pytest

from hpcui.backends.records import JobDetails
from hpcui.backends.states import JobState
from hpcui.errors import UsageError
from hpcui.jobs import forwarding
from hpcui.jobs.forwarding import Forward, node_of
from hpcui.transport.local import LocalTransport


class Upper(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(1024):
            self.request.sendall(data.upper())


@pytest.fixture
def server():
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Upper)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def talk(port: int, text: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        got = b""
        try:
            s.sendall(text)
            s.shutdown(socket.SHUT_WR)
            while chunk := s.recv(1024):
                got += chunk
        except OSError:  # the forward could not reach the service and closed at once
            pass  # (reset, or no longer connected when we shut our side: CI saw both)
        return got


def make(port: int, **kw) -> Forward:
    return Forward(
        cluster="box", job_id="7", node="127.0.0.1", remote_port=port,
        open_tunnel=LocalTransport().open_tunnel, **kw,
    )  # fmt: skip


def test_connections_reach_the_service_both_ways_and_close_frees_the_port(server):
    with make(server) as fwd:
        assert fwd.address.startswith("127.0.0.1:")
        assert talk(fwd.local_port, b"hello") == b"HELLO"
        assert talk(fwd.local_port, b"again") == b"AGAIN"  # every connection its own tunnel
        assert fwd.connections == 2
        port = fwd.local_port
    assert fwd.closed
    with make(server, local_port=port) as again:  # the port is free for a new forward
        assert talk(again.local_port, b"third") == b"THIRD"


def test_the_listener_is_on_loopback_only(server):
    with make(server) as fwd:
        assert fwd._listener.getsockname()[0] == "127.0.0.1"


def test_a_taken_local_port_says_how_to_pick_another(server):
    with make(server) as first, pytest.raises(UsageError, match="--local"):
        make(server, local_port=first.local_port)


def test_the_forward_ends_with_its_job(server, monkeypatch):
    monkeypatch.setattr(forwarding, "JOB_CHECK_S", 0.05)
    over = threading.Event()
    fwd = make(server, ended=over.is_set)
    assert not fwd.wait(0.3)
    over.set()
    assert fwd.wait(10) and fwd.closed


def test_nothing_listening_on_the_node_is_said_and_the_forward_stays(server):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with make(dead) as fwd:
        assert talk(fwd.local_port, b"x") == b""  # the connection is closed at once
        for _ in range(100):  # said by the forward's own thread: bounded wait
            if fwd.errors:
                break
            fwd.wait(0.02)
        assert not fwd.closed and fwd.errors and "Nothing answers" in fwd.errors[-1]


def test_free_port_prefers_the_asked_one_when_free():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        taken = s.getsockname()[1]
        assert forwarding.free_port(taken) != taken
    assert forwarding.free_port(taken) == taken


def _details(**kw) -> JobDetails:
    base = {"job_id": "7", "user": "ana", "state": JobState.RUNNING, "nodelist": "gpu[03-04]"}
    return JobDetails.model_validate({**base, **kw})


def test_a_running_job_of_the_user_is_forwarded_from_its_first_node():
    assert node_of(_details(), "ana") == "gpu03"


@pytest.mark.parametrize(
    ("kw", "said"),
    [
        ({"user": "bob"}, "belongs to bob"),
        ({"state": JobState.PENDING, "nodelist": ""}, "wait for it to start"),
        ({"state": JobState.COMPLETED}, "COMPLETED"),
    ],
)
def test_jobs_that_cannot_be_forwarded_say_why(kw, said):
    with pytest.raises(UsageError, match=said):
        node_of(_details(**kw), "ana")


def test_the_process_keeps_its_forwards_until_they_close(server):
    fwd = forwarding.keep(make(server))
    assert fwd in forwarding.active()
    fwd.close()
    assert fwd not in forwarding.active()


def test_two_forwards_at_once_on_different_ports(server):
    with make(server) as one, make(server) as two:
        assert one.local_port != two.local_port
        assert talk(one.local_port, b"one") == b"ONE" and talk(two.local_port, b"two") == b"TWO"


def test_a_forward_taken_over_shares_the_port_until_the_old_one_closes(server):
    """A new agent binds the old agent's port before the old one lets go: no moment the
    port is free (hpcui.agent.handover; Linux's SO_REUSEPORT, as CI runs)."""
    assert forwarding.SHARED_PORTS
    first = make(server)
    try:
        second = make(server, local_port=first.local_port, taking_over=True)
        with second:
            first.close()
            assert talk(second.local_port, b"still") == b"STILL"
    finally:
        first.close()


def test_a_job_known_over_gets_no_connection_carried(server):
    over = threading.Event()
    fwd = make(server, known_over=over.is_set)
    assert talk(fwd.local_port, b"before") == b"BEFORE"
    over.set()
    assert talk(fwd.local_port, b"after") == b""  # refused: the port may be another's now
    assert fwd.wait(5) and fwd.refused == 1
