"""Functions the distributed tests run on the dev cluster (shipped by value), and helpers."""

from __future__ import annotations

import time
from typing import Any

VENV_PYTHON = "/opt/hpcui-devcluster/venv/bin/python"


def loop_until_stopped(max_steps: int) -> dict[str, Any]:
    """A training-like loop that polls stop_requested() every step (all ranks in lockstep)."""
    import socket
    import time as _t

    import torch

    from hpcui import distributed as hd

    _, rank, _, _ = hd.setup()
    step = 0
    while step < max_steps:
        t = torch.ones(1)
        torch.distributed.all_reduce(t)  # a collective per step, as in training
        if hd.stop_requested():
            break
        if step == 0:
            hd.print0("looping", flush=True)
        step += 1
        _t.sleep(0.1)
    hd.cleanup()
    return {"rank": rank, "step": step, "stopped": step < max_steps, "host": socket.gethostname()}


def torchrun_ranks() -> dict[str, Any]:
    """Under launcher="torchrun": one all_reduce; what each worker saw of torchrun and Slurm."""
    import os
    import socket

    import torch

    from hpcui import distributed as hd

    _, rank, world, _ = hd.setup()
    t = torch.tensor([float(rank + 1)])
    torch.distributed.all_reduce(t)
    print(f"hello from rank {rank}", flush=True)
    out = {
        "rank": rank,
        "world": world,
        "sum": t.item(),
        "host": socket.gethostname(),
        "elastic": bool(os.environ.get("TORCHELASTIC_RUN_ID")),
        "slurm_procid": os.environ.get("SLURM_PROCID"),
        "node_rank": os.environ.get("GROUP_RANK"),  # torchrun's: the agent's node
        "master_ip": socket.gethostbyname(os.environ["MASTER_ADDR"]),
    }
    hd.cleanup()
    return out


def stop_once_looping(job: Any, wait: float) -> list[Any]:
    """Wait until rank 0 prints "looping", write the stop file, return every rank's result."""
    deadline = time.time() + wait
    while "looping" not in job.stdout(0):
        assert time.time() < deadline, f"job never started looping: {job.state}"
        assert not job.done(), job.stderr(0)
        time.sleep(0.5)
    job.stop()
    return job.results(timeout=120)
