"""Several calls in one array task (`map(..., calls_per_task=K)`): one Python start for K
calls, each call on its own - a call that raises fails alone, its traceback kept, and its
neighbours still run. Standard library only (this runs on the cluster).

The task's result is one list of ``(kind, value)`` pairs in call order, submitit's own
shape per call: ``("success", value)`` or ``("error", traceback text)``.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from typing import Any

#: what one call left: submitit's (kind, value) pair
Outcome = tuple[str, Any]


class Packed:
    """`fn` over several calls. Wrapped as functools does, so the job's name, the registry's
    `function` and which package travels by value are the user's function's, not this."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn

    def __call__(self, *calls: tuple[tuple[Any, ...], dict[str, Any]]) -> list[Outcome]:
        out: list[Outcome] = []
        for args, kwargs in calls:
            try:
                out.append(("success", self.fn(*args, **kwargs)))
            except Exception:  # this call's own failure; KeyboardInterrupt and exits end the task
                out.append(("error", traceback.format_exc()))
        return out
