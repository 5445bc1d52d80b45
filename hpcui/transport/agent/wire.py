"""Frames on the agent socket: a 4-byte big-endian length, then UTF-8 JSON (stdlib only).

Bounded: a frame over MAX_FRAME or that is not a JSON object is a protocol error, and the
side that reads it drops the connection (garbage never crashes the agent).
"""

from __future__ import annotations

import base64
import json
import socket
import struct
from typing import Any

MAX_FRAME = 32 * 1024 * 1024
_LEN = struct.Struct(">I")


class WireError(Exception):
    """The peer sent something that is not a frame, or went away mid-frame."""


def send(sock: socket.socket, obj: dict[str, Any]) -> None:
    data = json.dumps(obj, separators=(",", ":")).encode()
    if len(data) > MAX_FRAME:
        raise WireError(f"frame of {len(data)} bytes is over the {MAX_FRAME} limit")
    sock.sendall(_LEN.pack(len(data)) + data)


def _exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise WireError("the peer closed the connection" if buf or n == 4 else "short frame")
        buf += chunk
    return bytes(buf)


def recv(sock: socket.socket) -> dict[str, Any]:
    (n,) = _LEN.unpack(_exactly(sock, 4))
    if n > MAX_FRAME:
        raise WireError(f"frame of {n} bytes announced, over the {MAX_FRAME} limit")
    try:
        obj = json.loads(_exactly(sock, n))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"a frame that is not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise WireError("a frame that is not a JSON object")
    return obj


def b64(data: bytes) -> str:
    """Bytes inside a JSON frame (commands, files, output)."""
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text)
