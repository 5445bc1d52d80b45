"""TensorBoard with a token at its door, for its user alone.

TensorBoard has no authentication: on a node's address (or 127.0.0.1 of a shared login
node) every user of the cluster could read the scalars. Here TensorBoard's own WSGI app is
served behind a gate that lets in a request with the token (``?token=`` once, which sets
a cookie and redirects without it, as JupyterLab does; or ``Authorization: token ...``),
and answers 403 to anyone else. The token is made here and kept only in ``token`` (0600)
of the service's private folder, which hpcui reads through the user's own login.

Standard library and tensorboard only: the same file runs in a job (from hpcui's
runtime) and on a login node (uploaded beside its folder, where hpcui is not installed).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import os
import secrets
import socket
import sys
import tempfile
from collections.abc import Callable, Iterable
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

#: the file in the service's folder that holds the token
TOKEN_FILE = "token"

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def cookie_name(token: str) -> str:
    """Per server: cookies ignore ports, and one browser may open several."""
    return "hpcui_tb_" + hashlib.sha256(token.encode()).hexdigest()[:12]


class TokenGate:
    """A WSGI middleware: the token, or 403."""

    def __init__(self, app: WsgiApp, token: str) -> None:
        self.app = app
        self.token = token.encode()
        self.cookie = cookie_name(token)

    def _same(self, given: str) -> bool:
        return hmac.compare_digest(given.encode("utf-8", "replace"), self.token)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        query = parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        given = next((v for k, v in query if k == "token"), None)
        if given is not None and self._same(given):
            rest = [(k, v) for k, v in query if k != "token"]
            where = environ.get("SCRIPT_NAME", "") + (environ.get("PATH_INFO") or "/")
            start_response(
                "302 Found",
                [
                    ("Location", where + (f"?{urlencode(rest)}" if rest else "")),
                    ("Set-Cookie", f"{self.cookie}={self.token.decode()}; HttpOnly; "
                                   "SameSite=Strict; Path=/"),
                    ("Content-Length", "0"),
                ],
            )  # fmt: skip
            return [b""]
        if self._allowed(environ):
            return self.app(environ, start_response)
        body = (
            b"403: this TensorBoard belongs to another user's job. Its owner opens it with "
            b"`hpcui tensorboard`.\n"
        )
        start_response(
            "403 Forbidden",
            [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))],
        )
        return [body]

    def _allowed(self, environ: dict[str, Any]) -> bool:
        auth = environ.get("HTTP_AUTHORIZATION", "")
        if auth.startswith("token ") and self._same(auth[6:].strip()):
            return True
        try:
            jar = SimpleCookie(environ.get("HTTP_COOKIE", ""))
        except CookieError:
            return False
        morsel = jar.get(self.cookie)
        return morsel is not None and self._same(morsel.value)


def write_token(folder: str) -> str:
    """A new token in ``folder/token``, readable by its user only."""
    token = secrets.token_urlsafe(32)
    path = os.path.join(folder, TOKEN_FILE)
    tmp = f"{path}.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token)
    os.replace(tmp, path)
    return token


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tensorboard_gate")
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--folder", required=True, help="private: the token and info file")
    args = parser.parse_args(argv)
    os.makedirs(args.folder, mode=0o700, exist_ok=True)
    os.chmod(args.folder, 0o700)
    tempfile.tempdir = args.folder  # TensorBoard's info file: .tensorboard-info/ in it
    token = write_token(args.folder)
    from tensorboard import program

    def gated(app: WsgiApp, flags: Any) -> Any:
        return program.WerkzeugServer(TokenGate(app, token), flags)

    tb = program.TensorBoard(server_class=gated)
    tb.configure(
        argv=[
            "",
            f"--logdir={os.path.expanduser(args.logdir)}",
            f"--host={args.host}",
            f"--port={free_port(args.host)}",
        ]
    )
    return int(tb.main() or 0)


if __name__ == "__main__":
    sys.exit(main())
