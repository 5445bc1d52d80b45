"""A DeepSpeed ZeRO-2 script in the form the CSC guide runs over several nodes: one srun
task per GPU, `deepspeed.init_distributed()` reading the rank variables (hpcui exports
them in every task; a hand-written batch script exports them from SLURM_PROCID & co.).

    hpcui run --launcher deepspeed --nodes 2 --gpus 8 --time 1h deepspeed_train.py

Prints `first_step_at=<unix time>` at its first step (rank 0), then DeepSpeed's own
`[Rank 0] step=..., lr=[...]` lines (its logger at INFO). With `--checkpoint DIR` it stops
cleanly at `job.stop()` or the time limit's early signal: every few steps the loop asks
`hpcui.distributed.stop_requested()` (one tiny collective), then every rank takes part in
DeepSpeed's own `engine.save_checkpoint(DIR)`; the next run resumes with
`engine.load_checkpoint(DIR)` (its `latest` file names the tag), so `chain=N` works too.
"""

from __future__ import annotations

import argparse
import os
import time

import deepspeed
import torch
from deepspeed.utils.logging import set_log_level_from_string

try:
    from hpcui import distributed as hd
except ImportError:  # run by a hand-written batch script, without hpcui: no job.stop()
    hd = None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument(
        "--backend", default=None, help="gloo on CPU; the accelerator's own by default"
    )
    parser.add_argument("--checkpoint", default="")
    parser.add_argument("--sleep", type=float, default=0.0)
    args = parser.parse_args()
    set_log_level_from_string("info")
    deepspeed.init_distributed(dist_backend=args.backend)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    config = {
        "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1, "steps_per_print": 5,
        "zero_optimization": {"stage": 2},
        "optimizer": {"type": "Adam", "params": {"lr": 1e-2, "torch_adam": True}},
    }  # fmt: skip
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    start = 0
    if args.checkpoint and os.path.exists(os.path.join(args.checkpoint, "latest")):
        _, client = engine.load_checkpoint(args.checkpoint)  # every rank: its ZeRO shard
        start = int(client["step"])
        if engine.global_rank == 0:
            print(f"resumed from {args.checkpoint} at step {start}", flush=True)
    g = torch.Generator().manual_seed(int(os.environ.get("RANK", "0")))
    step = start
    for step in range(start, args.steps):
        x = torch.randn(4, 8, generator=g)
        loss = torch.nn.functional.mse_loss(engine(x), x.sum(1, keepdim=True))
        if step == start and engine.global_rank == 0:
            print(f"first_step_at={time.time():.3f}", flush=True)
        engine.backward(loss)
        engine.step()
        if engine.global_rank == 0:
            print(f"step={step} loss={loss.item():.5f}", flush=True)
        if args.sleep:
            time.sleep(args.sleep)
        if hd is not None and step % 5 == 4 and hd.stop_requested():  # `job.stop()`
            if engine.global_rank == 0:
                print(f"stop requested at step {step}", flush=True)
            step += 1
            break
    else:
        step = args.steps
    if args.checkpoint:  # a collective: every rank writes its part
        engine.save_checkpoint(args.checkpoint, client_state={"step": step})
    checksum = sum(float(p.detach().double().sum()) for p in engine.module.parameters())
    print(
        f"deepspeed: rank={engine.global_rank} done step={step} checksum={checksum:.6f}", flush=True
    )


if __name__ == "__main__":
    main()
