"""POSIX shell quoting for text that lands in generated scripts."""

from __future__ import annotations

import shlex


def quote(value: str) -> str:
    """Quote one word for sh/bash; safe for any text without NUL."""
    if "\0" in value:
        raise ValueError("a NUL byte cannot travel through a shell word")
    return shlex.quote(value)
