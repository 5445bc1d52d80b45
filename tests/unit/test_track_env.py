"""The node side of track= (hpcui.node.track_env): each tracker pointed at the job's
folder unless the user set it, a sweep's elements grouped by its name, nothing without
track=."""

from __future__ import annotations

from pathlib import Path

from hpcui.node.track_env import point_trackers


def test_each_tracker_writes_offline_into_the_jobs_folder(tmp_path: Path) -> None:
    env = {"HPCUI_TRACK": "auto", "HPCUI_JOB_FOLDER": str(tmp_path)}
    track = point_trackers(env, job_id="42_3")
    assert track == f"{tmp_path}/track/42_3" and Path(track).is_dir()
    assert env["WANDB_MODE"] == "offline" and env["WANDB_DIR"] == track
    assert env["MLFLOW_TRACKING_URI"] == f"file:{track}/mlruns"
    assert env["MLFLOW_ALLOW_FILE_STORE"] == "true" and env["HPCUI_TRACK_DIR"] == track


def test_the_users_own_settings_win_and_one_tracker_is_only_that_one(tmp_path: Path) -> None:
    env = {"HPCUI_TRACK": "mlflow", "HPCUI_JOB_FOLDER": str(tmp_path),
           "MLFLOW_TRACKING_URI": "http://their-server:5000", "HPCUI_SWEEP": "lr-scan"}  # fmt: skip
    point_trackers(env, job_id="7")
    assert env["MLFLOW_TRACKING_URI"] == "http://their-server:5000"
    assert env["MLFLOW_EXPERIMENT_NAME"] == "lr-scan" and "WANDB_MODE" not in env
    wandb = {"HPCUI_TRACK": "wandb", "HPCUI_JOB_FOLDER": str(tmp_path), "HPCUI_SWEEP": "s"}
    point_trackers(wandb, job_id="8")
    assert wandb["WANDB_RUN_GROUP"] == "s" and "MLFLOW_TRACKING_URI" not in wandb


def test_without_track_nothing_is_set(tmp_path: Path) -> None:
    env = {"HPCUI_JOB_FOLDER": str(tmp_path)}
    assert point_trackers(env, job_id="1") == "" and set(env) == {"HPCUI_JOB_FOLDER"}


def test_track_reaches_the_job_and_a_sweep_names_its_group() -> None:
    import pytest
    from pydantic import ValidationError

    from hpcui.profiles import load_profile
    from hpcui.request.plan import resolve
    from hpcui.request.resources import Resources

    dev = load_profile("dev")
    env = resolve(Resources(track="wandb", track_group="lr-scan"), dev).env
    assert env["HPCUI_TRACK"] == "wandb" and env["HPCUI_SWEEP"] == "lr-scan"
    assert "HPCUI_TRACK" not in resolve(Resources(track_group="lr-scan"), dev).env
    with pytest.raises(ValidationError):
        Resources(track="comet")
    with pytest.raises(ValidationError):  # it reaches the job's environment: a name only
        Resources(track="auto", track_group="x; rm -rf ~")
