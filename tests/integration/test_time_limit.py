"""Jobs run to their time limit on the dev cluster's real Slurm.

Every batch script carries `--signal=USR2@N` (the profile's signal_delay, 90 s by default)
and Slurm sends it up to a minute earlier than asked. Stock submitit ended a callable
that cannot checkpoint right there ("timed-out and not checkpointable", FAILED after a
fraction of its limit). Now the signal only turns hpcui.distributed.stop_requested() true:
a job that fits its limit finishes, one that does not is ended by Slurm at the limit
(TIMEOUT), and the client says so in words.
"""

from __future__ import annotations

import pytest

from hpcui.backends.states import JobState
from hpcui.errors import JobLostError, JobTimeLimitError
from tests.integration.test_waiting_job_show import cli, fields

pytestmark = pytest.mark.devcluster


def works_for(seconds: float) -> dict:
    """Works `seconds`, noting when stop_requested() turned true (and ignoring it); its
    progress goes to `progress` in its job folder, where a killed job leaves it."""
    import os
    import time as _t

    from hpcui import distributed as hd

    folder = os.environ["HPCUI_JOB_FOLDER"]
    start, noticed = _t.monotonic(), None
    while (ran := _t.monotonic() - start) < seconds:
        if noticed is None and hd.stop_requested():
            noticed = ran
        with open(os.path.join(folder, "progress.tmp"), "w") as fh:
            fh.write(f"{ran:.1f} {'-' if noticed is None else f'{noticed:.1f}'}\n")
        os.replace(os.path.join(folder, "progress.tmp"), os.path.join(folder, "progress"))
        _t.sleep(0.5)
    return {"ran_s": _t.monotonic() - start, "noticed_s": noticed}


def _sacct(dev, job_id: str) -> tuple[str, int]:
    out = dev.run(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State,ElapsedRaw"]).stdout
    state, elapsed = out.strip().splitlines()[0].split("|")
    return state, int(elapsed)


@pytest.mark.timeout(330)
def test_a_150_s_callable_under_a_3_minute_limit_completes(dev):
    job = dev.submit(works_for, 150, time="3m", cpus_per_task=1, mem="500M", name="to-limit")
    value = job.result(timeout=300)
    assert value["ran_s"] >= 150
    # USR2@90 under a 3-minute limit: from 30 s to 90 s in (Slurm's minute of slack); the
    # job saw it and went on to its own end
    assert value["noticed_s"] is not None and value["noticed_s"] < 150, value
    state, elapsed = _sacct(dev, job.job_id)
    assert state == "COMPLETED" and elapsed >= 150, (state, elapsed)


@pytest.mark.timeout(240)
def test_a_callable_that_overruns_ends_timeout_at_the_limit_and_says_so(dev):
    job = dev.submit(
        works_for, 600, time="1m", signal_delay=20, cpus_per_task=1, mem="500M", name="overrun"
    )
    with pytest.raises(JobTimeLimitError) as err:  # catchable as its own kind (issue 49)
        job.result(timeout=200)
    assert isinstance(err.value, JobLostError)  # and still under the old base
    message = str(err.value)
    assert "ran out of its time limit (1:00)" in message, message
    assert "ask for more with time=" in message and "stop_requested()" in message
    state, elapsed = _sacct(dev, job.job_id)
    assert state == "TIMEOUT", state
    assert elapsed >= 55, elapsed  # at the limit, not at the signal
    ran, noticed = dev.run(["cat", f"{job.folder}/progress"]).stdout.split()
    assert noticed != "-" and float(noticed) < float(ran), (ran, noticed)
    stderr = job.stderr(0)
    assert "Bypassing signal" not in stderr, stderr  # submitit's warning, now hpcui's words
    assert "the job's time limit is near (20 to 80 s left" in stderr, stderr
    shown = fields(cli("-c", "dev", "show", job.job_id).stdout)
    assert shown["exit code"] == "none: ended by the scheduler (its time limit)", shown


@pytest.mark.timeout(300)
def test_the_early_signal_stops_ddp_ranks_together_under_srun_and_under_torchrun(torch_cluster):
    """Slurm's USR2 reaches every process of the step: each rank's runner notes it, rank
    0's stop_requested() broadcast makes all ranks leave the loop at the same step. Under
    torchrun the agent used to die of it (USR2's default action), taking the job down."""
    import time

    from tests.integration.ranks import loop_until_stopped

    small = {"time": "5m", "cpus_per_task": 1, "mem": "2G"}
    jobs = {
        "srun": torch_cluster.submit(loop_until_stopped, 1500, gpus=2, name="sig-srun", **small),
        "torchrun": torch_cluster.submit(
            loop_until_stopped, 1500, gpus=2, launcher="torchrun", name="sig-trun", **small
        ),
    }
    for name, job in jobs.items():
        deadline = time.monotonic() + 200
        while "looping" not in job.stdout(0):
            assert time.monotonic() < deadline, f"{name} never started looping"
            assert not job.state.is_final, f"{name} ended early: {job.stderr(0)}"
            time.sleep(0.5)
        # what Slurm's --signal=USR2@N does at the time: signal the processes of the steps
        torch_cluster.run(["scancel", "--signal=USR2", job.job_id]).check("scancel")
    for name, job in jobs.items():
        results = job.results(timeout=120)
        assert all(r["stopped"] for r in results), (name, results)
        assert len({r["step"] for r in results}) == 1, (name, results)  # the same step
        assert "the job's time limit is near" in job.stderr(0), name
        assert job.state is JobState.COMPLETED, (name, job.state, job.stderr(0)[-2000:])
