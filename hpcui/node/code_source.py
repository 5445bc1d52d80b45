"""Code objects that keep the user's file names and source lines on the node.

cloudpickle pickles a by-value function's code with its file name (3.1.3 and later
rewrite it to ``<dynamic-code>``), and never with its source: a node that lacks the
user's file (a laptop's working copy, a notebook cell) prints tracebacks without the
lines. hpcui's pickler (hpcui/submission/pickling.py) wraps each code object with its real file
name and its own lines as they were at submit time; unpickling on the node calls
`restore` here, which puts both back. Standard library only (this runs on the cluster).
"""

from __future__ import annotations

import linecache
import types
from collections.abc import Callable, Sequence
from typing import Any


def restore(
    make: Callable[..., types.CodeType],
    args: tuple[Any, ...],
    filename: str,
    source: tuple[int, Sequence[str]] | None,
) -> types.CodeType:
    """The code object as cloudpickle rebuilds it, with `filename` back, and its submitted
    `source` (first line number, lines) laid into linecache over that file's lines."""
    code = make(*args)
    if code.co_filename != filename:
        code = code.replace(co_filename=filename)
    if source:
        _lay(filename, *source)
    return code


def _lay(filename: str, first: int, lines: Sequence[str]) -> None:
    """Put `lines` at `first` in linecache's copy of `filename`. What the node has of the
    file (the same path on a shared file system) fills the rest; the submitted lines win
    where both have some. mtime None: linecache.checkcache never stats the entry, so the
    node's file cannot replace them later."""
    have = list(linecache.getlines(filename))
    end = first - 1 + len(lines)
    have.extend("\n" for _ in range(end - len(have)))
    have[first - 1 : end] = lines
    linecache.cache[filename] = (sum(map(len, have)), None, have, filename)
