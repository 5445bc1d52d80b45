"""`hpcui.sweep` and `hpcui.get_sweep`: the module-level API of sweeps."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hpcui.clusters.api import connect
from hpcui.clusters.cluster import Cluster
from hpcui.sweeps import sweep as sweeps
from hpcui.sweeps.sweep import Sweep


def _cluster(cluster: str | Cluster | None) -> Cluster:
    return cluster if isinstance(cluster, Cluster) else connect(cluster)


def sweep(
    fn: Callable[..., Any],
    *,
    name: str,
    grid: Mapping[str, Sequence[Any]] | None = None,
    configs: Sequence[Mapping[str, Any]] | None = None,
    random: Mapping[str, Any] | None = None,
    seed: int | None = None,
    args: Sequence[Any] = (),
    cluster: str | Cluster | None = None,
    calls_per_task: int | None = None,
    call_s: float | None = None,
    tasks_per_gpu: int | None = None,
    **resources: Any,
) -> Sweep:
    """`fn(*args, **config)` for each configuration of `grid` (every combination),
    `configs` (a list) or `random` (`n` draws, reproducible by `seed`), as job arrays on
    `cluster`, kept under `name`. Keywords are resources, as for submit (mem="8G").

    Running it again with the same name submits only configurations never submitted;
    `Sweep.resume()` runs again what failed. `calls_per_task=K` (or `call_s=`, one
    element's seconds) runs K elements to an array task, as `map` packs calls;
    `tasks_per_gpu=M` runs them M at a time on each GPU of the task. See docs/sweeps.md."""
    return sweeps.start(
        _cluster(cluster), fn, name=name, grid=grid, configs=configs, random=random,
        seed=seed, args=args, calls_per_task=calls_per_task, call_s=call_s,
        tasks_per_gpu=tasks_per_gpu, **resources,
    )  # fmt: skip


def get_sweep(cluster: str | Cluster | None, name: str) -> Sweep:
    """The sweep `name` started earlier on this machine, from any process."""
    return sweeps.get(_cluster(cluster), name)
