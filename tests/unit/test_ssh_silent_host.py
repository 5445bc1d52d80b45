"""A host that takes the TCP connection and never speaks (a black hole behind a firewall,
a dead VPN): a clear error within the connect timeout, not paramiko's "No existing
session" (issue 23, defect 11). A loopback listener that accepts and stays silent."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from hpcui.errors import ClusterConnectionError
from hpcui.transport.ssh.session import SshTransport


def test_a_silent_host_is_a_clear_error(tmp_path):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(srv.accept()[0]), daemon=True).start()
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host silent\n HostName 127.0.0.1\n Port {srv.getsockname()[1]}\n ConnectTimeout 2\n"
        f" UserKnownHostsFile {tmp_path}/known_hosts\n"
    )
    t = SshTransport.from_config("silent", ssh_config=str(cfg), reconnect_attempts=1)
    started = time.monotonic()
    try:
        with pytest.raises(ClusterConnectionError, match="no SSH server greeted us within 2 s"):
            t.run(["true"])
    finally:
        t.close()
        srv.close()
        for s in held:
            s.close()
    assert time.monotonic() - started < 10
