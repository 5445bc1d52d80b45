"""A Hydra app run as an hpcui sweep from the laptop (docs/sweeps.md, Hydra):

    python train.py -m lr=0.1,0.01 seed=1,2 hydra/launcher=hpcui hydra.launcher.cluster=mn5 \
        hydra.launcher.time=10m hydra.launcher.name=lr-seed

Each job runs on the cluster; its output folder (`.hydra/`, `train.log`, `loss.txt`) comes
back into `multirun/<date>/<time>/<job number>/` here, and `hpcui sweep show lr-seed`
shows the four side by side. The same command again submits only what has no result.
"""

import logging
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

log = logging.getLogger(__name__)


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> dict:
    loss = 1.0
    for step in range(1, cfg.steps + 1):
        loss *= 1 - cfg.lr / (1 + cfg.seed) + (cfg.lr if cfg.lr > 0.5 else 0)
        print(f"step {step} loss {loss:.4f}", flush=True)  # the sweep table's metric.loss
        if loss > cfg.max_loss:
            raise ValueError(f"diverged at step {step}: loss {loss:.3f} > {cfg.max_loss}")
    out = Path(HydraConfig.get().runtime.output_dir)
    (out / "loss.txt").write_text(f"{loss:.6f}\n")
    log.info("final loss %.4f in %s", loss, out)
    return {"loss": round(loss, 6)}


if __name__ == "__main__":
    main()
