"""Quoting for POSIX shells, for str and for bytes that are not valid UTF-8."""

from __future__ import annotations

import re
from collections.abc import Iterable

_SAFE = re.compile(rb"[A-Za-z0-9_@%+=:,./-]+\Z")

Arg = str | bytes


def quote_bytes(arg: Arg) -> bytes:
    """Quote one argument so a POSIX shell sees exactly these bytes as one word.

    Works on bytes so arguments that are not valid UTF-8 arrive verbatim.
    """
    raw = arg if isinstance(arg, bytes) else arg.encode("utf-8", "surrogateescape")
    if raw and _SAFE.match(raw):
        return raw
    return b"'" + raw.replace(b"'", b"'\"'\"'") + b"'"


def quote_argv(argv: Iterable[Arg]) -> bytes:
    """Join an argv list into one shell command line, every word quoted."""
    return b" ".join(quote_bytes(a) for a in argv)


def to_command(cmd: str | bytes | Iterable[Arg]) -> bytes:
    """A command given as a list is quoted word by word; a string is trusted shell code."""
    if isinstance(cmd, bytes):
        return cmd
    if isinstance(cmd, str):
        return cmd.encode("utf-8", "surrogateescape")
    return quote_argv(cmd)
