"""What app tests share: run a Pilot coroutine, and wait for a condition without sleeping
longer than needed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def wait_for(pilot: Any, cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.05)
