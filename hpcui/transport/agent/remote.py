"""`AgentTransport`: a Transport whose connection lives in the agent.

What `hpcui.connect(name)` gives API scripts, the app and the CLI's own-process commands
(submit, run, result) when the agent is on: each call is one request on the agent socket,
run by the agent on its shared SshTransport for that cluster. Questions (2FA code,
passphrase, unknown host key) come back to this process's callbacks, so they are asked
where they always were (terminal or app dialog) and answered once per connection.
"""

from __future__ import annotations

import builtins
import importlib
import logging
import os
import select
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any

from hpcui.errors import ClusterConnectionError, CommandTimeout, ConnectionLost, HpcuiError
from hpcui.transport import deadline
from hpcui.transport.agent import paths, reach, wire
from hpcui.transport.agent.wire import b64, unb64
from hpcui.transport.base import Command, CommandResult, Transport
from hpcui.transport.quoting import to_command

log = logging.getLogger(__name__)

#: asked again of a new agent when the first went away: they change nothing
IDEMPOTENT = frozenset({"read_file", "stat_size", "free_bytes", "home", "stalled_s"})
CHUNK = 4 * 1024 * 1024
#: what the caller waits past its own time limit for the agent's answer to arrive
ANSWER_MARGIN_S = 2.0


class _GoAround(Exception):
    """The agent took the connection but not the call: this process connects itself."""


STALL_POLL_S = 2.0


def rebuild_error(info: dict[str, Any]) -> BaseException:
    """The agent's exception as this process's own class (hpcui errors and OSErrors keep
    their type, so retries, exit codes and messages are those of a direct call)."""

    module, name, message = info.get("module", ""), info.get("type", ""), info.get("message", "")
    cls: Any = None
    if module == "builtins" and isinstance(getattr(builtins, name, None), type):
        cls = getattr(builtins, name)
        if not issubclass(cls, (OSError, TimeoutError, ValueError)):
            cls = None
    elif module.startswith("hpcui."):
        try:
            cls = getattr(importlib.import_module(module), name, None)
        except ImportError:
            cls = None

        if not (isinstance(cls, type) and issubclass(cls, HpcuiError)):
            cls = None
    if cls is None:
        return ClusterConnectionError(f"{name}: {message}")
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    for key, value in (info.get("attrs") or {}).items():
        try:
            setattr(exc, key, value)
        except AttributeError:
            pass
    return exc


class _Stream:
    """A remote command's output streamed through the agent (RemoteStream)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._ended = False

    def fileno(self) -> int:
        return self.sock.fileno()

    def read(self) -> tuple[bytes, bytes]:
        out, err = b"", b""
        while not self._ended and select.select([self.sock], [], [], 0)[0]:
            try:
                msg = wire.recv(self.sock)
            except (wire.WireError, OSError):
                self._ended = True
                break
            out += unb64(msg.get("o", ""))
            err += unb64(msg.get("e", ""))
            if msg.get("end"):
                self._ended = True
        return out, err

    @property
    def ended(self) -> bool:
        return self._ended

    def close(self) -> None:
        self._ended = True
        self.sock.close()


class _Terminal:
    """A pty session held by the agent (calls._terminal): the TerminalChannel that
    `hpcui.services.terminal.bridge` drives, one frame per read."""

    LOST = 255  # what ssh says when the link goes

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._status: int | None = None

    def fileno(self) -> int:
        return self.sock.fileno()

    def recv(self, nbytes: int) -> bytes:
        """The next output; b"" once the session ended (its status is then ready)."""
        while self._status is None:
            try:
                msg = wire.recv(self.sock)
            except (wire.WireError, OSError):
                self._status = self.LOST
                break
            if "o" in msg:
                data = unb64(msg["o"])
                if data:
                    return data
            elif "exit" in msg:
                self._status = int(msg["exit"])
            elif isinstance(msg.get("error"), dict):
                self._status = self.LOST
                raise rebuild_error(msg["error"])
        return b""

    def sendall(self, data: bytes) -> None:
        self._send({"k": b64(data)})

    def resize_pty(self, width: int, height: int) -> None:
        self._send({"size": [width, height]})

    def _send(self, obj: dict[str, Any]) -> None:
        if self._status is not None:
            return
        try:
            wire.send(self.sock, obj)
        except OSError:
            self._status = self.LOST

    def exit_status_ready(self) -> bool:
        return self._status is not None

    def recv_exit_status(self) -> int:
        return self.LOST if self._status is None else self._status

    def close(self) -> None:
        if self._status is None:
            self._send({"close": True})
        self.sock.close()


class AgentTransport(Transport):
    def __init__(
        self,
        cluster: str,
        *,
        persist_s: float,
        prompt: Callable[..., list[str]] | None = None,
        on_unknown_host: Callable[[str, str, str], bool] | None = None,
    ) -> None:
        self.cluster = cluster
        self.persist_s = persist_s
        self.prompt = prompt
        self.on_unknown_host = on_unknown_host
        self.description = f"{cluster} via the hpcui agent"
        #: this process's own connection, made when the agent does not answer (api.connect
        #: sets it; None: such a call fails in words instead)
        self.direct: Callable[[], Transport] | None = None
        self._bypass: Transport | None = None
        self._listeners: list[Callable[[float | None], None]] = []
        self._watcher: threading.Thread | None = None
        self._closed = threading.Event()

    # -- one request ------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        args: dict[str, Any],
        chunks: Iterable[bytes] = (),
        limit: float | None = None,
    ) -> Any:
        for attempt in range(2):
            try:
                return self._once(method, args, chunks, limit)
            except reach.AgentSilent as exc:  # asking again would wait as long
                raise _GoAround(str(exc)) from exc
            except reach.AgentUnavailable as exc:
                if attempt:
                    raise ClusterConnectionError(
                        f"The hpcui agent could not serve {self.cluster}: {exc}. Run "
                        "`hpcui agent stop` and try again, or set HPCUI_AGENT=off."
                    ) from exc
        raise AssertionError("unreachable")

    def _either(
        self,
        method: str,
        args: dict[str, Any],
        own: Callable[[Transport], Any],
        chunks: Iterable[bytes] = (),
        wrap: Callable[[Any], Any] = lambda answer: answer,
        limit: float | None = None,
    ) -> Any:
        """Through the agent; when it does not answer, through this process's own
        connection from then on (said once), so a stopped agent costs one ACK_S.
        `limit`: the call's own time limit (run's timeout), cut to the caller's budget."""
        if self._bypass is None:
            try:
                return wrap(self._call(method, args, chunks, limit))
            except _GoAround as exc:
                if self.direct is None:
                    raise ClusterConnectionError(
                        f"The hpcui agent does not answer ({exc}) and this process has no "
                        f"connection of its own to {self.cluster}. Run `hpcui agent stop`, "
                        "or set HPCUI_AGENT=off."
                    ) from None
                log.warning(
                    "the hpcui agent does not answer (%s): this process connects to %s "
                    "itself from now on (`hpcui agent stop` ends a stuck agent)",
                    exc,
                    self.cluster,
                )
                self._bypass = self.direct()
        return own(self._bypass)

    def _once(
        self, method: str, args: dict[str, Any], chunks: Iterable[bytes], limit: float | None
    ) -> Any:
        try:
            sock = reach.open_agent(self.persist_s)
        except paths.UnsafeDirectory as exc:
            raise ClusterConnectionError(f"The hpcui agent's directory is unsafe: {exc}.") from exc
        acked = handed_over = False
        failed: BaseException | None = None  # the agent's answer: raised as ours, below
        budget = deadline.left(limit)  # the caller's own time limit binds the agent too
        try:
            sock.settimeout(reach.ACK_S)
            wire.send(
                sock,
                {
                    "v": paths.version(), "op": "call", "cluster": self.cluster,
                    "method": method, "args": args, "budget": budget,
                    "ask": {"prompt": self.prompt is not None,
                            "host_key": self.on_unknown_host is not None},
                },
            )  # fmt: skip
            for part in chunks:  # write_file's data, put_files' large files: after it
                for i in range(0, len(part), CHUNK):
                    wire.send(sock, {"chunk": b64(part[i : i + CHUNK])})
                wire.send(sock, {"end": True})
            received = bytearray()
            while True:
                try:
                    msg = wire.recv(sock)
                except TimeoutError:
                    if not acked:
                        raise reach.AgentSilent(
                            f"it did not take the call in {reach.ACK_S:.0f} s"
                        ) from None
                    raise CommandTimeout(
                        f"{method} on {self.cluster} through the hpcui agent did not end "
                        f"within the caller's time limit ({budget:.0f} s)."
                    ) from None
                if "ack" in msg:
                    acked = True
                    # the rest as long as the caller allows (+ a margin for the answer)
                    sock.settimeout(None if budget is None else budget + ANSWER_MARGIN_S)
                elif "chunk" in msg:
                    received += unb64(msg["chunk"])
                elif "kbd" in msg:
                    title, instructions, prompts = msg["kbd"]
                    answers = self._answer(title, instructions, [tuple(p) for p in prompts])
                    wire.send(sock, {"answers": answers})
                    del answers
                elif "hostkey" in msg:
                    ask = self.on_unknown_host
                    wire.send(sock, {"trust": bool(ask and ask(*msg["hostkey"]))})
                elif "error" in msg and isinstance(msg["error"], dict):
                    failed = rebuild_error(msg["error"])
                    break
                elif "result" in msg:
                    if method == "open_stream" and msg["result"] == "stream":
                        handed_over = True  # the stream owns the socket now
                        return _Stream(sock)
                    if method in ("open_terminal", "open_tunnel") and msg["result"] == "terminal":
                        handed_over = True  # the terminal owns the socket now
                        return _Terminal(sock)
                    return bytes(received) if method == "read_file" else msg["result"]
                elif "retry" in msg:
                    raise reach.AgentUnavailable("replaced")
                else:
                    raise reach.AgentUnavailable(str(msg.get("error", msg)))
        except (wire.WireError, OSError) as exc:
            if not acked or method in IDEMPOTENT:
                raise reach.AgentUnavailable(f"the agent went away: {exc}") from exc
            raise ConnectionLost(
                f"The hpcui agent went away while it ran {method} on {self.cluster} ({exc}): "
                "it may or may not have taken effect. The next call starts a new agent."
            ) from exc
        finally:
            if not handed_over:
                sock.close()
        assert failed is not None  # the loop ends by returning, raising, or an error answer
        raise failed

    def _answer(self, title: str, instructions: str, prompts: list[Any]) -> list[str]:
        if self.prompt is None:
            return []
        return list(self.prompt(title, instructions, prompts))

    # -- Transport --------------------------------------------------------------------------

    @staticmethod
    def _result(r: dict[str, Any]) -> CommandResult:
        return CommandResult(r["exit"], unb64(r["out"]), unb64(r["err"]), r.get("command", ""))

    def run(
        self, cmd: Command, *, timeout: float | None = None, stdin: bytes | None = None
    ) -> CommandResult:
        args = {"cmd": b64(to_command(cmd)), "timeout": timeout}
        if stdin is not None:
            args["stdin"] = b64(stdin)
        return self._either(
            "run",
            args,
            lambda t: t.run(cmd, timeout=timeout, stdin=stdin),
            wrap=self._result,
            limit=timeout,
        )

    def _put_files(
        self, directory: str, files: dict[str, bytes], then: Command | None, first: Command | None
    ) -> CommandResult:
        # a large file (a 30 MB argument's pickle) follows the request in chunks, as
        # write_file's data does: no frame comes near the wire's limit
        large = [name for name, data in files.items() if len(data) > CHUNK]
        args = {
            "directory": directory,
            "files": {name: b64(data) for name, data in files.items() if name not in large},
            "streamed": large,
            "then": None if then is None else b64(to_command(then)),
            "first": None if first is None else b64(to_command(first)),
        }
        return self._either(
            "put_files",
            args,
            lambda t: t.put_files(directory, files, then=then, first=first),
            chunks=[files[name] for name in large],
            wrap=self._result,
        )

    def write_file(
        self,
        path: str,
        data: bytes | Iterable[bytes],
        *,
        mode: int | None = 0o600,
        offset: int | None = None,
    ) -> int:
        if not isinstance(data, (bytes, bytearray)):  # an iterator cannot be sent twice
            data = b"".join(data)
        own = lambda t: t.write_file(path, data, mode=mode, offset=offset)  # noqa: E731
        args = {"path": path, "mode": mode, "offset": offset}
        return int(self._either("write_file", args, own, [data]))

    def read_file(self, path: str, *, offset: int = 0, length: int | None = None) -> bytes:
        args = {"path": path, "offset": offset, "length": length}
        own = lambda t: t.read_file(path, offset=offset, length=length)  # noqa: E731
        return self._either("read_file", args, own)

    def stat_size(self, path: str) -> int | None:
        return self._either("stat_size", {"path": path}, lambda t: t.stat_size(path))

    def free_bytes(self, path: str) -> int | None:
        return self._either("free_bytes", {"path": path}, lambda t: t.free_bytes(path))

    def open_stream(self, cmd: Command) -> Any:
        return self._either(
            "open_stream", {"cmd": b64(to_command(cmd))}, lambda t: t.open_stream(cmd)
        )

    def open_terminal(self, script: str, *, term: str, cols: int, rows: int) -> Any:
        """The agent opens the pty channel on its own login: no second login (nor 2FA code)."""
        args = {"script": script, "term": term, "cols": cols, "rows": rows}
        own = lambda t: t.open_terminal(script, term=term, cols=cols, rows=rows)  # noqa: E731
        return self._either("open_terminal", args, own)

    def open_tunnel(self, host: str, port: int) -> Any:
        """The agent opens the channel on its own login and relays the bytes."""
        args = {"host": host, "port": port}
        return self._either("open_tunnel", args, lambda t: t.open_tunnel(host, port))

    def home(self) -> str:
        return str(self._either("home", {}, lambda t: t.home()))

    def stalled_s(self) -> float:
        return float(self._either("stalled_s", {}, lambda t: t.stalled_s()))

    def watch_stall(self, listener: Callable[[float | None], None]) -> None:
        """The agent's keepalive silence, asked every STALL_POLL_S while someone listens."""
        self._listeners.append(listener)
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch, daemon=True, name="agent-stall")
            self._watcher.start()

    def _watch(self) -> None:
        silent = False
        while not self._closed.wait(STALL_POLL_S):
            try:
                seconds = self.stalled_s()
            except Exception:  # the next look tries again; calls report their own errors
                continue
            if seconds > 0 or silent:
                silent = seconds > 0
                for listener in list(self._listeners):
                    listener(seconds if seconds > 0 else None)

    def close(self) -> None:
        """This process lets go; the agent keeps the connection for the next one."""
        self._closed.set()
        if self._bypass is not None:
            self._bypass.close()


def agent_transport(
    name: str,
    *,
    is_local: bool,
    persist_s: float,
    prompt: Callable[..., list[str]] | None,
    on_unknown_host: Callable[[str, str, str], bool] | None,
) -> AgentTransport | None:
    """The agent's connection for cluster `name`, or None: this process connects itself
    (a local cluster, `persist = 0`, HPCUI_AGENT=off, or inside the agent)."""
    if is_local or persist_s <= 0 or not reach.agent_enabled():
        return None
    try:
        paths.private_dir(os.path.dirname(paths.socket_path()), create=False)
    except paths.UnsafeDirectory as exc:
        log.warning("not using the agent: %s", exc)
        return None
    return AgentTransport(name, persist_s=persist_s, prompt=prompt, on_unknown_host=on_unknown_host)
