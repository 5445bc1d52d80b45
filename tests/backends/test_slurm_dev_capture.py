"""hpcui's own squeue/sacct/sinfo formats, captured verbatim from both dev sites: real Slurm
22.05.8 (Debian 12) and real Slurm 24.11.5 (Debian 13), the same five jobs on each
(scripts/capture_slurm_fixtures.py). The parsers must read both the same way."""

import pytest

from hpcui.backends.slurm.accounting import parse_sacct
from hpcui.backends.slurm.partitions import parse_sinfo
from hpcui.backends.slurm.queue import parse_squeue
from hpcui.backends.states import JobState
from tests.conftest import fixture_text

DIRS = ["slurm-22.05.8-dev", "slurm-24.11.5-dev24"]


def by_name(entries):  # type: ignore[no-untyped-def]
    out: dict = {}
    for e in entries:
        out.setdefault(e.name, []).append(e)
    return out


@pytest.mark.parametrize("d", DIRS)
def test_squeue_running_pending_held_array_and_gpu_jobs(d: str) -> None:
    jobs = by_name(parse_squeue(fixture_text(f"{d}/squeue_hpcui_format.txt")))
    (fail,) = jobs["capture-fail"]
    assert fail.state is JobState.FAILED and fail.reason == "NonZeroExitCode"
    (held,) = jobs["capture-held"]
    assert held.state is JobState.PENDING and held.reason == "JobHeldUser"
    array = {e.job_id.split("_")[1]: e for e in jobs["capture-array"]}
    assert sorted(array) == ["0", "1", "2", "3", "4", "5"]
    assert array["0"].state is JobState.RUNNING
    assert {e.array_job_id for e in array.values()} == {array["0"].job_id.split("_")[0]}
    assert array["5"].reason == "JobArrayTaskLimit" and array["5"].state is JobState.PENDING
    # 22.05 prints the GPU request as "gres:gpu:2", 24.11 as "gres/gpu:2"
    (gpu,) = jobs["capture-gpu"]
    assert gpu.gpus == 2 and gpu.partition == "gpu" and gpu.state is JobState.RUNNING
    (ok,) = jobs["capture-ok"]
    assert ok.comment.startswith("hpcui:") and ok.state is JobState.COMPLETED


@pytest.mark.parametrize("d", DIRS)
def test_sacct_exit_codes_and_pending_array_range(d: str) -> None:
    jobs = by_name(parse_sacct(fixture_text(f"{d}/sacct_hpcui_format.txt")))
    (ok,) = jobs["capture-ok"]
    assert (ok.state, ok.exit_code) == (JobState.COMPLETED, 0)
    (fail,) = jobs["capture-fail"]
    assert (fail.state, fail.exit_code) == (JobState.FAILED, 1)
    ranges = [e for e in jobs["capture-array"] if e.job_id.endswith("%2]")]
    assert len(ranges) == 1 and ranges[0].state is JobState.PENDING, jobs["capture-array"]
    (gpu,) = jobs["capture-gpu"]
    assert gpu.gpus == 2


@pytest.mark.parametrize("d", DIRS)
def test_sinfo_partitions_of_the_dev_nodes(d: str) -> None:
    parts = {p.partition: p for p in parse_sinfo(fixture_text(f"{d}/sinfo_hpcui_format.txt"))}
    assert parts["cpu"].is_default and parts["cpu"].cpus_total == 8 * parts["cpu"].nodes_total
    assert parts["gpu"].gpus_per_node == 4 and parts["gpu"].time_limit_s == 7200
