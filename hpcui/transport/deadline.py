"""A caller's time budget that every transport call of its thread honours.

`result(timeout=10)` means ten seconds for everything under it — the status check, the
SFTP reads, a reconnect — not ten seconds for the wait and then as long as a stalled link
takes. A thread-local deadline reaches every call below without a parameter on each.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import overload

_local = threading.local()


@contextlib.contextmanager
def within(seconds: float | None) -> Iterator[None]:
    """Calls from this thread inside the block end by then (an inner block may only
    shorten the budget). None: no budget of its own."""
    outer = getattr(_local, "deadline", None)
    mine = None if seconds is None else time.monotonic() + max(0.0, seconds)
    _local.deadline = mine if outer is None else outer if mine is None else min(outer, mine)
    try:
        yield
    finally:
        _local.deadline = outer


@overload
def left(default: float) -> float: ...
@overload
def left(default: None) -> float | None: ...
def left(default: float | None) -> float | None:
    """Seconds a call may take now: its own `default` limit, cut to the caller's budget."""
    deadline = getattr(_local, "deadline", None)
    if deadline is None:
        return default
    rest = max(0.0, deadline - time.monotonic())
    return rest if default is None else min(default, rest)


def ends_after(seconds: float | None) -> float | None:
    """The monotonic time a budget of `seconds` runs out (None: no budget)."""
    return None if seconds is None else time.monotonic() + seconds


def rest(ends: float | None) -> float | None:
    """What is left of a budget ending at `ends`, for the next call: at least a second,
    so a read asked for just after the wait still gets its one try."""
    return None if ends is None else max(1.0, ends - time.monotonic())


def expired() -> bool:
    deadline = getattr(_local, "deadline", None)
    return deadline is not None and time.monotonic() >= deadline
