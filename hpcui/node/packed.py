"""Several calls in one array task (`map(..., calls_per_task=K)`): one Python start for K
calls, each call on its own - a call that raises fails alone, its traceback kept, and its
neighbours still run. Standard library only (this runs on the cluster).

With `tasks_per_gpu=M` the task's calls run M at a time on each of its GPUs (small models
that leave a GPU mostly idle, as cluv packs trials): worker processes forked from this one,
each seeing one GPU (`CUDA_VISIBLE_DEVICES` set to it before the call imports anything of
CUDA), and the results still in call order.

The task's result is one list of ``(kind, value)`` pairs in call order, submitit's own
shape per call: ``("success", value)`` or ``("error", traceback text)``.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import pickle
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

#: what one call left: submitit's (kind, value) pair
Outcome = tuple[str, Any]
Call = tuple[tuple[Any, ...], dict[str, Any]]

#: the variables that say which GPUs a process sees (NVIDIA; AMD's ROCm)
GPU_VARIABLES = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")


class Packed:
    """`fn` over several calls. Wrapped as functools does, so the job's name, the registry's
    `function` and which package travels by value are the user's function's, not this."""

    def __init__(self, fn: Callable[..., Any], *, gpus: int = 0, tasks_per_gpu: int = 1) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.gpus = gpus
        self.tasks_per_gpu = tasks_per_gpu

    def __call__(self, *calls: Call) -> list[Outcome]:
        if self.gpus * self.tasks_per_gpu > 1 and len(calls) > 1:
            return self._side_by_side(calls)
        return [_one(self.fn, call) for call in calls]

    def _side_by_side(self, calls: Sequence[Call]) -> list[Outcome]:
        devices = visible_gpus(self.gpus)
        slots = [d for _ in range(self.tasks_per_gpu) for d in devices][: len(calls)]
        fork = multiprocessing.get_context("fork")  # the unpickled fn goes with the fork
        queue = fork.SimpleQueue()
        for device in slots:
            queue.put(device)
        global _work
        _work = (self.fn, calls)  # the forked workers have it: only indices travel to them
        try:
            with ProcessPoolExecutor(
                len(slots), mp_context=fork, initializer=_take_gpu, initargs=(queue,)
            ) as pool:
                return list(pool.map(_sent_back, range(len(calls))))
        finally:
            _work = None


def visible_gpus(count: int) -> list[str]:
    """The task's GPUs as the scheduler named them (Slurm sets CUDA_VISIBLE_DEVICES; PBS
    sites their own), else 0..count-1."""
    for name in GPU_VARIABLES:
        said = [d for d in os.environ.get(name, "").split(",") if d.strip()]
        if said:
            return said[:count] if count else said
    return [str(i) for i in range(count)]


def _take_gpu(queue: Any) -> None:
    """A worker's start: it sees only the GPU it took (one slot of the pool each)."""
    device = queue.get()
    for name in GPU_VARIABLES:
        os.environ[name] = device
    os.environ["HPCUI_GPU_SLOT"] = device


#: the function and calls of the side-by-side round being run (set before the fork: a
#: by-value function cannot be pickled to a worker, it is inherited)
_work: tuple[Callable[..., Any], Sequence[Call]] | None = None


def _sent_back(index: int) -> Outcome:
    """A worker's call, its value checked to travel back to the task (pickle)."""
    assert _work is not None, "set by Packed before its workers fork"
    fn, calls = _work
    kind, value = _one(fn, calls[index])
    if kind == "success":
        try:
            pickle.dumps(value)
        except Exception as exc:
            return ("error", f"the call returned a value that cannot be sent back: {exc!r}")
    return kind, value


def _one(fn: Callable[..., Any], call: Call) -> Outcome:
    args, kwargs = call
    try:
        return ("success", fn(*args, **kwargs))
    except Exception:  # this call's own failure; KeyboardInterrupt and exits end the task
        return ("error", traceback.format_exc())
