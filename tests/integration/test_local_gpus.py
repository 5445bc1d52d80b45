"""The embedded `local` cluster without Slurm on a workstation: ranks, GPUs handed out one
job at a time, waiting jobs, cancel while waiting, and CPU ranks with gloo.

Real processes and real torch (CPU, gloo). This machine has no GPU: the GPU tests put the
STAND-IN `tests/stand_ins/nvidia-smi` on PATH, which replays what nvidia-smi 580 printed on
one H100 (tests/fixtures/nvidia-smi-580-h100/); the jobs then get that GPU's UUID in
CUDA_VISIBLE_DEVICES exactly as on the real machine (they do not touch CUDA).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hpcui.backends.states import JobState
from hpcui.clusters.cluster import Cluster
from hpcui.config import ClusterConfig
from hpcui.errors import JobCancelledError, UsageError
from hpcui.profiles import local_machine

STAND_INS = Path(__file__).parent.parent / "stand_ins"
H100_UUID = "GPU-9a2b51ca-4649-b4d6-4420-1e97534c61e6"


def until(check: Callable[[], bool], timeout: float = 60.0, what: str = "") -> None:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            pytest.fail(f"not within {timeout} s: {what}")
        time.sleep(0.2)


def wait_for(path: str, limit: float = 120.0) -> None:
    end = time.monotonic() + limit
    while not os.path.exists(path):
        if time.monotonic() > end:
            raise TimeoutError(path)
        time.sleep(0.1)


def visible_gpus() -> str | None:
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def hold_gpu(gate: str, up: str | None = None) -> str | None:
    if up:  # the python rank runs (RUNNING comes with the launcher, before it)
        Path(up).touch()
    wait_for(gate)
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def meet(me: str, other: str) -> float:
    Path(me).touch()
    wait_for(other, 60)
    return time.time()


def rank_sum() -> tuple[int, int, int, str, str, str | None]:
    import torch
    import torch.distributed as dist

    from hpcui import distributed as hd

    local_rank, rank, world, _device = hd.setup()
    t = torch.tensor([rank + 1])
    dist.all_reduce(t)
    out = (
        rank,
        local_rank,
        world,
        int(t.item()),
        dist.get_backend(),
        os.environ.get("OMP_NUM_THREADS"),
    )
    hd.cleanup()
    return out


def _cluster(tmp_path: Path) -> Iterator[Cluster]:
    local_machine.this_machine.cache_clear()
    cfg = ClusterConfig(name="ws", scheduler="local", remote_base=str(tmp_path / "base"))
    try:
        with Cluster(cfg) as c:
            yield c
    finally:
        local_machine.this_machine.cache_clear()


@pytest.fixture
def cpu_box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    """This machine as it is: no GPU tool on PATH."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert local_machine.detect().gpus == (), "this test expects a machine without GPUs"
    yield from _cluster(tmp_path)


@pytest.fixture
def h100_box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    """The stand-in nvidia-smi (one H100, replayed) first on PATH."""
    monkeypatch.setenv("PATH", f"{STAND_INS}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    yield from _cluster(tmp_path)


def test_gpus_on_a_cpu_machine_are_refused_before_anything_runs(cpu_box):
    before = len(cpu_box.registry.list(cpu_box.name))
    with pytest.raises(
        UsageError, match=r"This machine has no GPU hpcui can use \(nvidia-smi not found"
    ):
        cpu_box.submit(visible_gpus, gpus=1)
    assert len(cpu_box.registry.list(cpu_box.name)) == before
    assert cpu_box.profile.gpus_per_node == 0
    assert cpu_box.profile.cores_per_node == len(os.sched_getaffinity(0))


def test_four_cpu_ranks_with_gloo(cpu_box):
    job = cpu_box.submit(rank_sum, tasks_per_node=4, cpus_per_task=1, time="5m")
    results = sorted(job.results(timeout=180))
    assert [r[0] for r in results] == [0, 1, 2, 3] and [r[1] for r in results] == [0, 1, 2, 3]
    assert {r[2] for r in results} == {4} and {r[3] for r in results} == {1 + 2 + 3 + 4}
    assert {r[4] for r in results} == {"gloo"} and {r[5] for r in results} == {"1"}


def test_two_local_jobs_run_at_the_same_time(cpu_box, tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    j1 = cpu_box.submit(meet, a, b)
    j2 = cpu_box.submit(meet, b, a)
    # each returns only once the other has started: both ran at once
    t1, t2 = j1.result(timeout=120), j2.result(timeout=120)
    assert abs(t1 - t2) < 60


def gone(pid: int) -> bool:
    """The process ended (killed, perhaps not reaped yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def pid_then_sleep(path: str) -> None:
    Path(path).write_text(str(os.getpid()))
    time.sleep(300)


def test_cancel_ends_the_ranks_not_just_the_launcher(cpu_box, tmp_path):
    # before: `kill -- -PGID` under dash failed and only the launcher died; ranks ran on
    marks = [str(tmp_path / f"rank{i}") for i in range(2)]
    jobs = [cpu_box.submit(pid_then_sleep, m) for m in marks]
    until(lambda: all(os.path.exists(m) and Path(m).read_text() for m in marks), what="ranks run")
    pids = [int(Path(m).read_text()) for m in marks]
    for job in jobs:
        job.cancel()

    until(lambda: all(gone(p) for p in pids), timeout=30, what="the ranks are killed")
    assert all(j.wait(timeout=30) is JobState.CANCELLED for j in jobs)


def test_a_job_without_gpus_sees_none(h100_box):
    assert h100_box.submit(visible_gpus).result(timeout=60) == ""


def test_gpu_jobs_wait_their_turn_and_cancel_works_while_waiting(h100_box, tmp_path):
    assert h100_box.profile.gpus_per_node == 1
    assert h100_box.profile.gpu_model == "NVIDIA H100 80GB HBM3"
    with pytest.raises(UsageError, match=r"this one machine \(1 GPU\(s\)\)"):
        h100_box.submit(visible_gpus, gpus=2)  # more than the machine has: refused now

    gate = str(tmp_path / "gate")
    first = h100_box.submit(hold_gpu, gate, gpus=1)
    until(lambda: first.state is JobState.RUNNING, what="the first GPU job runs")
    second = h100_box.submit(visible_gpus, gpus=1)
    third = h100_box.submit(visible_gpus, gpus=1)
    # PENDING is also what a just-submitted job reads as: wait for the launcher's reason
    until(lambda: second.reason.startswith("Resources"), what="second waits for the GPU")
    assert second.state is JobState.PENDING
    assert (
        second.reason
        == f"Resources: waiting for 1 GPU(s); 0 of 1 free (held by job(s) {first.job_id})"
    )
    until(
        lambda: third.reason.startswith("Priority: 1 job(s) ahead"), what="third is behind second"
    )

    third.cancel()  # while it waits
    assert third.wait(timeout=30) is JobState.CANCELLED
    with pytest.raises(JobCancelledError):
        third.result()

    assert second.state is JobState.PENDING  # still waiting: the GPU is held
    Path(gate).touch()
    assert first.result(timeout=60) == H100_UUID
    assert second.result(timeout=60) == H100_UUID  # it started once the GPU was free
    base = tmp_path / "base"
    until(
        lambda: not any(base.rglob("gpus/held/*")),
        what=f"every GPU is handed back: {[(p.name, p.read_text()) for p in base.rglob('gpus/held/*')]} {first.job_id} {second.job_id} {third.job_id} "
        + subprocess.run(
            "ps -eo pid,pgid,stat,cmd | grep -v grep | grep -E 'signed|gpu_slots|bash'",
            shell=True,
            capture_output=True,
            text=True,
        ).stdout,
    )


def test_cancelling_a_gpu_holder_frees_its_gpu(h100_box, tmp_path):
    holder = h100_box.submit(hold_gpu, str(tmp_path / "never"), gpus=1)
    until(lambda: holder.state is JobState.RUNNING, what="the holder runs")
    waiter = h100_box.submit(visible_gpus, gpus=1)
    until(lambda: waiter.reason.startswith("Resources"), what="the waiter waits")
    holder.cancel()
    assert waiter.result(timeout=60) == H100_UUID


def test_clusters_works_on_a_fresh_home(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HPCUI_", "XDG_"))}
    env["HOME"] = str(tmp_path)
    res = subprocess.run(
        [sys.executable, "-m", "hpcui.cli", "clusters"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[1].split() == ["*", "local", "(this", "machine)", "local"]
    assert not (tmp_path / ".config" / "hpcui" / "config.toml").exists()  # nothing written


def test_usage_of_a_local_gpu_job(h100_box, tmp_path, monkeypatch):
    monkeypatch.setenv("HPCUI_STANDIN_GPU_STATE", "busy")  # the stand-in replays the busy capture
    gate = str(tmp_path / "gate")
    ups = [str(tmp_path / "up-gpu"), str(tmp_path / "up-plain")]
    job = h100_box.submit(hold_gpu, gate, ups[0], gpus=1)
    plain = h100_box.submit(hold_gpu, gate, ups[1])
    try:
        until(lambda: all(os.path.exists(u) for u in ups), what="both ranks run")
        s = job.usage()
        assert [(g.index, g.util_pct, g.mem_used_mib) for g in s.gpus] == [(0, 100, 6735)]
        [ranks] = s.tasks
        assert ranks.ntasks == 1 and ranks.rss_mb and ranks.rss_mb > 10  # the python rank
        assert plain.usage().gpus == []  # the machine's GPU is not that job's
    finally:
        Path(gate).touch()
    job.result(timeout=60)
    assert job.usage_report().samples == 1


def gpu_then_sleep(mark: str) -> None:
    """Records its pid and GPU, then runs on (a rank its launcher no longer watches)."""
    Path(mark).write_text(f"{os.getpid()} {os.environ.get('CUDA_VISIBLE_DEVICES')}")
    time.sleep(300)


def test_a_sigkilled_launchers_ranks_keep_their_gpu_until_cancelled(h100_box, tmp_path):
    """The launcher SIGKILLed (an OOM killer, a stray `kill -9`): its rank ran on with the
    GPU while the job read FAILED, `cancel` signalled nothing, and the GPU went to the
    next job. Now the job reads RUNNING while its ranks run, `cancel` ends them, and the
    GPU is given on only once they are gone."""
    mark = tmp_path / "rank"
    holder = h100_box.submit(gpu_then_sleep, str(mark), gpus=1)
    until(lambda: mark.exists() and mark.read_text(), what="the rank runs")
    rank_pid = int(mark.read_text().split()[0])
    os.kill(int(holder.job_id), 9)  # the job id is the launcher's pid
    time.sleep(1.0)
    assert holder.state is JobState.RUNNING, (holder.state, holder.reason)
    raw = h100_box.scheduler.status([holder.job_id])[holder.job_id].state_raw
    assert "launcher was killed" in raw, raw
    waiter = h100_box.submit(visible_gpus, gpus=1)
    until(lambda: waiter.reason.startswith("Resources"), what="the waiter waits")
    time.sleep(2.0)  # several looks of gpu_slots: the orphan still holds the GPU
    assert waiter.state is JobState.PENDING
    holder.cancel()

    until(lambda: gone(rank_pid), timeout=30, what="cancel ended the orphaned rank")
    # ended (under a loaded suite a poll can read it FAILED as its rank dies: noted)
    assert holder.wait(timeout=30) in (JobState.CANCELLED, JobState.FAILED)
    assert waiter.result(timeout=60) == H100_UUID  # the GPU, once the orphan was gone
