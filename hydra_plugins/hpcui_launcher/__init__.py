"""hpcui's Hydra launcher: `python train.py -m lr=1e-3,1e-4 hydra/launcher=hpcui`.

Hydra finds launchers only in the `hydra_plugins` namespace; the work is in
hpcui.sweeps.hydra_launch (docs/sweeps.md, Hydra)."""
