"""The agent's side of AgentTransport: one Transport method per request, run on the
agent's shared connection to the named cluster."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator
from typing import Any

from hpcui.cli.routing import Client, ClientGone, serving
from hpcui.transport import deadline
from hpcui.transport.agent import wire
from hpcui.transport.agent.wire import b64, unb64
from hpcui.transport.base import CommandResult, Transport

CHUNK = 4 * 1024 * 1024


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else unb64(text)


def _result(r: CommandResult) -> dict[str, Any]:
    return {"exit": r.exit_status, "out": b64(r.stdout_bytes), "err": b64(r.stderr_bytes),
            "command": r.command}  # fmt: skip


def describe(exc: BaseException) -> dict[str, Any]:
    """An exception as data: its class (rebuilt by the client) and plain attributes."""
    attrs = {
        k: v
        for k, v in vars(exc).items()
        if isinstance(v, (str, int, float, bool, type(None))) and not k.startswith("_")
    }
    return {"module": type(exc).__module__, "type": type(exc).__name__, "message": str(exc),
            "attrs": attrs}  # fmt: skip


def _incoming(conn: socket.socket) -> Iterator[bytes]:
    """write_file's data, as the client sends it."""
    while True:
        msg = wire.recv(conn)
        if msg.get("end"):
            return
        chunk = msg.get("chunk")
        if not isinstance(chunk, str):
            raise wire.WireError("write_file expects chunk frames, then end")
        yield unb64(chunk)


def _stream(client: Client, t: Transport, cmd: bytes) -> None:
    stream = t.open_stream(cmd)
    if stream is None:
        client.send({"result": None})
        return
    client.send({"result": "stream"})
    try:
        while True:
            select.select([stream], [], [], 1.0)
            out, err = stream.read()
            if out or err:
                client.send({"o": b64(out), "e": b64(err)})
            if stream.ended:
                client.send({"end": True})
                return
            if select.select([client.sock], [], [], 0)[0]:
                return  # the client hung up (or spoke out of turn): stop following
    finally:
        stream.close()


def _terminal(client: Client, t: Transport, a: dict[str, Any]) -> None:
    """A pty session on the agent's connection, relayed frame by frame: keys ("k") and
    window sizes ("size") from the client, output ("o") and the exit status ("exit") back.
    `hpcui shell` and the app's `!` ride the login the agent holds (a 2FA site asks no
    second code). Ends when the remote side ends or the client hangs up."""
    chan = t.open_terminal(
        str(a["script"]), term=str(a["term"]), cols=int(a["cols"]), rows=int(a["rows"])
    )
    _relay(client, chan)


class _TunnelEnd:
    """A tunnel (paramiko direct-tcpip channel or a socket) as the relay drives it: it
    has no window and no exit status; it ends when the other side closes."""

    def __init__(self, chan: Any) -> None:
        self.chan = chan

    def fileno(self) -> int:
        return int(self.chan.fileno())

    def recv(self, nbytes: int) -> bytes:
        try:
            return bytes(self.chan.recv(nbytes))
        except OSError:
            return b""

    def sendall(self, data: bytes) -> None:
        self.chan.sendall(data)

    def resize_pty(self, width: int, height: int) -> None:
        pass

    def exit_status_ready(self) -> bool:
        return False

    def recv_exit_status(self) -> int:
        return 0

    def close(self) -> None:
        self.chan.close()


def _tunnel(client: Client, t: Transport, a: dict[str, Any]) -> None:
    """A connection to a job's node (`hpcui forward` from a caller's own process, the
    API's `cluster.forward`), relayed like a terminal: bytes as "k" in, "o" out."""
    _relay(client, _TunnelEnd(t.open_tunnel(str(a["host"]), int(a["port"]))))


def _relay(client: Client, chan: Any) -> None:
    """Frames both ways until either side ends; the exit status last (-1: none)."""
    client.send({"result": "terminal"})
    try:
        while True:
            pty, sock = chan.fileno(), client.sock.fileno()
            ready, _, _ = select.select([pty, sock], [], [], 1.0)
            if pty in ready:
                data = chan.recv(65536)
                if data:
                    client.send({"o": b64(data)})
                else:
                    break
            if sock in ready:
                try:
                    msg = wire.recv(client.sock)
                except (wire.WireError, OSError) as exc:  # hung up: the session ends
                    raise ClientGone(str(exc)) from exc
                if isinstance(msg.get("k"), str):
                    chan.sendall(unb64(msg["k"]))
                elif isinstance(msg.get("size"), list) and len(msg["size"]) == 2:
                    cols, rows = (max(1, min(int(v), 10_000)) for v in msg["size"])
                    chan.resize_pty(width=cols, height=rows)
                elif msg.get("close"):
                    break
            if not ready and chan.exit_status_ready():
                break
        tunnel = isinstance(chan, _TunnelEnd)  # no exit status to wait for
        status = 0 if tunnel else chan.recv_exit_status() if _exited(chan) else -1
        client.send({"exit": status})
    finally:
        chan.close()


def _exited(chan: Any, wait_s: float = 5.0) -> bool:
    """The exit status follows the end of output: wait for it, boundedly."""
    deadline = time.monotonic() + wait_s
    while not chan.exit_status_ready() and time.monotonic() < deadline:
        time.sleep(0.05)
    return bool(chan.exit_status_ready())


def serve_call(conn: socket.socket, req: dict[str, Any]) -> None:
    name, method, args = req.get("cluster"), req.get("method"), req.get("args")
    asked = req.get("ask")
    ask = asked if isinstance(asked, dict) else {}
    if not (isinstance(name, str) and isinstance(method, str) and isinstance(args, dict)):
        wire.send(conn, {"error": "a call needs cluster, method and args"})
        return
    client = Client(conn, {}, {}, callbacks={k: bool(v) for k, v in ask.items()})
    client.send({"ack": True})
    budget = req.get("budget")  # the caller's time limit: the agent's calls end by then too
    budget = float(budget) if isinstance(budget, (int, float)) and budget >= 0 else None
    with serving(client), deadline.within(budget):
        try:
            from hpcui.cli.common import (
                connect,
            )

            t = connect(name).transport
            if method == "open_stream":
                _stream(client, t, _bytes(args["cmd"]) or b"")
                return
            if method == "open_terminal":
                _terminal(client, t, args)
                return
            if method == "open_tunnel":
                _tunnel(client, t, args)
                return
            result = _dispatch(conn, t, method, args)
        except ClientGone:
            raise
        except Exception as exc:  # the client raises it as its own
            client.send({"error": describe(exc)})
            return
    if method == "read_file":
        for i in range(0, len(result), CHUNK):
            client.send({"chunk": b64(result[i : i + CHUNK])})
        result = None
    client.send({"result": result})


def _dispatch(conn: socket.socket, t: Transport, method: str, a: dict[str, Any]) -> Any:
    if method == "run":
        timeout = a.get("timeout")
        return _result(
            t.run(_bytes(a["cmd"]) or b"", timeout=timeout, stdin=_bytes(a.get("stdin")))
        )
    if method == "put_files":
        files = {str(k): unb64(v) for k, v in a["files"].items()}
        for name in a.get("streamed") or []:  # large files, in chunks after the request
            files[str(name)] = b"".join(_incoming(conn))
        return _result(
            t.put_files(
                str(a["directory"]), files, then=_bytes(a.get("then")), first=_bytes(a.get("first"))
            )
        )
    if method == "write_file":
        offset = a.get("offset")
        return t.write_file(
            str(a["path"]),
            _incoming(conn),
            mode=a.get("mode"),
            offset=offset if isinstance(offset, int) else None,
        )
    if method == "read_file":
        return t.read_file(str(a["path"]), offset=int(a.get("offset") or 0), length=a.get("length"))
    if method == "stat_size":
        return t.stat_size(str(a["path"]))
    if method == "free_bytes":
        return t.free_bytes(str(a["path"]))
    if method == "home":
        return t.home()
    if method == "stalled_s":
        return t.stalled_s()
    raise ValueError(f"the agent does not serve {method!r}")
