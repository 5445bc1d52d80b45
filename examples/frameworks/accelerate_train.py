"""A Hugging Face Accelerate training script, launched as the CSC guide launches one:

    hpcui run --launcher accelerate --launcher-config accelerate_config.yaml \
        --nodes 2 --gpus 8 --time 1h accelerate_train.py --steps 200

hpcui runs one `accelerate launch` per node (its machine rank computed there) and uploads
the config with the script. Each rank prints one line per step, so `hpcui logs` and
`hpcui metrics` read `step=... loss=...`, and stops cleanly at `job.stop()`: the loop asks
`hpcui.distributed.stop_requested()` (one tiny collective) every few steps, then saves
Accelerate's own checkpoint, which the next run of the script resumes from.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from accelerate import Accelerator

try:
    from hpcui import distributed as hd
except ImportError:  # run by a hand-written batch script, without hpcui: no job.stop()
    hd = None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--checkpoint", default="")
    parser.add_argument("--sleep", type=float, default=0.0)
    args = parser.parse_args()

    acc = Accelerator()
    print(
        f"accelerate: rank={acc.process_index} world={acc.num_processes} "
        f"machine_rank={os.environ.get('NODE_RANK', os.environ.get('GROUP_RANK', '?'))} "
        f"host={os.uname().nodename} type={acc.distributed_type}",
        flush=True,
    )
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    model, opt = acc.prepare(model, opt)
    start = 0
    if args.checkpoint and os.path.isdir(args.checkpoint):
        acc.load_state(args.checkpoint)
        start = int(open(os.path.join(args.checkpoint, "step")).read())
        acc.print(f"resumed from {args.checkpoint} at step {start}")
    gen = torch.Generator().manual_seed(1000 + acc.process_index)
    w = torch.linspace(-1, 1, 8)
    step = start
    for step in range(start, args.steps):
        x = torch.randn(32, 8, generator=gen)
        loss = torch.nn.functional.mse_loss(model(x), (x @ w).unsqueeze(1))
        if step == start:
            acc.print(f"first_step_at={time.time():.3f}", flush=True)
        acc.backward(loss)
        opt.step()
        opt.zero_grad()
        acc.print(f"step={step} loss={loss.item():.5f}", flush=True)
        if args.sleep:
            time.sleep(args.sleep)
        if hd is not None and step % 5 == 4 and hd.stop_requested():  # `job.stop()`
            acc.print(f"stop requested at step {step}", flush=True)
            step += 1
            break
    else:
        step = args.steps
    if args.checkpoint:
        acc.save_state(args.checkpoint)
        if acc.is_main_process:
            with open(os.path.join(args.checkpoint, "step"), "w") as fh:
                fh.write(str(step))
    acc.wait_for_everyone()
    checksum = sum(float(p.detach().double().sum()) for p in acc.unwrap_model(model).parameters())
    print(
        f"accelerate: rank={acc.process_index} done step={step} checksum={checksum:.6f}", flush=True
    )


if __name__ == "__main__":
    main()
