"""Code objects that keep the user's file names and source lines on the node.

cloudpickle pickles a by-value function's code with its file name (3.1.3 and later
rewrite it to ``<dynamic-code>``), and never with its source: a node that lacks the
user's file (a laptop's working copy, a notebook cell) prints tracebacks without the
lines. hpcui's pickler (hpcui/pickling.py) wraps each code object with its real file
name and the file's lines as they were at submit time; unpickling on the node calls
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
    lines: Sequence[str] | None,
) -> types.CodeType:
    """The code object as cloudpickle rebuilds it, with `filename` back, and the
    submitted `lines` of that file in linecache (first come wins: the same lines)."""
    code = make(*args)
    if code.co_filename != filename:
        code = code.replace(co_filename=filename)
    if lines and filename not in linecache.cache:
        # mtime None: linecache.checkcache leaves the entry alone (it never stats it), so a
        # file of the same name on the node cannot replace what was submitted
        linecache.cache[filename] = (sum(map(len, lines)), None, list(lines), filename)
    return code
