"""Experiment trackers on a node without internet, relayed to this machine (issue 60), on
the dev cluster's Slurm: the job writes MLflow's file store, W&B's offline run and
TensorBoard's event files into its folder (track=, hpcui.node.track_env); the relay
mirrors them (one command per pass) and hands them to this machine's trackers, which are
real: MLflow's tracking server on 127.0.0.1 (queried through its REST API), W&B's own CLI
and protobuf records, TensorBoard's HTTP API. Nothing leaves this machine: MLflow listens
on loopback, W&B runs offline and its CLI only dry-runs (its upload needs W&B's service)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import session_sshd_pids
from tests.integration.ranks import VENV_PYTHON

pytestmark = [pytest.mark.devcluster, pytest.mark.xdist_group("trackers")]

#: this machine's own trackers (scripts/install-deps): a researcher's laptop's
TOOLS = Path("/opt/hpcui-devcluster/trackers/bin")
WAIT = 300
TINY = {"time": "4m", "cpus_per_task": 1, "mem": "2G"}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as res:
        return json.loads(res.read())


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """MLflow's own tracking server on 127.0.0.1, a SQLite store of its own."""
    root = tmp_path_factory.mktemp("mlflow")
    port = _port()
    proc = subprocess.Popen(
        [str(TOOLS / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", f"sqlite:///{root}/db.sqlite",
         "--default-artifact-root", str(root / "artifacts"), "--workers", "1"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=(root / "log").open("wb"),
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(f"{url}/health", timeout=2).read()
            break
        except OSError:
            assert proc.poll() is None, (root / "log").read_text()[-2000:]
            assert time.monotonic() < deadline, "MLflow's server never answered"
            time.sleep(0.5)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture
def slurm(devcluster: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from tests.integration.clusters import site_cluster

    monkeypatch.setenv("HPCUI_DATA_DIR", str(tmp_path / "data"))  # its own mirrors
    with site_cluster(devcluster, "dev", python=VENV_PYTHON) as c:
        c.relay.interval_s = 1.0  # the tests' pace; the default is INTERVAL_S
        yield c


# -- on the node --------------------------------------------------------------------------


def mlflow_steps(steps: int, sleep: float) -> str:
    """A loop logging to MLflow as a user's does: no tracking URI set by the user."""
    import time

    import mlflow

    mlflow.set_experiment("hpcui-relay")
    with mlflow.start_run(run_name="live") as run:
        mlflow.log_param("lr", 0.1)
        for step in range(steps):
            mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
            time.sleep(sleep)
    return run.info.run_id


def wandb_rows(rows: int, sleep: float) -> str:
    import time

    import wandb

    run = wandb.init(project="hpcui-relay")
    for step in range(rows):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
        time.sleep(sleep)
    run.finish()
    return run.id


def tensorboard_scalars(steps: int, sleep: float) -> int:
    import os
    import time

    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(os.path.join(os.environ["HPCUI_TRACK_DIR"], "tb"), flush_secs=1)
    for step in range(steps):
        writer.add_scalar("loss", 1.0 / (step + 1), step)
        writer.flush()
        time.sleep(sleep)
    writer.close()
    return steps


# -- MLflow ---------------------------------------------------------------------------------


def _server_run(url: str, job: str) -> str | None:
    try:
        got = _get(f"{url}/api/2.0/mlflow/experiments/get-by-name?"
                   + urllib.parse.urlencode({"experiment_name": "hpcui-relay"}))  # fmt: skip
    except urllib.error.HTTPError as exc:
        if exc.code == 404:  # not made yet: the relay has imported nothing so far
            return None
        raise
    body = json.dumps({"experiment_ids": [got["experiment"]["experiment_id"]],
                       "filter": f"tags.`hpcui.job` = '{job}'"}).encode()  # fmt: skip
    req = urllib.request.Request(f"{url}/api/2.0/mlflow/runs/search", data=body,
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    runs = json.loads(urllib.request.urlopen(req, timeout=30).read()).get("runs") or []
    assert len(runs) <= 1, runs  # never a second run for one node run
    return runs[0]["info"]["run_id"] if runs else None


def _points(url: str, run_id: str) -> list[tuple[int, float]]:
    got = _get(f"{url}/api/2.0/mlflow/metrics/get-history?"
               + urllib.parse.urlencode({"run_id": run_id, "metric_key": "loss"}))  # fmt: skip
    return sorted((m["step"], m["value"]) for m in got.get("metrics") or [])


def _cli_env(extra: dict[str, str]) -> dict[str, str]:
    from tests.conftest import ROOT

    keep = ("PATH", "HOME", "HPCUI_CONFIG", "HPCUI_DATA_DIR")
    return {**{k: os.environ[k] for k in keep if k in os.environ}, "PYTHONPATH": str(ROOT),
            "HPCUI_AGENT": "off", **extra}  # fmt: skip


def test_mlflow_gets_the_metrics_while_the_job_runs_and_each_once_after_a_cut(
    slurm: Any, mlflow_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)  # this machine's server
    job = slurm.submit(mlflow_steps, 60, 0.5, track="mlflow", **TINY)
    name = f"dev:{job.job_id}"
    seen: list[int] = []
    deadline = time.monotonic() + WAIT
    while len(seen) < 2:  # twice while it runs, the second time with more steps
        assert time.monotonic() < deadline, f"the server saw {seen} while the job ran"
        run_id = _server_run(mlflow_server, name)
        n = len(_points(mlflow_server, run_id)) if run_id else 0
        if n and (not seen or n > seen[-1]) and job.state.name == "RUNNING":
            seen.append(n)
            if len(seen) == 1:  # the link cut under the relay: its next pass reconnects
                for pid in session_sshd_pids(slurm.run):
                    with contextlib.suppress(ProcessLookupError):  # gone with the first
                        os.kill(pid, signal.SIGKILL)
        time.sleep(1)
    assert 0 < seen[0] < seen[1] < 60
    slurm.relay.stop()  # the relay cut mid-run: this process's relay ends here
    time.sleep(3)  # points written meanwhile wait on the node
    res = subprocess.run(  # a new process picks up where the files here end
        [sys.executable, "-m", "hpcui.cli", "-c", "dev", "track", "run", "--interval", "1"],
        env=_cli_env({"MLFLOW_TRACKING_URI": mlflow_server}), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=WAIT,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert job.result(timeout=60)
    run_id = _server_run(mlflow_server, name)
    assert run_id is not None
    points = _points(mlflow_server, run_id)
    assert points == [(s, 1.0 / (s + 1)) for s in range(60)]  # every point, once
    info = _get(f"{mlflow_server}/api/2.0/mlflow/runs/get?run_id={run_id}")["run"]
    assert info["info"]["status"] == "FINISHED"
    assert {"key": "lr", "value": "0.1"} in info["data"]["params"]
    listed = subprocess.run(
        [sys.executable, "-m", "hpcui.cli", "-c", "dev", "track", "list", "--json"],
        env=_cli_env({}), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    row = next(r for r in json.loads(listed.stdout) if r["job_id"] == job.job_id)
    link = f"{mlflow_server}/#/experiments/{info['info']['experiment_id']}/runs/{run_id}"
    assert row["final"] and row["mlflow"] == [link]
    shown = slurm.view(job.job_id).track  # `hpcui show` and the Job screen say it
    assert shown and shown.startswith("mlflow: ") and f"MLflow {link}" in shown, shown


# -- W&B ------------------------------------------------------------------------------------


def _wandb_records(path: Path) -> dict[str, int]:
    """The records of a W&B transaction log by kind: its LevelDB-style framing (a 7-byte
    `:W&B` header, 32 KiB blocks of checksummed pieces), each record W&B's own protobuf."""
    sys.path.insert(0, str(next((TOOLS.parent / "lib").glob("python3*/site-packages"))))
    try:
        from wandb.proto import wandb_internal_pb2 as pb
    finally:
        sys.path.pop(0)
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, record, kinds = 7, b"", {}
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0 and length == 0:
            pos += left
            continue
        record += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL, LAST
            r = pb.Record()
            r.ParseFromString(record)
            name = r.WhichOneof("record_type") or "?"
            kinds[name] = kinds.get(name, 0) + 1
            record = b""
    return kinds


def test_a_wandb_offline_run_is_uploaded_live_and_mirrored_byte_for_byte(
    slurm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logged in here (a key W&B accepts the form of; its server is a closed port on
    127.0.0.1, so nothing leaves the machine), W&B's own live upload runs while the job
    does and is ended a grace after it; the mirror is W&B's log byte for byte."""
    from hpcui.trackers import relay, wandb_sync

    for key, value in {"WANDB_API_KEY": "x" * 40, "WANDB_BASE_URL": "http://127.0.0.1:9",
                       "WANDB_ERROR_REPORTING": "false", "WANDB_CONFIG_DIR": str(tmp_path / "w"),
                       "PATH": f"{TOOLS}:{os.environ['PATH']}"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(wandb_sync, "GRACE_S", 3.0)
    job = slurm.submit(wandb_rows, 40, 0.5, track="wandb", **TINY)
    local = relay.mirror_dir(slurm, job.job_id)
    deadline = time.monotonic() + WAIT
    while not any(wandb_sync.live(r) for r in wandb_sync.offline_runs(local)):
        assert time.monotonic() < deadline and not job.state.is_final, job.state
        time.sleep(0.5)
    assert not job.state.is_final  # uploading live while the job runs
    run = job.result(timeout=WAIT)
    while slurm.relay.jobs():  # until its pass after the end, and the grace
        assert time.monotonic() < deadline
        time.sleep(1)
    (mirrored,) = wandb_sync.offline_runs(local)
    said = wandb_sync.live_log(mirrored).read_text()
    assert said.splitlines()[0] == " ".join(wandb_sync.live_command(mirrored, str(TOOLS / "wandb")))
    assert "Syncing 1 run(s)" in said and not wandb_sync.live(mirrored), said[-2000:]
    slurm.relay.stop()
    left = subprocess.run(["pgrep", "-f", f"sync --live .*{mirrored}"], capture_output=True)
    assert left.stdout == b"", "W&B's live upload outlived the relay"
    assert mirrored.name.endswith(f"-{run}")
    log = mirrored / f"run-{run}.wandb"
    there = slurm.run(["sh", "-c", f"sha256sum {job.folder}/track/{job.job_id}/wandb/"
                                   f"{mirrored.name}/run-{run}.wandb"]).stdout.split()[0]  # fmt: skip
    import hashlib

    assert hashlib.sha256(log.read_bytes()).hexdigest() == there  # byte for byte
    assert _wandb_records(log).get("history") == 40
    argv = wandb_sync.command([mirrored], str(TOOLS / "wandb"))
    assert argv == [str(TOOLS / "wandb"), "sync", "--skip-synced", str(mirrored)]
    dry = subprocess.run(  # W&B's own CLI reads the mirror; --dry-run uploads nothing
        [*argv, "--dry-run"], capture_output=True, text=True, timeout=120,
        env={**os.environ, "WANDB_BASE_URL": "http://127.0.0.1:9", "WANDB_ERROR_REPORTING": "false"},
    )  # fmt: skip
    assert "Would sync 1 run(s)" in dry.stdout + dry.stderr, dry.stdout + dry.stderr
    shown = slurm.view(job.job_id).track or ""
    assert "(relayed to the end)" in shown and "W&B 0/1 run(s) synced" in shown, shown
    synced = subprocess.run(  # not logged in here: W&B's words, the mirror kept
        [sys.executable, "-m", "hpcui.cli", "-c", "dev", "track", "sync", job.job_id],
        env=_cli_env({"PATH": f"{TOOLS}:{os.environ['PATH']}", "WANDB_BASE_URL":
                      "http://127.0.0.1:9", "WANDB_ERROR_REPORTING": "false",
                      "WANDB_CONFIG_DIR": str(local.parent / "wandb-config")}),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert synced.returncode == 2, synced.stdout + synced.stderr
    assert f"{argv[0]} sync --skip-synced {mirrored}" in synced.stderr, synced.stderr
    assert "W&B said:" in synced.stderr and "No API key configured" in synced.stderr
    assert "stay mirrored" in synced.stderr and "wandb login" in synced.stderr, synced.stderr
    assert hashlib.sha256(log.read_bytes()).hexdigest() == there


# -- TensorBoard ----------------------------------------------------------------------------


def test_tensorboard_on_the_mirror_shows_new_scalars_within_an_interval(slurm: Any) -> None:
    from hpcui.trackers import relay

    job = slurm.submit(tensorboard_scalars, 300, 0.5, track="tensorboard", **TINY)
    while job.state.name != "RUNNING":
        assert not job.state.is_final, job.state
        time.sleep(1)
    slurm.relay.stop()  # the board's own relay feeds it
    board = subprocess.Popen(
        [sys.executable, "-m", "hpcui.cli", "-c", "dev", "tensorboard", "--mirror", job.job_id,
         "--no-browser"],
        env=_cli_env({"PATH": f"{TOOLS}:{os.environ['PATH']}"}), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        url = board.stdout.readline().strip() if board.stdout else ""
        assert url.startswith("http://127.0.0.1:"), board.stderr.read() if board.stderr else ""
        steps: list[int] = []
        deadline = time.monotonic() + 120
        while len(steps) < 2:
            assert time.monotonic() < deadline, steps
            try:
                got = _get(f"{url}data/plugin/scalars/scalars?run=tb&tag=loss")
            except OSError:
                got = []
            n = max((s for _w, s, _v in got), default=-1)
            if n >= 0 and (not steps or n > steps[-1]):
                steps.append(n)
                if len(steps) == 1:
                    first = time.monotonic()
            time.sleep(1)
        assert time.monotonic() - first < relay.INTERVAL_S + 10  # within one interval (+ reload)
        assert not job.state.is_final  # it grew while the job ran
    finally:
        board.terminate()
        board.wait(timeout=30)
    mirror = relay.mirror_dir(slurm, job.job_id)
    time.sleep(1)
    left = subprocess.run(["pgrep", "-f", f"--logdir {mirror} "], capture_output=True, text=True)
    assert left.stdout == "", f"TensorBoard outlived hpcui: {left.stdout}"  # ended with it
    job.cancel()
