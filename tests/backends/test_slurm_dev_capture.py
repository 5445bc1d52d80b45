"""hpcui's own squeue/sacct/sinfo formats, captured verbatim from real Slurm 22.05.8."""

from hpcui.backends.slurm_queue import parse_sacct, parse_sinfo, parse_squeue
from hpcui.backends.states import JobState
from tests.conftest import fixture_text

DIR = "slurm-22.05.8-dev"


def test_squeue_running_pending_held_array_and_gpu_jobs():
    jobs = {e.job_id: e for e in parse_squeue(fixture_text(f"{DIR}/squeue_hpcui_format.txt"))}
    assert jobs["3069"].state is JobState.FAILED and jobs["3069"].reason == "NonZeroExitCode"
    assert jobs["3072"].state is JobState.PENDING and jobs["3072"].reason == "JobHeldUser"
    assert jobs["3071_0"].state is JobState.RUNNING and jobs["3071_0"].array_job_id == "3071"
    assert jobs["3071_5"].reason == "JobArrayTaskLimit"
    assert jobs["3070"].gpus == 2 and jobs["3070"].partition == "gpu"
    assert jobs["3068"].comment.startswith("hpcui:")


def test_sacct_exit_codes_and_pending_array_range():
    jobs = {e.job_id: e for e in parse_sacct(fixture_text(f"{DIR}/sacct_hpcui_format.txt"))}
    assert (jobs["3068"].state, jobs["3068"].exit_code) == (JobState.COMPLETED, 0)
    assert (jobs["3069"].state, jobs["3069"].exit_code) == (JobState.FAILED, 1)
    assert jobs["3071_[2-5%2]"].state is JobState.PENDING


def test_sinfo_partitions_of_the_dev_node():
    parts = {p.partition: p for p in parse_sinfo(fixture_text(f"{DIR}/sinfo_hpcui_format.txt"))}
    assert parts["cpu"].is_default and parts["cpu"].cpus_total == 8
    assert parts["gpu"].gpus_per_node == 4 and parts["gpu"].time_limit_s == 7200
