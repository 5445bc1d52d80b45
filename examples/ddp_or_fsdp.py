"""The MareNostrum 5 course experiment: one training step under DDP and under FSDP, memory per rank.

Model: Sequential(Linear(W, W), ReLU) x3 + Linear(W, 1000), Adam, batch 32, one step
(W = 8192: 209.5 M parameters, 800 MiB in fp32). Each mode runs as one job on the
cluster through `cluster.submit(experiment, ..., gpus=4)`: one task per GPU, and
`hpcui.distributed.setup()` does the rest.

    python examples/ddp_or_fsdp.py --cluster mn5-acc --gpus 4
    python examples/ddp_or_fsdp.py --cluster dev --python /opt/hpcui-devcluster/venv/bin/python --width 1024
    python examples/ddp_or_fsdp.py --spawn 2 --width 1024    # no cluster: local processes
    python examples/ddp_or_fsdp.py --cluster local --gpus 1 --tasks-per-node 4   # one GPU

The last line is the course's table on ONE GPU of your own workstation (the embedded
`local` cluster without Slurm): 4 ranks share the GPU, so hpcui.distributed.setup() uses
gloo with CUDA tensors (NCCL refuses two ranks on one GPU). Reference measured that way on
one H100 (width 8192): DDP 799 MiB params and 4863 MiB peak per rank; FSDP 200 MiB shard
and 1365 MiB peak per rank. Without a GPU, `--gpus 0 --tasks-per-node 4` runs 4 CPU ranks.

What is measured, per rank:
- model: bytes of the parameters this rank holds (DDP: the whole model; FSDP: its shard);
- state: parameters + gradients + Adam state this rank holds (what sharding divides);
- peak: on CUDA, torch.cuda.max_memory_allocated(); on CPU (gloo) torch has no allocator
  statistics, so peak is the process's maximum resident set size (ru_maxrss), which also
  counts the torch runtime (~0.3-0.5 GiB) and the full model built before sharding.
The course measured on 4x H100: DDP model=800 MB peak=4514 MB per GPU, FSDP shard=200 MB
peak=2601 MB per GPU; totals DDP=18054 MB vs FSDP=10405 MB, a 42% saving.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

MIB = 1 << 20


def _local_bytes(t: Any) -> int:
    """Bytes of the part of `t` this rank holds (a DTensor's local shard for FSDP)."""
    local = t.to_local() if hasattr(t, "to_local") else t
    return local.numel() * local.element_size()


def experiment(
    mode: str, width: int = 8192, batch: int = 32, classes: int = 1000, steps: int = 1
) -> dict:
    """Runs on every rank: build, wrap (DDP or FSDP), Adam steps, report memory and time.

    The first step warms up (allocations, the first collective); with ``steps`` > 1 the
    others are timed between barriers: ``sec_per_step`` is their mean, the same on every
    rank. ``batch`` is per rank, as in the course.
    """
    import resource
    import time

    import torch
    from torch import nn

    from hpcui import distributed as hd

    local_rank, rank, world, device = hd.setup()
    cuda = device.type == "cuda"
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(3):
        layers += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(width, classes)).to(device)
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model, device_ids=[device.index] if cuda else None)
    elif mode == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(model)
    else:
        raise ValueError(f"mode must be 'ddp' or 'fsdp', not {mode!r}")
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, width, device=device)
    y = torch.randint(0, classes, (batch,), device=device)

    def step() -> Any:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    loss = step()
    sec_per_step = None
    if steps > 1:
        torch.distributed.barrier()
        start = time.perf_counter()
        for _ in range(steps - 1):
            loss = step()
        if cuda:
            torch.cuda.synchronize(device)
        torch.distributed.barrier()
        sec_per_step = (time.perf_counter() - start) / (steps - 1)
    if cuda:
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device)
        peak_kind = "cuda max_memory_allocated"
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
        peak_kind = "process max RSS (CPU)"
    params = sum(_local_bytes(p) for p in model.parameters())
    grads = sum(_local_bytes(p.grad) for p in model.parameters() if p.grad is not None)
    optim = sum(
        _local_bytes(v)
        for s in opt.state.values()
        for v in s.values()
        if isinstance(v, torch.Tensor) and v.dim() > 0
    )
    hd.print0(f"{mode}: world={world} loss={loss.item():.4f} device={device}")
    out = {
        "mode": mode,
        "host": __import__("socket").gethostname(),
        "sec_per_step": sec_per_step,
        "rank": rank,
        "local_rank": local_rank,
        "world": world,
        "device": str(device),
        "model_bytes": params,
        "state_bytes": params + grads + optim,
        "peak_bytes": peak,
        "peak_kind": peak_kind,
    }
    hd.cleanup()
    return out


def report(results: dict[str, list[dict]]) -> str:
    """The course's table: per rank, then totals and FSDP's saving over DDP."""
    lines = []
    totals: dict[str, dict[str, float]] = {}
    for mode, ranks in results.items():
        label = "model" if mode == "ddp" else "shard"
        for r in ranks:
            step = f" {r['sec_per_step']:.3f} s/step" if r.get("sec_per_step") else ""
            lines.append(
                f"{mode.upper():4} rank {r['rank']}: {label}={r['model_bytes'] / MIB:.0f} MiB "
                f"state={r['state_bytes'] / MIB:.0f} MiB peak={r['peak_bytes'] / MIB:.0f} MiB "
                f"({r['device']} on {r.get('host', '?')}){step}"
            )
        totals[mode] = {
            k: sum(r[k] for r in ranks) / MIB for k in ("model_bytes", "state_bytes", "peak_bytes")
        }
    if "ddp" in totals and "fsdp" in totals:
        d, f = totals["ddp"], totals["fsdp"]
        for key, name in (("peak_bytes", "peak"), ("state_bytes", "state")):
            saving = 100 * (1 - f[key] / d[key]) if d[key] else 0.0
            lines.append(
                f"Total {name}: DDP={d[key]:.0f} MiB, FSDP={f[key]:.0f} MiB, saving {saving:.0f}%"
            )
    kinds = {r["peak_kind"] for ranks in results.values() for r in ranks}
    lines.append(f"peak = {', '.join(sorted(kinds))}")
    return "\n".join(lines)


def _spawned(local_rank: int, world: int, port: int, mode: str, args: tuple) -> None:
    os.environ.update(
        RANK=str(local_rank),
        LOCAL_RANK=str(local_rank),
        WORLD_SIZE=str(world),
        LOCAL_WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    import torch

    torch.save(experiment(mode, *args), os.environ["HPCUI_EXAMPLE_OUT"] + f".{local_rank}")


def run_spawn(modes: list[str], n: int, args: tuple) -> dict[str, list[dict]]:
    """Without a cluster: n local processes (the torchrun-style environment)."""
    import socket
    import tempfile

    import torch
    import torch.multiprocessing as mp

    out: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in modes:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            os.environ["HPCUI_EXAMPLE_OUT"] = os.path.join(tmp, mode)
            mp.spawn(_spawned, args=(n, port, mode, args), nprocs=n)
            out[mode] = [torch.load(os.path.join(tmp, f"{mode}.{i}")) for i in range(n)]
    return out


def run_cluster(modes: list[str], ns: argparse.Namespace) -> dict[str, list[dict]]:
    """One job per mode through `cluster.submit(..., gpus=N)`; results come back per rank."""
    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config

    cfg = load_config().cluster(ns.cluster)
    if ns.python:
        cfg = cfg.model_copy(update={"python": ns.python})
    with Cluster(cfg) as cluster:
        jobs = {
            mode: cluster.submit(
                experiment,
                mode,
                ns.width,
                ns.batch,
                1000,
                ns.steps,
                gpus=ns.gpus,
                **({"tasks_per_node": ns.tasks_per_node} if ns.tasks_per_node else {}),
                time=ns.time,
                name=f"{mode}-reference",
                **({"account": ns.account} if ns.account else {}),
                **({"qos": ns.qos} if ns.qos else {}),
            )
            for mode in modes
        }
        for mode, job in jobs.items():
            print(f"{mode}: job {job.job_id} on {cluster.name}", file=sys.stderr)
        return {mode: job.results(timeout=ns.timeout) for mode, job in jobs.items()}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cluster", help="cluster name from the hpcui config (default: its default)")
    p.add_argument("--python", help="remote interpreter with torch (overrides the config)")
    p.add_argument("--gpus", type=int, default=4)
    p.add_argument(
        "--tasks-per-node",
        type=int,
        help="ranks per node (default: one per GPU); more than the GPUs: ranks share them",
    )
    p.add_argument("--width", type=int, default=8192, help="8192 is the course's model")
    p.add_argument("--batch", type=int, default=32, help="per rank")
    p.add_argument(
        "--steps", type=int, default=1, help="more than 1: time the steps after the first"
    )
    p.add_argument("--mode", choices=["ddp", "fsdp", "both"], default="both")
    p.add_argument("--time", default="10m")
    p.add_argument("--account")
    p.add_argument("--qos")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--spawn", type=int, metavar="N", help="run on N local processes instead")
    ns = p.parse_args(argv)
    modes = ["ddp", "fsdp"] if ns.mode == "both" else [ns.mode]
    if ns.spawn:
        results = run_spawn(modes, ns.spawn, (ns.width, ns.batch, 1000, ns.steps))
    else:
        results = run_cluster(modes, ns)
    print(report(results))


if __name__ == "__main__":
    main()
