"""DDP and FSDP through submit on both dev sites' real Slurm (4 count-only GPUs: gloo on CPU).

The jobs are submitted together by one module fixture (the 4 GPUs serialize them, so
waiting one by one would add up); each test then checks its own job.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from hpcui.backends.launch import master_port
from hpcui.backends.states import JobState
from tests.integration.ranks import loop_until_stopped, stop_once_looping, torchrun_ranks

pytestmark = [pytest.mark.devcluster, pytest.mark.xdist_group("distributed")]  # one fixture run

SMALL = {"time": "5m", "cpus_per_task": 1, "mem": "2G"}
WAIT = 240


# -- functions that run on the cluster (shipped by value; torch imported there) -------------


def ranks_and_ddp(steps: int) -> dict[str, Any]:
    """setup(), an all_reduce, then a few DDP steps; every rank reports what it saw."""
    import os

    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from hpcui import distributed as hd

    local_rank, rank, world, device = hd.setup()
    t = torch.tensor([float(rank + 1)])
    torch.distributed.all_reduce(t)
    torch.manual_seed(rank)  # different init per rank: DDP must broadcast rank 0's
    model = DDP(
        torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    )
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(steps):
        x = torch.randn(8, 16)  # different data per rank: gradients must be averaged
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
    hd.print0(f"ddp done world={world}")
    out = {
        "rank": rank,
        "local_rank": local_rank,
        "world_size": world,
        "env_rank": os.environ["RANK"],
        "master": (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])),
        "all_reduce": t.item(),
        "backend": torch.distributed.get_backend(),
        "device": str(device),
        "checksum": checksum,
    }
    hd.cleanup()
    return out


def _small_fsdp_model() -> Any:
    import torch
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.Linear(64, 8)
    )
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    return model


def _full_checksum(model: Any) -> float:
    return float(sum(p.full_tensor().double().sum() for p in model.parameters()))


def fsdp_save(root: str) -> dict[str, Any]:
    """One FSDP step, then a sharded checkpoint by all ranks."""
    import torch

    from hpcui import distributed as hd

    _, rank, world, _ = hd.setup()
    model = _small_fsdp_model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    torch.manual_seed(rank)
    model(torch.randn(8, 64)).sum().backward()
    opt.step()
    local = sum(p.to_local().numel() for p in model.parameters())
    full = sum(p.numel() for p in model.parameters())
    hd.save_sharded(hd.checkpoint_path(root, 1), model, opt, extra={"step": 1, "world": world})
    out = {"rank": rank, "local": local, "full": full, "checksum": _full_checksum(model)}
    hd.cleanup()
    return out


def fsdp_resume(root: str) -> dict[str, Any]:
    """A fresh model on another world size loads the newest checkpoint (DCP reshards)."""
    import torch

    from hpcui import distributed as hd

    _, rank, world, _ = hd.setup()
    model = _small_fsdp_model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    before = _full_checksum(model)
    latest = hd.latest_checkpoint(root)
    extra = hd.load_sharded(latest, model, opt) if latest else {}
    steps_in_opt = [int(s["step"]) for s in opt.state_dict()["state"].values()]
    out = {
        "rank": rank,
        "world": world,
        "latest": latest,
        "extra": extra,
        "before": before,
        "after": _full_checksum(model),
        "opt_steps": sorted(set(steps_in_opt)),
    }
    hd.cleanup()
    return out


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ckpt_root(torch_site) -> Iterator[str]:
    root = f"{torch_site.remote_info().base}/test-ckpt/{uuid.uuid4().hex[:12]}"
    yield root
    torch_site.run(["rm", "-rf", root])


@pytest.fixture(scope="module")
def jobs(torch_site, ckpt_root) -> dict[str, Any]:
    """All first-stage jobs at once: Slurm runs them as GPUs free up."""
    return {
        "ddp": torch_site.submit(ranks_and_ddp, 3, gpus=4, name="t-ddp", **SMALL),
        "fsdp": torch_site.submit(fsdp_save, ckpt_root, gpus=4, name="t-fsdp", **SMALL),
        "stop": torch_site.submit(loop_until_stopped, 1500, gpus=2, name="t-stop", **SMALL),
        "torchrun": torch_site.submit(
            torchrun_ranks, gpus=2, launcher="torchrun", name="t-trun", **SMALL
        ),
    }


# -- tests ----------------------------------------------------------------------------------


def test_four_gpus_give_four_ranks_one_rendezvous_and_all_reduce(jobs):
    job = jobs["ddp"]
    results = job.results(timeout=WAIT)
    assert [r["rank"] for r in results] == [0, 1, 2, 3]  # one value per rank, in rank order
    assert [r["local_rank"] for r in results] == [0, 1, 2, 3]
    assert {r["world_size"] for r in results} == {4}
    assert [r["env_rank"] for r in results] == ["0", "1", "2", "3"]
    masters = {r["master"] for r in results}
    assert len(masters) == 1
    assert masters.pop()[1] == master_port(job.job_id)
    assert {r["all_reduce"] for r in results} == {1.0 + 2.0 + 3.0 + 4.0}
    assert {r["backend"] for r in results} == {"gloo"}  # count-only GPUs: no CUDA
    assert job.state is JobState.COMPLETED
    assert "ddp done world=4" in job.stdout(0)
    assert "ddp done" not in job.stdout(1)  # print0: rank 0 only


def test_ddp_parameters_identical_on_all_ranks(jobs):
    sums = [r["checksum"] for r in jobs["ddp"].results(timeout=WAIT)]
    assert max(sums) - min(sums) < 1e-9, sums


def test_fsdp_shards_then_resume_on_two_ranks(torch_site, jobs, ckpt_root):
    saved = jobs["fsdp"].results(timeout=WAIT)
    full = saved[0]["full"]
    assert sum(r["local"] for r in saved) == full  # the shards partition the model
    assert all(r["local"] <= full / 4 + 64 for r in saved)  # ~1/world_size each
    resumed = torch_site.submit(fsdp_resume, ckpt_root, gpus=2, name="t-resume", **SMALL).results(
        timeout=WAIT
    )
    assert [r["rank"] for r in resumed] == [0, 1] and {r["world"] for r in resumed} == {2}
    for r in resumed:
        assert r["latest"].endswith("step_00000001")
        assert r["extra"] == {"step": 1, "world": 4}
        assert r["before"] != pytest.approx(saved[0]["checksum"])  # the load changed weights
        assert r["after"] == pytest.approx(saved[0]["checksum"], rel=1e-12)
        assert r["opt_steps"] == [1]  # Adam's state came back too


def test_stop_file_ends_the_loop_on_every_rank(jobs):
    job = jobs["stop"]
    results = stop_once_looping(job, WAIT)
    assert [r["rank"] for r in results] == [0, 1]
    assert all(r["stopped"] for r in results)
    assert len({r["step"] for r in results}) == 1  # all ranks left at the same step
    assert job.state is JobState.COMPLETED


def test_torchrun_launcher_gives_a_result_and_log_per_rank(jobs):
    job = jobs["torchrun"]
    results = job.results(timeout=WAIT)
    assert [r["rank"] for r in results] == [0, 1]
    assert {r["world"] for r in results} == {2} and {r["sum"] for r in results} == {3.0}
    assert all(r["elastic"] for r in results)  # really started by torchrun
    assert [r["slurm_procid"] for r in results] == ["0", "1"]
    assert "hello from rank 1" in job.stdout(1)
    assert job.state is JobState.COMPLETED
