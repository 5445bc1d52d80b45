"""Each request thread of the agent has its own terminal: the client's.

The agent replaces sys.stdin/stdout/stderr once with streams that write to, and read
from, the client whose request the current thread serves; prompt and host-key callbacks
of the agent's shared connections ask that same client. A thread serving nobody (the
agent's own housekeeping) writes to the agent's log and can answer no question.
"""

from __future__ import annotations

import contextvars
import io
import socket
import sys
import threading
from typing import Any

from hpcui.transport.agent import wire

#: the client this thread (or a worker started with contextvars.copy_context) serves
_client: contextvars.ContextVar[Client | None] = contextvars.ContextVar("client", default=None)


class ClientGone(Exception):
    """The client hung up (Ctrl-C, closed pipe): the command it asked for stops here."""


class Client:
    """One connected face: its terminal flags, and the socket to talk to it."""

    def __init__(
        self,
        sock: socket.socket,
        tty: dict[str, bool],
        env: dict[str, str],
        *,
        callbacks: dict[str, bool] | None = None,
    ) -> None:
        self.sock = sock
        self.tty = {k: bool(tty.get(k)) for k in ("stdin", "stdout", "stderr")}
        self.env = env
        #: a process with its own prompt/host-key callbacks (AgentTransport): questions go
        #: to them as such; None: a CLI call, asked on its terminal
        self.callbacks = callbacks
        self._lock = threading.Lock()
        self._buf: dict[str, list[str]] = {"out": [], "err": []}

    def send(self, obj: dict[str, Any]) -> None:
        with self._lock:
            try:
                wire.send(self.sock, obj)
            except OSError as exc:
                raise ClientGone(str(exc)) from exc

    def write(self, which: str, text: str) -> None:
        # like Python's own stdio: line-buffered on a terminal, block-buffered otherwise
        buf = self._buf[which]
        buf.append(text)
        if which == "err" or (self.tty["stdout"] and "\n" in text) or len(buf) > 512:
            self.flush(which)

    def flush(self, which: str | None = None) -> None:
        for w in (which,) if which else ("out", "err"):
            buf = self._buf[w]
            if buf:
                text = "".join(buf)
                buf.clear()
                self.send({w: text})

    def ask(self, question: str, *, secret: bool) -> str:
        """A line typed at the client's terminal ('' at end of input)."""
        self.flush()
        line = self._roundtrip({"ask": question, "secret": secret}).get("line")
        if not isinstance(line, str):
            raise ClientGone("the client sent no answer")
        return line

    def _roundtrip(self, question: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            try:
                wire.send(self.sock, question)
                return wire.recv(self.sock)
            except (OSError, wire.WireError) as exc:
                raise ClientGone(str(exc)) from exc

    def keyboard(self, title: str, instructions: str, prompts: list[tuple[str, bool]]) -> list[str]:
        """Keyboard-interactive questions for the client's own prompt callback."""
        reply = self._roundtrip({"kbd": [title, instructions, [list(p) for p in prompts]]})
        answers = reply.get("answers")
        if not (isinstance(answers, list) and all(isinstance(a, str) for a in answers)):
            raise ClientGone("the client sent no answers")
        return answers

    def host_key(self, host: str, key_type: str, fingerprint: str) -> bool:
        return self._roundtrip({"hostkey": [host, key_type, fingerprint]}).get("trust") is True

    def can(self, what: str) -> bool:
        """Someone there can answer `what` ("prompt" or "host_key")."""
        if self.callbacks is not None:
            return bool(self.callbacks.get(what))
        return self.tty["stdin"]


def current() -> Client | None:
    return _client.get()


class serving:
    """`with serving(client):` this thread's stdio and questions go to `client`."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._token: contextvars.Token[Client | None] | None = None

    def __enter__(self) -> Client:
        self._token = _client.set(self.client)
        return self.client

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _client.reset(self._token)


class _Routed(io.TextIOBase):
    def __init__(self, which: str, fallback: Any) -> None:
        self.which = which
        self.fallback = fallback

    encoding = "utf-8"
    errors = "replace"

    @property
    def no_color(self) -> bool:
        client = current()
        return bool(client and client.env.get("NO_COLOR"))

    def writable(self) -> bool:
        return self.which != "in"

    def readable(self) -> bool:
        return self.which == "in"

    def isatty(self) -> bool:
        client = current()
        return bool(
            client and client.tty[{"in": "stdin", "out": "stdout", "err": "stderr"}[self.which]]
        )

    def write(self, text: str) -> int:
        client = current()
        if client is None:
            self.fallback.write(text)
        else:
            client.write(self.which, text)
        return len(text)

    def flush(self) -> None:
        client = current()
        if client is None:
            self.fallback.flush()
        else:
            client.flush(self.which)

    def readline(self, size: int | None = -1, /) -> str:  # type: ignore[override]  # typeshed: _IOBase says bytes, TextIOBase str
        client = current()
        if client is None:
            return ""
        return client.ask("", secret=False)

    def read_secret(self, question: str) -> str:
        """getpass for the client's terminal (the agent has none of its own)."""
        client = current()
        if client is None:
            return ""
        return client.ask(question, secret=True)


def install() -> None:
    """Route the agent process's stdio through the serving thread's client."""
    sys.stdout = _Routed("out", sys.__stdout__)
    sys.stderr = _Routed("err", sys.__stderr__)
    sys.stdin = _Routed("in", None)


class RoutedPrompt:
    """The keyboard-interactive/passphrase callback of an agent-held connection: the
    question goes to the client whose request is connecting (see SshTransport), asked
    there by `ask` (the CLI's terminal prompt)."""

    def __init__(self, ask: Any) -> None:
        self._ask = ask

    def for_caller(self) -> Any:
        client = current()
        if client is None or not client.can("prompt"):
            return None  # nobody can answer: SshTransport says so, as without a terminal
        if client.callbacks is not None:
            return client.keyboard

        def ask(title: str, instructions: str, prompts: list[tuple[str, bool]]) -> list[str]:
            with serving(client):  # paramiko calls this from its own thread
                return self._ask(title, instructions, prompts)

        return ask

    def __call__(self, title: str, instructions: str, prompts: list[tuple[str, bool]]) -> list[str]:
        ask = self.for_caller()
        if ask is None:
            raise ClientGone("no terminal to ask")
        return ask(title, instructions, prompts)


class RoutedHostKey:
    """Unknown host key: asked at the requesting client's terminal, refused without one."""

    def __init__(self, ask: Any) -> None:
        self._ask = ask

    def for_caller(self) -> Any:
        client = current()
        if client is None or not client.can("host_key"):
            return None
        return client.host_key if client.callbacks is not None else self._ask

    def __call__(self, host: str, key_type: str, fingerprint: str) -> bool:
        ask = self.for_caller()
        return bool(ask and ask(host, key_type, fingerprint))
