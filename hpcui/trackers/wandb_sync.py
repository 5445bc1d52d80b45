"""W&B's offline runs, mirrored here, uploaded by W&B's own `wandb sync` on this machine.

The node writes `offline-run-*/run-*.wandb` (W&B's transaction log) into the job's track
folder; the relay mirrors it byte for byte. `wandb sync` here reads the mirror and marks
what it uploaded (`run-*.wandb.synced` beside it), so a second sync uploads nothing: a run
is never uploaded twice. hpcui runs the program, in W&B's words when it fails (not logged
in: `wandb login`), and keeps the mirror either way.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hpcui.errors import UsageError

#: W&B's marker of an uploaded transaction log (its `wandb sync` writes and honours it)
SYNCED = ".synced"


def offline_runs(local: Path) -> list[Path]:
    """The mirrored offline runs' folders, oldest first."""
    return sorted(p.parent for p in local.glob("wandb/offline-run-*/run-*.wandb"))


def is_synced(run: Path) -> bool:
    return any(run.glob(f"run-*.wandb{SYNCED}"))


def command(runs: list[Path], wandb: str = "wandb") -> list[str]:
    """The upload, as W&B documents it: `wandb sync RUN_DIR...`, already-synced runs skipped."""
    return [wandb, "sync", "--skip-synced", *map(str, runs)]


@dataclass
class Synced:
    command: list[str]
    runs: list[Path]
    output: str


def sync(local: Path, *, timeout: float = 1800) -> Synced | None:
    """Upload the mirror's runs not yet synced (None where there is none to upload)."""
    runs = [r for r in offline_runs(local) if not is_synced(r)]
    if not runs:
        return None
    wandb = shutil.which("wandb")
    if wandb is None:
        raise UsageError(
            "W&B's `wandb` is not installed here, so the mirrored runs stay unsynced in "
            f"{local}: `pip install wandb`, `wandb login`, then `hpcui track sync` again."
        )
    argv = command(runs, wandb)
    res = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    said = (res.stdout + res.stderr).strip()
    if res.returncode != 0:
        raise UsageError(
            f"`{' '.join(argv)}` failed (exit {res.returncode}); W&B said: {said[-800:]}. The "
            f"runs stay mirrored in {local}; `wandb login` if it asks, then `hpcui track sync`."
        )
    return Synced(argv, runs, said)
