"""The agent's side of `hpcui proxy`: port 22 of a job's node over the login the agent
holds (direct-tcpip from the login node), then raw bytes.

ssh, scp, rsync, git and VS Code start `hpcui proxy CLUSTER JOB` as their ProxyCommand for
every connection, so after a short JSON handshake (questions of a first login go to the
caller's terminal as on any call) the socket carries the node's SSH stream itself: no
frames, no base64. The caller either relays its stdin/stdout to it, or hands the socket
to ssh (`ProxyUseFdpass`) and exits, leaving ssh and the agent face to face.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from hpcui.cli.routing import Client, serving
from hpcui.errors import HpcuiError, PromptNeededError
from hpcui.jobs.forwarding import pump

#: a job's node is asked of the scheduler at most this often per job (VS Code opens
#: several connections within a second); a job that ended is refused by the node itself
NODE_FRESH_S = 10.0
_nodes: dict[tuple[str, str], tuple[str, float]] = {}
_nodes_lock = threading.Lock()


def node_of_job(cluster: Any, job_id: str) -> str:
    key = (cluster.name, job_id)
    now = time.monotonic()
    with _nodes_lock:
        known = _nodes.get(key)
    if known and now - known[1] < NODE_FRESH_S:
        return known[0]
    node = str(cluster.control.node(job_id))
    with _nodes_lock:
        _nodes[key] = (node, now)
    return node


def serve_proxy(conn: Any, req: dict[str, Any]) -> None:
    name, job, port = req.get("cluster"), req.get("job"), req.get("port", 22)
    tty = req.get("tty")
    if not (isinstance(name, str) and isinstance(job, str) and isinstance(port, int)):
        from hpcui.transport.agent import wire

        wire.send(conn, {"error": "a proxy needs cluster, job and port"})
        return
    client = Client(conn, tty if isinstance(tty, dict) else {}, {})
    client.send({"ack": True})
    stop = threading.Event()
    with serving(client):
        try:
            from hpcui.cli.common import (  # the agent's shared logins, made on first use
                connect,
            )

            cluster = connect(name)
            node = node_of_job(cluster, job)
            chan = cluster.transport.open_tunnel(node, port)
        except HpcuiError as exc:
            said = str(exc)
            if isinstance(exc, PromptNeededError):
                said += (  # VS Code started from a desktop: nobody to type the code
                    f" No terminal here to answer it: log in once in a terminal (`hpcui "
                    f"jobs -c {name}`); the agent keeps that login for every later ssh."
                )
            client.send({"fail": said, "exit": exc.exit_code})
            return
        client.send({"raw": node})
        from hpcui.agent import mux  # the fast path for the next connections

        mux.ensure(cluster)
    try:
        pump(conn, chan, stop)
    finally:
        chan.close()
