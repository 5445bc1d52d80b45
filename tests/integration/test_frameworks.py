"""The training frameworks researchers use, for real, on the dev cluster's Slurm (two
slurmd, node1/node2) and its OpenPBS site (pbs-n1/pbs-n2): Lightning, Accelerate (and the
HF Trainer on it) and DeepSpeed, all CPU and gloo, from the dev site's PyTorch module
(lightning, accelerate, transformers and deepspeed installed as CSC's pytorch module has
them; scripts/devcluster_common.py FRAMEWORKS). Nothing here is a stand-in.

The jobs of one site are submitted together by a module fixture (they queue side by
side, as a user's would), then each test reads its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hpcui.errors import UsageError
from hpcui.submission.targets import script_call
from tests.integration.ranks import VENV_PYTHON

pytestmark = [pytest.mark.devcluster, pytest.mark.xdist_group("frameworks")]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "frameworks"
SMALL = {"time": "6m", "cpus_per_task": 1, "mem": "4G"}
WAIT = 420
#: the stop, resume, chain and module tests: a second worker's, beside the jobs of the
#: module fixtures (each of these waits minutes on its own jobs)
LONG = "frameworks-long"
#: where the Slurm Lightning job's CSVLogger writes (the shared home: the login node reads it)
LIT_LOGS = f"~/.hpcui-test-lit-csv-{int(time.time())}"


# -- functions that run on the cluster ------------------------------------------------------


def _lit_module() -> Any:
    """A small regression LightningModule, its data the same on every rank (seeded)."""
    import lightning as L
    import torch

    class Net(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.net = torch.nn.Sequential(
                torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)
            )

        def training_step(self, batch: Any, _: int) -> Any:
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("train_loss", loss, prog_bar=True)
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.05)

    return Net()


def _lit_data(n: int = 256) -> Any:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    g = torch.Generator().manual_seed(7)
    x = torch.randn(n, 8, generator=g)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=16)


def _lit_result(trainer: Any, model: Any) -> dict[str, Any]:
    import os
    import socket

    return {
        "rank": trainer.global_rank,
        "world": trainer.world_size,
        "node": trainer.node_rank,
        "host": socket.gethostname(),
        "env": type(trainer.strategy.cluster_environment).__name__,
        "master": os.environ.get("MASTER_ADDR"),
        "checksum": float(sum(p.detach().double().sum() for p in model.parameters())),
        "steps": trainer.global_step,
    }


def lightning_ddp(logs: str = "") -> dict[str, Any]:
    """Lightning's own DDP on 2 nodes x 2 tasks, found through the scheduler's variables;
    with `logs`, its CSVLogger writes `<logs>/run/version_0/metrics.csv` (rank 0)."""
    import os

    import lightning as L
    from lightning.pytorch.loggers import CSVLogger

    model = _lit_module()
    logger = CSVLogger(os.path.expanduser(logs), name="run", version=0) if logs else False
    trainer = L.Trainer(
        accelerator="cpu", devices=2, num_nodes=2, strategy="ddp", max_epochs=2,
        logger=logger, log_every_n_steps=2, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    trainer.fit(model, _lit_data())
    return _lit_result(trainer, model)


def lightning_four_devices() -> int:
    """devices=4 where the job has 2 tasks per node: refused before it queues."""
    import lightning as L

    L.Trainer(accelerator="cpu", devices=4, num_nodes=2, strategy="ddp")
    return 0


def lightning_stoppable(ckpt: str, steps: int, sleep: float) -> dict[str, Any]:
    """A fit that ends at job.stop() (hpcui's Lightning callback) with Lightning's own
    checkpoint written, and resumes from it when run again."""
    import os
    import time

    import lightning as L

    from hpcui import distributed as hd

    class Slow(L.Callback):
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            time.sleep(sleep)
            if trainer.global_rank == 0 and trainer.global_step % 10 == 0:
                print(f"step={trainer.global_step}", flush=True)

    ckpt = os.path.expanduser(ckpt)
    model = _lit_module()
    trainer = L.Trainer(
        accelerator="cpu", devices=2, num_nodes=1, strategy="ddp", max_steps=steps,
        max_epochs=-1, logger=False, enable_checkpointing=False, enable_model_summary=False,
        callbacks=[Slow(), hd.lightning_callback(ckpt, every_n_steps=2)],
    )  # fmt: skip
    resumed_at = None
    if os.path.exists(ckpt):
        import torch

        resumed_at = torch.load(ckpt, weights_only=False)["global_step"]
    trainer.fit(model, _lit_data(), ckpt_path=ckpt if resumed_at is not None else None)
    out = _lit_result(trainer, model)
    out["resumed_at"] = resumed_at
    return out


def lightning_chained(root: str, steps: int, sleep: float) -> dict[str, Any]:
    """A run longer than one segment: Lightning's ModelCheckpoint every few steps, each
    segment resuming from its `last.ckpt`; the segment's time limit ends it. The limit's
    kill can cut a checkpoint being written: `save_last="link"` keeps `last.ckpt` a link
    to the last one written whole (a copied `last.ckpt` would be the cut one)."""
    import os
    import time

    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    class Slow(L.Callback):
        def on_train_batch_end(self, *args: Any) -> None:
            time.sleep(sleep)

    root = os.path.expanduser(root)
    last = os.path.join(root, "last.ckpt")
    resumed_from = None
    if os.path.exists(last):
        import torch

        resumed_from = torch.load(last, weights_only=False)["global_step"]
    model = _lit_module()
    trainer = L.Trainer(
        accelerator="cpu", devices=2, num_nodes=1, strategy="ddp", max_steps=steps,
        max_epochs=-1, logger=False, enable_model_summary=False, enable_progress_bar=False,
        callbacks=[Slow(), ModelCheckpoint(dirpath=root, save_last="link", every_n_train_steps=5)],
    )  # fmt: skip
    trainer.fit(model, _lit_data(), ckpt_path=last if resumed_from is not None else None)
    out = _lit_result(trainer, model)
    out["resumed_from"] = resumed_from
    return out


def accelerate_callable() -> dict[str, Any]:
    """An Accelerator() in a callable: 4 srun tasks become one MULTI_CPU process group."""
    import torch
    from accelerate import Accelerator

    acc = Accelerator()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model, opt = acc.prepare(model, opt)
    g = torch.Generator().manual_seed(acc.process_index)
    losses = []
    for _ in range(15):
        x = torch.randn(16, 8, generator=g)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        acc.backward(loss)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return {
        "rank": acc.process_index,
        "world": acc.num_processes,
        "type": str(acc.distributed_type),
        "first": sum(losses[:3]) / 3,
        "last": sum(losses[-3:]) / 3,
        "checksum": float(
            sum(p.detach().double().sum() for p in acc.unwrap_model(model).parameters())
        ),
    }


def _hf_model_and_data() -> tuple[Any, list[dict[str, Any]]]:
    """A regression model in the HF Trainer's form (a dict with the loss) and its data."""
    import torch

    class Reg(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.lin = torch.nn.Linear(8, 1)

        def forward(self, x: Any, labels: Any = None) -> dict[str, Any]:
            pred = self.lin(x)
            return {"loss": torch.nn.functional.mse_loss(pred, labels), "logits": pred}

    g = torch.Generator().manual_seed(3)
    return Reg(), [
        {"x": x, "labels": x.sum().unsqueeze(0)} for x in torch.randn(512, 8, generator=g)
    ]


def hf_trainer(out: str) -> dict[str, Any]:
    """The HF Trainer with TrainingArguments on 2 nodes: its log lines are what hpcui reads."""
    from transformers import Trainer, TrainingArguments

    model, data = _hf_model_and_data()
    args = TrainingArguments(
        output_dir=out, max_steps=24, logging_steps=4, per_device_train_batch_size=8,
        learning_rate=0.05, use_cpu=True, report_to=[], save_strategy="no",
        disable_tqdm=False, dataloader_num_workers=0,
    )  # fmt: skip
    trainer = Trainer(model=model, args=args, train_dataset=data)
    result = trainer.train()
    return {
        "rank": trainer.args.process_index,
        "world": trainer.args.world_size,
        "loss": result.training_loss,
        "steps": result.global_step,
    }


def hf_stoppable(out: str, steps: int, sleep: float) -> dict[str, Any]:
    """The HF Trainer ended by job.stop() through hpcui's TrainerCallback: the Trainer's
    own checkpoint is written, and the next run resumes from it."""
    import os
    import time

    from transformers import Trainer, TrainerCallback, TrainingArguments
    from transformers.trainer_utils import get_last_checkpoint

    from hpcui import distributed as hd

    class Slow(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            time.sleep(sleep)
            if state.is_world_process_zero and state.global_step % 10 == 0:
                print(f"step={state.global_step}", flush=True)

    out = os.path.expanduser(out)
    model, data = _hf_model_and_data()
    args = TrainingArguments(
        output_dir=out, max_steps=steps, per_device_train_batch_size=8, learning_rate=0.05,
        use_cpu=True, report_to=[], save_strategy="no", disable_tqdm=True,
        dataloader_num_workers=0, logging_steps=1000,
    )  # fmt: skip
    trainer = Trainer(
        model=model, args=args, train_dataset=data,
        callbacks=[Slow(), hd.transformers_callback(every_n_steps=2)],
    )  # fmt: skip
    last = get_last_checkpoint(out) if os.path.isdir(out) else None
    result = trainer.train(resume_from_checkpoint=last)
    resumed_at = int(last.rsplit("-", 1)[1]) if last else None  # its checkpoint-<step>
    return {
        "rank": trainer.args.process_index,
        "steps": result.global_step,
        "resumed_at": resumed_at,
    }


def deepspeed_zero2() -> dict[str, Any]:
    """ZeRO stage 2 on 4 ranks over 2 nodes: DeepSpeed's init_distributed finds the ranks
    in torch's variables (every task exports them), gloo on CPU."""
    import os

    import deepspeed
    import torch
    from deepspeed.utils.logging import set_log_level_from_string

    set_log_level_from_string("info")  # its `step=..., lr=[...]` lines (WARNING by default)
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    config = {
        "train_batch_size": 16, "train_micro_batch_size_per_gpu": 4, "steps_per_print": 2,
        "zero_optimization": {"stage": 2},
        "optimizer": {"type": "Adam", "params": {"lr": 1e-2, "torch_adam": True}},
    }  # fmt: skip
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    g = torch.Generator().manual_seed(int(os.environ["RANK"]))
    losses = []
    for _ in range(10):
        x = torch.randn(4, 8, generator=g)
        loss = torch.nn.functional.mse_loss(engine(x), x.sum(1, keepdim=True))
        engine.backward(loss)
        engine.step()
        losses.append(loss.item())
    return {
        "rank": engine.global_rank,
        "world": engine.world_size,
        "stage": engine.zero_optimization_stage(),
        "checksum": float(sum(p.detach().double().sum() for p in engine.module.parameters())),
        "first": losses[0],
        "last": losses[-1],
    }


# -- the jobs ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def slurm(devcluster: Path) -> Iterator[Any]:
    from tests.integration.clusters import site_cluster

    with site_cluster(devcluster, "dev", python=VENV_PYTHON) as c:
        yield c


@pytest.fixture(scope="module")
def slurm_jobs(slurm: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every Slurm job of this module, submitted at once (they queue side by side)."""
    two_by_two = {"nodes": 2, "tasks_per_node": 2, **SMALL}
    run = f"/tmp/hpcui-frameworks-{int(time.time())}"  # node-local is enough: rank 0 writes
    jobs = {
        "lightning": slurm.submit(lightning_ddp, LIT_LOGS, **two_by_two),
        "accelerate_callable": slurm.submit(accelerate_callable, **two_by_two),
        "hf": slurm.submit(hf_trainer, f"{run}-hf", **two_by_two),
        "deepspeed": slurm.submit(deepspeed_zero2, **two_by_two),
        # one node: DeepSpeed's own `deepspeed --num_gpus 2` starts the ranks
        "deepspeed_own": slurm.submit(
            deepspeed_zero2, launcher="deepspeed", gpus=2, nodes=1, **SMALL
        ),
    }
    script = script_call(EXAMPLES / "accelerate_train.py", ["--steps", "30"])
    jobs["accelerate_script"] = slurm.submit(
        script.fn, *script.args, launcher="accelerate", gpus=4, nodes=2,
        launcher_config=str(EXAMPLES / "accelerate_config.yaml"), **SMALL,
    )  # fmt: skip
    return jobs


@pytest.fixture(scope="module")
def pbs(devcluster: Path) -> Iterator[Any]:
    from tests.integration.clusters import site_cluster
    from tests.integration.test_pbs_real import SKIPPED

    if SKIPPED.exists():
        pytest.fail(f"the PBS site is not up: {SKIPPED.read_text().strip()}")
    with site_cluster(devcluster, "pbs", python=VENV_PYTHON) as c:
        yield c


@pytest.fixture(scope="module")
def pbs_jobs(pbs: Any) -> dict[str, Any]:
    """The same frameworks on OpenPBS: 2 hosts (4 ngpus each), hpcui's per-rank launcher."""
    jobs = {"lightning": pbs.submit(lightning_ddp, nodes=2, tasks_per_node=2, **SMALL)}
    script = script_call(EXAMPLES / "accelerate_train.py", ["--steps", "30"])
    jobs["accelerate_script"] = pbs.submit(
        script.fn, *script.args, launcher="accelerate", gpus=4, nodes=2,
        launcher_config=str(EXAMPLES / "accelerate_fsdp.yaml"), **SMALL,
    )  # fmt: skip
    return jobs


def _same(values: list[dict[str, Any]], key: str) -> None:
    seen = {round(v[key], 6) for v in values}
    assert len(seen) == 1, f"{key} differs between ranks: {values}"


def test_lightning_ddp_on_two_nodes_of_slurm(slurm_jobs: dict[str, Any]) -> None:
    values = slurm_jobs["lightning"].results(timeout=WAIT)
    assert [v["rank"] for v in values] == [0, 1, 2, 3]
    assert {v["world"] for v in values} == {4}
    assert [v["node"] for v in values] == [0, 0, 1, 1]
    assert [v["host"] for v in values] == ["node1", "node1", "node2", "node2"]
    assert {v["env"] for v in values} == {"SLURMEnvironment"}
    assert {v["master"] for v in values} == {"127.0.1.11"}  # node1i: the profile's suffix
    _same(values, "checksum")  # DDP kept the replicas identical
    assert {v["steps"] for v in values} == {8}  # 2 epochs of 256/16 batches over 4 ranks


def test_lightnings_csvlogger_file_is_the_jobs_metrics(slurm_jobs: dict[str, Any], slurm: Any):
    """`hpcui metrics --file`: the metrics.csv rank 0's CSVLogger wrote, read where it is."""
    from hpcui.errors import UsageError
    from hpcui.metrics import read_metrics_file

    job = slurm_jobs["lightning"]
    job.results(timeout=WAIT)
    path = f"{LIT_LOGS}/run/version_0/metrics.csv"
    metrics = read_metrics_file(slurm, job, path)
    loss = metrics.get("train_loss")
    assert metrics.x_name == "step" and loss is not None, metrics
    assert loss.x == [1.0, 3.0, 5.0, 7.0] and loss.y[-1] < loss.y[0], loss  # it learned
    with pytest.raises(UsageError, match=r"cannot read .*no such file.*CSVLogger"):
        read_metrics_file(slurm, job, path + ".missing")
    slurm.run(f"rm -rf {LIT_LOGS}")


def test_a_lightning_trainer_that_does_not_fit_is_refused_before_it_queues(slurm: Any) -> None:
    def queued() -> set[str]:
        return set(slurm.run(["squeue", "--me", "-h", "-o", "%i"]).stdout.split())

    before, records = queued(), len(slurm.records())
    with pytest.raises(UsageError) as err:
        slurm.submit(lightning_four_devices, nodes=2, tasks_per_node=2, **SMALL)
    text = str(err.value)
    assert "devices=4" in text and "devices=2, num_nodes=2" in text
    assert "Nothing was submitted" in text
    assert len(slurm.records()) == records and queued() <= before


def test_accelerate_in_a_callable_is_one_process_group(slurm_jobs: dict[str, Any]) -> None:
    values = slurm_jobs["accelerate_callable"].results(timeout=WAIT)
    assert [v["rank"] for v in values] == [0, 1, 2, 3]
    assert {(v["world"], v["type"]) for v in values} == {(4, "DistributedType.MULTI_CPU")}
    _same(values, "checksum")
    assert all(v["last"] < v["first"] for v in values)


def test_accelerate_launch_per_node_with_its_config(slurm_jobs: dict[str, Any]) -> None:
    job = slurm_jobs["accelerate_script"]
    assert job.results(timeout=WAIT) == [0, 0, 0, 0]
    lines = [job.stdout(rank) for rank in range(4)]
    for rank, text in enumerate(lines):
        assert f"accelerate: rank={rank} world=4 machine_rank={rank // 2}" in text, text
        assert "type=DistributedType.MULTI_CPU" in text
    done = [line for text in lines for line in text.splitlines() if " done " in line]
    assert len({line.split("checksum=")[1] for line in done}) == 1, done
    losses = [float(x.split("loss=")[1]) for x in lines[0].splitlines() if x.startswith("step=")]
    assert len(losses) == 30 and sum(losses[-5:]) < sum(losses[:5])
    assert "--config_file" in lines[0] and "--machine_rank=0" in lines[0]


def test_the_hf_trainer_on_two_nodes_feeds_metrics_and_the_eta(
    slurm_jobs: dict[str, Any], slurm: Any
) -> None:
    from hpcui.logs.progress import read_progress
    from hpcui.metrics import read_metrics

    job = slurm_jobs["hf"]
    values = job.results(timeout=WAIT)
    assert [v["rank"] for v in values] == [0, 1, 2, 3]
    assert {(v["world"], v["steps"]) for v in values} == {(4, 24)}
    # transformers 5 prints {'loss': '7.475', ..., 'epoch': '0.25'}: quoted numbers
    metrics = read_metrics(slurm, job)
    loss = metrics.get("loss")
    assert metrics.x_name == "epoch" and loss is not None, metrics
    assert loss.x == [0.25, 0.5, 0.75, 1.0, 1.25, 1.5] and loss.y[-1] < loss.y[0]
    assert metrics.get("learning_rate") is not None
    # its tqdm bar on rank 0's stderr is what will-it-finish reads while it runs
    progress = read_progress(job.stderr(0))
    assert progress is not None and (progress.done, progress.total) == (24, 24), progress
    assert progress.source == "tqdm" and progress.rate_per_s


def test_deepspeed_zero2_on_two_nodes_through_srun_tasks(
    slurm_jobs: dict[str, Any], slurm: Any
) -> None:
    from hpcui.metrics import read_metrics

    job = slurm_jobs["deepspeed"]
    values = job.results(timeout=WAIT)
    assert [v["rank"] for v in values] == [0, 1, 2, 3]
    assert {(v["world"], v["stage"]) for v in values} == {(4, 2)}
    _same(values, "checksum")  # ZeRO-2's partitioned optimizer still updates one model
    # DeepSpeed's own `[Rank 0] step=2, skipped=0, lr=[0.01], mom=[...]` lines
    metrics = read_metrics(slurm, job)
    lr = metrics.get("lr")
    assert metrics.x_name == "step" and lr is not None, metrics
    # step=0 at initialize and the config dump's "lr": 0.01 come first; then one per print
    assert [x for x in lr.x if x > 0] == [2.0, 4.0, 6.0, 8.0, 10.0] and set(lr.y) == {0.01}


def test_lightning_ddp_on_two_hosts_of_openpbs(pbs_jobs: dict[str, Any]) -> None:
    values = pbs_jobs["lightning"].results(timeout=WAIT)
    assert [v["rank"] for v in values] == [0, 1, 2, 3]
    assert {v["world"] for v in values} == {4}
    assert [v["node"] for v in values] == [0, 0, 1, 1]
    assert [v["host"] for v in values] == ["pbs-n1", "pbs-n1", "pbs-n2", "pbs-n2"]
    assert {v["master"] for v in values} == {"pbs-n1"}  # first line of $PBS_NODEFILE
    _same(values, "checksum")


def test_accelerate_launch_per_host_on_openpbs_with_an_fsdp_config(
    pbs_jobs: dict[str, Any],
) -> None:
    job = pbs_jobs["accelerate_script"]
    assert job.results(timeout=WAIT) == [0, 0, 0, 0]
    for rank in range(4):
        text = job.stdout(rank)
        assert f"accelerate: rank={rank} world=4 machine_rank={rank // 2}" in text, text
    # on CPU Accelerate runs an FSDP config as multi-CPU data parallel (FSDP needs GPUs)
    assert "type=DistributedType.MULTI_CPU" in job.stdout(0)
    losses = [
        float(x.split("loss=")[1]) for x in job.stdout(0).splitlines() if x.startswith("step=")
    ]
    assert len(losses) == 30 and sum(losses[-5:]) < sum(losses[:5])


def _wait_for(job: Any, text: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while text not in job.stdout(0) + job.stderr(0):
        assert time.monotonic() < deadline, f"{text!r} never appeared: {job.stdout(0)[-2000:]}"
        assert not job.state.is_final, f"ended before {text!r}: {job.state}"
        time.sleep(2)


def _stop_callable(job: Any, ready: str) -> tuple[list[dict[str, Any]], int]:
    """Stop a callable's run once `ready` shows: COMPLETED, every rank at the same step."""
    from hpcui.backends.states import JobState

    _wait_for(job, ready)
    job.stop()
    values = job.results(timeout=WAIT)
    assert job.state is JobState.COMPLETED
    stopped_at = {v["steps"] for v in values}
    assert len(stopped_at) == 1, values  # the same step on both ranks
    steps = stopped_at.pop()
    assert 0 < steps < 100_000 and f"hpcui: stopping at step {steps}" in job.stdout(0)
    return values, steps


def _stop_script(job: Any, ready: str) -> int:
    """Stop a script's run once `ready` shows: COMPLETED, each rank's 0; the step it says."""
    from hpcui.backends.states import JobState

    _wait_for(job, ready)
    job.stop()
    assert job.results(timeout=WAIT) == [0, 0]
    assert job.state is JobState.COMPLETED
    return int(job.stdout(0).split("stop requested at step ")[1].split()[0])


@pytest.mark.xdist_group(LONG)
@pytest.mark.parametrize(
    ("fn", "where", "layout"),
    [(lightning_stoppable, "lit-stop-{}.ckpt", {"nodes": 1, "tasks_per_node": 2}),
     (hf_stoppable, "hf-stop-{}", {"nodes": 2, "tasks_per_node": 1})],
    ids=["lightning", "hf-trainer"],
)  # fmt: skip
def test_job_stop_ends_a_fit_with_the_frameworks_checkpoint_then_it_resumes(
    slurm: Any, fn: Any, where: str, layout: dict[str, int]
) -> None:
    """Lightning through hd.lightning_callback, the HF Trainer through
    hd.transformers_callback: COMPLETED at job.stop(), the framework's own checkpoint
    written, and the next run resumes from that step."""
    ckpt = f"~/.hpcui-test-{where.format(int(time.time()))}"  # shared home: either node
    small = {**layout, **SMALL}
    values, steps = _stop_callable(slurm.submit(fn, ckpt, 100_000, 0.05, **small), "step=20\n")
    assert {v["resumed_at"] for v in values} == {None}, values
    again = slurm.submit(fn, ckpt, steps + 4, 0.0, **small).results(timeout=WAIT)
    assert {(v["resumed_at"], v["steps"]) for v in again} == {(steps, steps + 4)}, again
    slurm.run(f"rm -rf {ckpt}")


@pytest.mark.xdist_group(LONG)
def test_job_stop_ends_an_accelerate_run_with_its_checkpoint(slurm: Any) -> None:

    home = slurm.run("echo $HOME").stdout.strip()
    ckpt = f"{home}/.hpcui-test-acc-{int(time.time())}"  # a script's argv: no shell expands it
    script = script_call(
        EXAMPLES / "accelerate_train.py",
        ["--steps", "100000", "--sleep", "0.05", "--checkpoint", ckpt],
    )
    job = slurm.submit(script.fn, *script.args, launcher="accelerate", gpus=2, nodes=1, **SMALL)
    stopped = _stop_script(job, "step=10 ")
    listing = slurm.run(f"cat {ckpt}/step; echo; ls {ckpt}").stdout
    assert listing.split()[0] == str(stopped + 1) and "model.safetensors" in listing
    slurm.run(f"rm -rf {ckpt}")


@pytest.mark.xdist_group(LONG)
def test_job_stop_ends_a_deepspeed_run_with_its_checkpoint_then_it_resumes(slurm: Any) -> None:
    """The guide's srun form over 2 nodes; DeepSpeed's own save_checkpoint/load_checkpoint."""

    home = slurm.run("echo $HOME").stdout.strip()
    ckpt = f"{home}/.hpcui-test-ds-{int(time.time())}"  # a script's argv: no shell expands it
    argv = ["--backend", "gloo", "--sleep", "0.05", "--checkpoint", ckpt]
    script = script_call(EXAMPLES / "deepspeed_train.py", ["--steps", "100000", *argv])
    two = {"launcher": "deepspeed", "nodes": 2, "tasks_per_node": 1, **SMALL}
    stopped = _stop_script(slurm.submit(script.fn, *script.args, **two), "step=10 ")
    listing = slurm.run(f"cat {ckpt}/latest; echo; ls {ckpt}").stdout.split()
    assert listing[0] == f"global_step{stopped + 1}" and listing[0] in listing[1:], listing
    script = script_call(EXAMPLES / "deepspeed_train.py", ["--steps", str(stopped + 6), *argv])
    again = slurm.submit(script.fn, *script.args, **two)
    assert again.results(timeout=WAIT) == [0, 0]
    out = again.stdout(0)
    assert f"resumed from {ckpt} at step {stopped + 1}" in out
    assert f"rank=0 done step={stopped + 6}" in out
    slurm.run(f"rm -rf {ckpt}")


def torch_from_the_module() -> str:
    import torch

    return torch.__file__


def with_plotext() -> dict[str, str]:
    """torch and lightning from the site's module, plotext (not in it) from env="auto"."""
    import lightning
    import plotext
    import torch

    return {"torch": torch.__file__, "lightning": lightning.__file__, "plotext": plotext.__file__}


@pytest.mark.xdist_group(LONG)
def test_the_jobs_modules_give_it_the_frameworks_and_env_auto_adds_the_rest(
    devcluster: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As CSC's guide: `module load pytorch` carries torch and the frameworks. What the call
    imports is asked of the Python the job runs, after its modules (torch is not in the
    site's plain python3: refused without the module, found with it); env="auto" over the
    module is a layer holding only what the module lacks (plotext, never torch), its build
    said."""
    import importlib.metadata

    from hpcui.errors import RemotePythonError
    from hpcui.submission import containers, environments
    from tests.conftest import LOCAL_WHEELS
    from tests.integration.clusters import site_cluster

    for key, value in LOCAL_WHEELS.items():  # this machine's package source: the wheel folder
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(environments, "wheel_cache", lambda: tmp_path / "cache")
    module_venv = VENV_PYTHON.rsplit("/bin/", 1)[0]
    tiny = {"time": "3m", "cpus_per_task": 1, "mem": "2G"}
    base = f"~/.hpcui-test-over-{int(time.time())}"  # its own envs/: no other test's builds
    with site_cluster(devcluster, "dev", remote_base=base) as c:  # python: /usr/bin/python3
        with pytest.raises(RemotePythonError, match="a Python by its path is that one"):
            c.submit(torch_from_the_module, modules=["pytorch"], **tiny)  # not the module's
    # the sites' usual: `python3`, whichever PATH gives (the module's, once loaded)
    with site_cluster(devcluster, "dev", remote_base=base, python="python3") as c:
        with pytest.raises(
            RemotePythonError, match=r"`torch` .* is not importable by dev.s Python"
        ):
            c.submit(torch_from_the_module, **tiny)
        plain = c.submit(torch_from_the_module, modules=["pytorch"], **tiny)
        assert plain.result(timeout=WAIT).startswith(module_venv)
        lines: list[str] = []
        token = containers.import_progress.set(lines.append)
        try:
            job = c.submit(with_plotext, modules=["pytorch"], env="auto", **tiny)
        finally:
            containers.import_progress.reset(token)
        said = "\n".join(lines)
        torch_here = importlib.metadata.version("torch")  # the module's is the same build
        assert f"env='auto': over `module load pytorch` (torch {torch_here} from it)" in said, said
        assert "their packages stay visible" in said and "installing with pip" in said, said
        got = job.result(timeout=WAIT)
        assert "/envs/" in got["plotext"], got
        for name in ("torch", "lightning"):  # the module's own copies
            assert got[name].startswith(module_venv), got
        layer = got["plotext"].split("/lib/python")[0]
        listing = c.run(["sh", "-c", f"ls {layer}/lib/python3*/site-packages"]).stdout.split()
        assert "plotext" in listing and not any(n.startswith("torch") for n in listing), listing
        c.run(["sh", "-c", f"rm -rf {base}"])


@pytest.mark.xdist_group(LONG)
def test_a_chain_of_three_one_minute_segments_finishes_a_lightning_run(slurm: Any) -> None:
    root = f"~/.hpcui-test-chain-{int(time.time())}"
    chain = slurm.submit(
        lightning_chained, root, 900, 0.1, chain=3, time="1m",
        nodes=1, tasks_per_node=2, cpus_per_task=1, mem="4G",
    )  # fmt: skip
    values = chain.results(timeout=600)
    assert {v["steps"] for v in values} == {900}
    assert {v["resumed_from"] for v in values} != {None}  # a later segment resumed
    _same(values, "checksum")
    slurm.run(f"rm -rf {root}")


def test_hpcui_run_launcher_auto_picks_accelerate_and_runs_it_per_node(dev_env: Path) -> None:
    """The CLI as the guides' users type it: `hpcui run --launcher auto` of an Accelerate
    script with its config, on 2 nodes, waited for."""
    import json
    import os
    import subprocess
    import sys

    from tests.conftest import LOCAL_WHEELS, ROOT

    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
        "HPCUI_CONFIG": os.environ["HPCUI_CONFIG"], "HPCUI_DATA_DIR": os.environ["HPCUI_DATA_DIR"],
        "PYTHONPATH": str(ROOT), "HPCUI_AGENT": "off",
        **{k: os.environ[k] for k in LOCAL_WHEELS if k in os.environ},
    }  # fmt: skip
    config = EXAMPLES / "accelerate_config.yaml"
    res = subprocess.run(
        [sys.executable, "-m", "hpcui.cli", "-c", "dev", "run", "--json", "--wait",
         "--launcher", "auto", "--launcher-config", str(config), "--gpus", "4", "--nodes", "2",
         "--python", VENV_PYTHON, "--time", "5m", "--cpus-per-task", "1", "--mem", "4G",
         str(EXAMPLES / "accelerate_train.py"), "--steps", "12"],
        env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=WAIT,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "launcher=auto: accelerate_train.py imports accelerate: accelerate" in res.stderr
    record = json.loads(res.stdout)
    assert record["state"] == "COMPLETED" and record["num_tasks"] == 4, record
    assert "(accelerate: one launcher per node)" in record["allocation"]


def test_deepspeeds_own_launcher_on_one_node(slurm_jobs: dict[str, Any]) -> None:
    job = slurm_jobs["deepspeed_own"]
    values = job.results(timeout=WAIT)
    assert [v["rank"] for v in values] == [0, 1]
    assert {(v["world"], v["stage"]) for v in values} == {(2, 2)}
    _same(values, "checksum")
    assert "deepspeed.launcher.runner --num_gpus=2" in job.stdout(0)
