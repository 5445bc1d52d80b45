"""The local cluster's GPU hand-out (hpcui.node.gpu_slots): disjoint, first come first
served, freed by a job's end or death. Real files, real flock, real processes."""

import os
import subprocess
import sys
import threading

import pytest

from hpcui.node import gpu_slots
from hpcui.node.gpu_slots import release, try_acquire

IDS = ["GPU-a", "GPU-b", "GPU-c", "GPU-d"]
ME = os.getpid()


def dead_pid() -> int:
    p = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(p.stdout)


def reason(state, job):
    return (state / f"{job}.wait").read_text().strip()


def test_jobs_get_disjoint_gpus(tmp_path):
    a = try_acquire(tmp_path, "10", ME, 2, IDS)
    b = try_acquire(tmp_path, "11", ME, 2, IDS)
    assert a == ["GPU-a", "GPU-b"] and b == ["GPU-c", "GPU-d"]
    assert try_acquire(tmp_path, "10", ME, 2, IDS) == a  # asked again: the same ones
    assert not (tmp_path / "10.wait").exists()


def test_first_come_first_served(tmp_path):
    assert try_acquire(tmp_path, "1", ME, 3, IDS) == IDS[:3]
    assert try_acquire(tmp_path, "2", ME, 2, IDS) is None
    assert (
        reason(tmp_path, "2") == "Resources: waiting for 2 GPU(s); 1 of 4 free (held by job(s) 1)"
    )
    # one GPU is free, but job 2 came first: job 3 waits behind it (no overtaking)
    assert try_acquire(tmp_path, "3", ME, 1, IDS) is None
    assert reason(tmp_path, "3").startswith(
        "Priority: 1 job(s) ahead of it for GPUs (first come, first served; next: 2)"
    )
    release(tmp_path, "1")
    assert try_acquire(tmp_path, "3", ME, 1, IDS) is None  # still behind 2
    assert try_acquire(tmp_path, "2", ME, 2, IDS) == ["GPU-a", "GPU-b"]
    assert try_acquire(tmp_path, "3", ME, 1, IDS) == ["GPU-c"]


def test_a_dead_or_ended_holder_frees_its_gpus(tmp_path):
    assert try_acquire(tmp_path, "1", dead_pid(), 4, IDS) == IDS  # its launcher is gone
    assert try_acquire(tmp_path, "2", ME, 4, IDS) == IDS
    (tmp_path / "2.rc").write_text("CANCELLED\n")  # cancelled: an outcome, GPUs free
    assert try_acquire(tmp_path, "3", ME, 1, IDS) == ["GPU-a"]


def test_the_line_is_in_ticket_order_not_arrival_order(tmp_path):
    assert try_acquire(tmp_path, "1", ME, 4, IDS) == IDS
    assert try_acquire(tmp_path, "3", ME, 1, IDS, ticket=300) is None  # started first...
    assert try_acquire(tmp_path, "2", ME, 1, IDS, ticket=200) is None  # ...submitted earlier
    release(tmp_path, "1")
    assert try_acquire(tmp_path, "3", ME, 1, IDS, ticket=300) is None
    assert reason(tmp_path, "3").endswith("next: 2)")
    assert try_acquire(tmp_path, "2", ME, 1, IDS, ticket=200) == ["GPU-a"]


def test_a_cancelled_waiter_does_not_block_the_line(tmp_path):
    assert try_acquire(tmp_path, "1", ME, 4, IDS) == IDS
    assert try_acquire(tmp_path, "2", ME, 1, IDS) is None
    assert try_acquire(tmp_path, "3", ME, 1, IDS) is None
    (tmp_path / "2.rc").write_text("CANCELLED\n")
    release(tmp_path, "1")
    assert try_acquire(tmp_path, "3", ME, 1, IDS) == ["GPU-a"]


def test_concurrent_acquirers_never_share(tmp_path):
    got: dict[str, list[str]] = {}

    def take(job):
        got[job] = gpu_slots.acquire(tmp_path, job, ME, 1, IDS)

    threads = [threading.Thread(target=take, args=(str(j),)) for j in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(g for v in got.values() for g in v) == IDS


def test_waiting_ends_when_gpus_free_up(tmp_path):
    assert try_acquire(tmp_path, "1", ME, 4, IDS) == IDS
    cmd = [
        sys.executable,
        "-m",
        "hpcui.node.gpu_slots",
        "acquire",
        str(tmp_path),
        "2",
        str(ME),
        "2",
        ",".join(IDS),
        "0",
    ]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(100):  # bounded: 10 s
            if (tmp_path / "2.wait").exists():
                break
            threading.Event().wait(0.1)
        assert reason(tmp_path, "2").startswith("Resources: waiting for 2 GPU(s); 0 of 4 free")
        assert p.poll() is None
        release(tmp_path, "1")
        out, _ = p.communicate(timeout=20)
    finally:
        p.kill()
    assert out.strip() == "GPU-a,GPU-b" and p.returncode == 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["acquire", "S", "1", "1", "5", "a,b", "7"], "asks for 5 GPU(s) and this machine has 2"),
        (["acquire", "S", "1", "1", "1", "a,b", "soon"], "usage: gpu_slots"),
        (["acquire", "S", "1"], "usage: gpu_slots"),
        (["take", "S", "1", "1", "1", "a"], "usage: gpu_slots"),
    ],
)
def test_impossible_or_malformed_requests_exit_2(argv, message, capsys):
    assert gpu_slots.main(argv) == 2
    assert message in capsys.readouterr().err
