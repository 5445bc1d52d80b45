"""A DeepSpeed ZeRO-2 script in the form the CSC guide runs over several nodes: one srun
task per GPU, `deepspeed.init_distributed()` reading the rank variables (hpcui exports
them in every task; a hand-written batch script exports them from SLURM_PROCID & co.).

    hpcui run --launcher deepspeed --nodes 2 --gpus 8 --time 1h deepspeed_train.py

Prints `first_step_at=<unix time>` at its first step (rank 0), then DeepSpeed's own
`[Rank 0] step=..., lr=[...]` lines (its logger at INFO).
"""

from __future__ import annotations

import argparse
import os
import time

import deepspeed
import torch
from deepspeed.utils.logging import set_log_level_from_string


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument(
        "--backend", default=None, help="gloo on CPU; the accelerator's own by default"
    )
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
    g = torch.Generator().manual_seed(int(os.environ.get("RANK", "0")))
    for step in range(args.steps):
        x = torch.randn(4, 8, generator=g)
        loss = torch.nn.functional.mse_loss(engine(x), x.sum(1, keepdim=True))
        if step == 0 and engine.global_rank == 0:
            print(f"first_step_at={time.time():.3f}", flush=True)
        engine.backward(loss)
        engine.step()


if __name__ == "__main__":
    main()
