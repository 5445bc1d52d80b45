"""How a `map` of many calls becomes job arrays: calls packed per task (one Python start
for several calls), and arrays no bigger than the site allows (Slurm's MaxArraySize,
1001 by default; PBS's max_array_size), each one sbatch.

Packing is asked (`calls_per_task=`) or worked out from how long one call takes
(`call_s=`): tasks of about TASK_TARGET_S, but never fewer than MIN_TASKS when there are
that many calls (a pack is run serially: one task per call of 10 ms would spend a Python
start per call, one task for all would use one CPU).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpcui.errors import UsageError

if TYPE_CHECKING:
    from hpcui.schedulers.base import Scheduler

#: a packed task runs about this long when the packing is worked out from `call_s`
TASK_TARGET_S = 60.0
#: worked-out packing keeps at least this many tasks (they run side by side)
MIN_TASKS = 16
#: arrays up to this size are sent without asking the site's limit (no site sets less)
SMALL_ARRAY = 100


@dataclass(frozen=True)
class ArrayPlan:
    calls_per_task: int
    tasks: int
    #: the task indices of each array, in order: one sbatch each
    arrays: tuple[range, ...]
    #: `array_parallelism` for each array: the user's cap, shared out so that all the
    #: arrays together never run more tasks at once than asked
    parallelism: int | None


def packing(n_calls: int, calls_per_task: int | None, call_s: float | None) -> int:
    if calls_per_task is not None and call_s is not None:
        raise UsageError(
            "Give calls_per_task= (how many calls one array task runs) or call_s= (how long "
            "one call takes, so hpcui works the packing out), not both."
        )
    if calls_per_task is not None:
        if isinstance(calls_per_task, bool) or not isinstance(calls_per_task, int):
            raise UsageError(f"calls_per_task= must be a whole number, got {calls_per_task!r}.")
        if calls_per_task < 1:
            raise UsageError(f"calls_per_task= must be at least 1, got {calls_per_task}.")
        return calls_per_task
    if call_s is None:
        return 1
    if isinstance(call_s, bool) or not isinstance(call_s, int | float) or not call_s > 0:
        raise UsageError(f"call_s= is one call's duration in seconds (> 0), got {call_s!r}.")
    by_time = max(1, math.floor(TASK_TARGET_S / call_s))
    by_width = max(1, math.ceil(n_calls / MIN_TASKS))
    return min(by_time, by_width)


def plan_arrays(
    n_calls: int,
    *,
    calls_per_task: int | None = None,
    call_s: float | None = None,
    limit: Callable[[int], int | None],
    parallelism: int | None = None,
) -> ArrayPlan:
    """`limit(tasks)`: the most tasks one array may have for a map of `tasks` (ArrayLimit);
    None means no limit matters."""
    per_task = packing(n_calls, calls_per_task, call_s)
    tasks = math.ceil(n_calls / per_task)
    most = limit(tasks)
    if most is not None and most < 1:
        raise UsageError(
            "This cluster's scheduler does not allow job arrays (MaxArraySize = 0): submit "
            "the calls one by one with submit(), or ask the site."
        )
    size = tasks if most is None else most
    arrays = tuple(range(i, min(i + size, tasks)) for i in range(0, tasks, size))
    shared = parallelism
    if parallelism is not None and len(arrays) > 1:
        if parallelism < len(arrays):
            raise UsageError(
                f"array_parallelism={parallelism} cannot be kept over the {len(arrays)} "
                f"arrays that {tasks} tasks need here (at most {size} per array): pack "
                f"calls into fewer tasks (calls_per_task= or call_s=), or allow at least "
                f"{len(arrays)} at once."
            )
        shared = parallelism // len(arrays)
    return ArrayPlan(per_task, tasks, arrays, shared)


def packed_calls(calls: list[tuple[tuple, dict]], per_task: int) -> list[tuple[tuple, dict]]:
    """Each task's call to hpcui.node.packed.Packed: its calls as positional arguments."""
    return [(tuple(calls[i : i + per_task]), {}) for i in range(0, len(calls), per_task)]


class ArrayLimit:
    """Tasks one array may have at a site: the profile's `max_array_size` when it sets one
    (free), else the scheduler's configuration, asked once per cluster (a round trip) and
    only for a map above SMALL_ARRAY tasks (no site sets less)."""

    def __init__(self, profile_says: Callable[[], int | None], scheduler: Scheduler) -> None:
        self._profile_says, self._scheduler = profile_says, scheduler
        self._known: tuple[int | None] | None = None
        self._lock = threading.Lock()

    def __call__(self, tasks: int) -> int | None:
        said = self._profile_says()
        if said is not None:
            return said
        if tasks <= SMALL_ARRAY:
            return None
        with self._lock:
            if self._known is None:
                self._known = (self._scheduler.max_array_size(),)
            return self._known[0]
