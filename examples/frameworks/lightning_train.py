"""A PyTorch Lightning script as the CSC guide runs one: `srun python lightning_train.py`
with one Slurm task per GPU; Lightning reads the ranks from Slurm itself.

    hpcui run --launcher lightning --nodes 2 --gpus 8 --time 1h lightning_train.py --nodes 2 --devices 4

Prints `first_step_at=<unix time>` at its first training step (rank 0), which
benchmarks/framework_start_bench.py reads, then `step=... loss=...` lines.
"""

from __future__ import annotations

import argparse
import time

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)
        )

    def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        if self.global_rank == 0:
            if batch_idx == 0 and self.current_epoch == 0:
                print(f"first_step_at={time.time():.3f}", flush=True)
            print(f"step={self.global_step} loss={loss.item():.5f}", flush=True)
        return loss

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--accelerator", default="auto")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, 8, generator=g)
    data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=16)
    trainer = L.Trainer(
        accelerator=args.accelerator, devices=args.devices, num_nodes=args.nodes,
        strategy="ddp", max_steps=args.steps, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    trainer.fit(Net(), data)


if __name__ == "__main__":
    main()
