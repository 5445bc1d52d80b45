"""On the node, before the call: the trackers a job asked for write offline into its folder.

`submit(..., track=...)` exports HPCUI_TRACK; here each tracker is pointed at
`<job folder>/track/<job id>/` unless the user set it already (their variable wins):
W&B offline (`WANDB_MODE`, `WANDB_DIR`), MLflow's file store (`MLFLOW_TRACKING_URI`,
which MLflow 3 accepts only with `MLFLOW_ALLOW_FILE_STORE`), and `HPCUI_TRACK_DIR` for
TensorBoard or Lightning's loggers (`SummaryWriter(os.environ["HPCUI_TRACK_DIR"])`). A
sweep's elements group by its name (`WANDB_RUN_GROUP`, `MLFLOW_EXPERIMENT_NAME`). The
client mirrors that folder (hpcui.trackers.relay). Standard library only.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

from hpcui.backends.job_paths import JobPaths

ENV = "HPCUI_TRACK"
#: the sweep a job belongs to (hpcui.sweeps exports it)
SWEEP_ENV = "HPCUI_SWEEP"


def point_trackers(env: MutableMapping[str, str] | None = None, job_id: str = "") -> str:
    """Set the trackers' variables the user left unset; the track folder ("" if none)."""
    env = os.environ if env is None else env
    kind = env.get(ENV, "")
    folder = env.get("HPCUI_JOB_FOLDER") or env.get("SUBMITIT_FOLDER")
    if not kind or not folder or not job_id:
        return ""
    track = JobPaths(folder, job_id).track
    os.makedirs(track, exist_ok=True)
    env.setdefault("HPCUI_TRACK_DIR", track)
    sweep = env.get(SWEEP_ENV, "")
    if kind in ("auto", "wandb"):
        env.setdefault("WANDB_MODE", "offline")
        env.setdefault("WANDB_DIR", track)
        if sweep:
            env.setdefault("WANDB_RUN_GROUP", sweep)
    if kind in ("auto", "mlflow"):
        env.setdefault("MLFLOW_TRACKING_URI", f"file:{track}/mlruns")
        env.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        if sweep:
            env.setdefault("MLFLOW_EXPERIMENT_NAME", sweep)
    return track
