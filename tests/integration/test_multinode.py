"""Training across nodes on the dev cluster's real Slurm: two slurmd, each in its own UTS and
mount namespace (hostnames node1/node2, node-local /tmp), 4 count-only GPUs each, gloo on CPU.

The jobs are submitted together by one module fixture (they share 8 GPUs, so Slurm runs
them as GPUs free up); each test then checks its own job.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hpcui.backends.launch import master_port
from hpcui.backends.states import JobState
from tests.integration.ranks import loop_until_stopped, stop_once_looping, torchrun_ranks

pytestmark = [pytest.mark.devcluster, pytest.mark.xdist_group("distributed")]

SMALL = {"time": "5m", "cpus_per_task": 1, "mem": "1G"}
WAIT = 300


# -- functions that run on the cluster ------------------------------------------------------


def ddp_across_nodes(steps: int) -> dict[str, Any]:
    """setup(), a node-local scratch file, an all_reduce, DDP steps; what every rank saw."""
    import os
    import socket

    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from hpcui import distributed as hd

    local_rank, rank, world, _ = hd.setup()
    host = socket.gethostname()
    # node-local scratch, as jobs stage data on a compute node's /tmp: the node's local
    # rank 0 writes it, every rank of that node reads it after a barrier
    scratch = f"/tmp/hpcui-test-{os.environ['SLURM_JOB_ID']}"
    if local_rank == 0:
        with open(scratch, "w") as fh:
            fh.write(host)
    torch.distributed.barrier()
    with open(scratch) as fh:
        staged_by = fh.read()
    t = torch.tensor([float(rank + 1)])
    torch.distributed.all_reduce(t)
    torch.manual_seed(rank)
    model = DDP(
        torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    )
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(8, 16)).pow(2).mean().backward()
        opt.step()
    out = {
        "rank": rank,
        "local_rank": local_rank,
        "world": world,
        "host": host,
        "master": (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])),
        "all_reduce": t.item(),
        "staged_by": staged_by,
        "checksum": float(sum(p.detach().double().sum() for p in model.parameters())),
    }
    torch.distributed.barrier()
    if local_rank == 0:
        os.unlink(scratch)
    hd.cleanup()
    return out


def fsdp_across_nodes() -> dict[str, Any]:
    import socket

    import torch
    from torch.distributed.fsdp import fully_shard

    from hpcui import distributed as hd

    _, rank, world, _ = hd.setup()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    torch.manual_seed(rank)
    model(torch.randn(8, 64)).sum().backward()
    opt.step()
    out = {
        "rank": rank,
        "world": world,
        "host": socket.gethostname(),
        "local": sum(p.to_local().numel() for p in model.parameters()),
        "full": sum(p.numel() for p in model.parameters()),
        "checksum": float(sum(p.full_tensor().double().sum() for p in model.parameters())),
    }
    hd.cleanup()
    return out


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def jobs(torch_cluster) -> Iterator[dict[str, Any]]:
    submitted = {
        "ddp": torch_cluster.submit(ddp_across_nodes, 3, gpus=8, name="mn-ddp", **SMALL),
        # holds 4 GPUs until its test stops it: that test runs before fsdp's (8 GPUs)
        "stop": torch_cluster.submit(
            loop_until_stopped, 3000, gpus=4, nodes=2, name="mn-stop", **{**SMALL, "time": "10m"}
        ),
        "fsdp": torch_cluster.submit(fsdp_across_nodes, gpus=8, name="mn-fsdp", **SMALL),
        "torchrun": torch_cluster.submit(
            torchrun_ranks, gpus=4, nodes=2, launcher="torchrun", name="mn-trun", **SMALL
        ),
    }
    yield submitted
    # a failed test must not leave jobs holding the nodes' GPUs for the next run
    torch_cluster.control.cancel([j.job_id for j in submitted.values() if not j.done()])


def hosts_of(results: list[dict[str, Any]]) -> list[str]:
    return [r["host"] for r in results]


# -- tests ----------------------------------------------------------------------------------


def test_eight_gpus_on_two_nodes_give_eight_ranks_and_one_master(jobs):
    job = jobs["ddp"]
    results = job.results(timeout=WAIT)
    assert [r["rank"] for r in results] == list(range(8))
    assert [r["local_rank"] for r in results] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert hosts_of(results) == ["node1"] * 4 + ["node2"] * 4  # block distribution
    # MASTER_ADDR: the first node's interconnect alias (node1i, an address of its own)
    assert {r["master"] for r in results} == {("127.0.1.11", master_port(job.job_id))}
    assert {r["all_reduce"] for r in results} == {36.0}
    sums = [r["checksum"] for r in results]
    assert max(sums) - min(sums) < 1e-9  # DDP kept every replica identical across nodes
    assert job.state is JobState.COMPLETED


def test_node_local_tmp_is_really_node_local(jobs):
    """Each node's ranks read the scratch file their own node staged: had /tmp been shared,
    one node's write would have replaced the other's."""
    for r in jobs["ddp"].results(timeout=WAIT):
        assert r["staged_by"] == r["host"], r


def test_the_stop_file_ends_a_two_node_loop_on_every_rank(jobs):
    job = jobs["stop"]
    results = stop_once_looping(job, WAIT)
    assert sorted(set(hosts_of(results))) == ["node1", "node2"]
    assert all(r["stopped"] for r in results)
    assert len({r["step"] for r in results}) == 1
    assert job.state is JobState.COMPLETED


def test_fsdp_shards_across_two_nodes(jobs):
    results = jobs["fsdp"].results(timeout=WAIT)
    full = results[0]["full"]
    assert sorted(set(hosts_of(results))) == ["node1", "node2"]
    assert {r["world"] for r in results} == {8}
    assert sum(r["local"] for r in results) == full  # the 8 shards partition the model
    assert len({round(r["checksum"], 9) for r in results}) == 1


def test_torchrun_one_agent_per_node_rendezvous_on_the_first(jobs):
    job = jobs["torchrun"]
    results = job.results(timeout=WAIT)
    assert [r["rank"] for r in results] == [0, 1, 2, 3]
    assert hosts_of(results) == ["node1", "node1", "node2", "node2"]
    assert [r["node_rank"] for r in results] == ["0", "0", "1", "1"]  # one agent per node
    assert {r["world"] for r in results} == {4} and {r["sum"] for r in results} == {10.0}
    assert all(r["elastic"] for r in results)
    assert {r["master_ip"] for r in results} <= {"127.0.0.11", "127.0.1.11"}  # node1's store
