"""Preemption on the dev cluster's real Slurm: submitit's Checkpointable checkpoints and requeues.

Slurm warns a job before its time limit (or a preemption) with the `--signal=USR2@90` of
hpcui's batch script; the test sends that USR2 itself, the way Slurm does (to the job
steps, not to the batch shell). submitit's handler in the srun task calls checkpoint(),
dumps the new state over `<id>_submitted.pkl` and runs `scontrol requeue`; the job must
come back, resume from that state and finish, while hpcui's status service follows it
through REQUEUED/PENDING without taking it for ended.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from submitit.helpers import Checkpointable

from hpcui.backends.states import JobState

pytestmark = pytest.mark.devcluster

TOTAL = 40  # steps of STEP_S: one uninterrupted run takes ~10 s; the test ~2.5 min in all
STEP_S = 0.25
WAIT = 180


class Counter(Checkpointable):
    """Counts steps; its own state (pickled again by checkpoint()) is the progress."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.starts: list[str] = []  # SLURM_RESTART_COUNT of each start
        self.checkpoints = 0

    def __call__(self, total: int) -> dict[str, Any]:
        import os
        import time as _t

        folder = os.environ["HPCUI_JOB_FOLDER"]
        self.starts.append(os.environ.get("SLURM_RESTART_COUNT", "0"))
        print(f"start {len(self.starts)} at step {len(self.steps)}", flush=True)
        for i in range(len(self.steps), total):
            _t.sleep(STEP_S)
            self.steps.append(i)
            with open(f"{folder}/progress.tmp", "w") as fh:
                fh.write(f"{len(self.starts)} {len(self.steps)}\n")
            os.replace(f"{folder}/progress.tmp", f"{folder}/progress")
        return {"starts": self.starts, "steps": self.steps, "checkpoints": self.checkpoints}

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        self.checkpoints += 1
        print(f"checkpoint at step {len(self.steps)}", flush=True)
        return super().checkpoint(*args, **kwargs)


def _progress(cluster, folder: str) -> tuple[int, int]:
    out = cluster.run(["cat", f"{folder}/progress"]).stdout.split()
    return (int(out[0]), int(out[1])) if len(out) == 2 else (0, 0)


def test_checkpointable_is_requeued_and_resumes(dev):
    job = dev.submit(Counter(), TOTAL, time="5m", cpus_per_task=1, mem="1G", name="requeue")
    seen: list[JobState] = []
    done = threading.Event()

    def record() -> None:  # the status service's own view, polled fast
        while not done.is_set():
            dev.status.poll_once()
            status = dev.status.get(job.job_id)
            if status is not None and (not seen or seen[-1] is not status.state):
                seen.append(status.state)
            done.wait(0.3)

    recorder = threading.Thread(target=record, daemon=True)
    recorder.start()
    try:
        deadline = time.monotonic() + WAIT
        while _progress(dev, job.folder)[1] < 8:  # running, and some steps done
            assert time.monotonic() < deadline, f"job never made progress; states {seen}"
            assert not job.state.is_final, f"ended early: {job.state}\n{job.stderr()}"
            time.sleep(0.5)
        # What Slurm does at --signal=USR2@90: signal the job steps (srun forwards it to
        # the tasks). `--full`/`--batch` would also signal the batch shell.
        dev.run(["scancel", "--signal=USR2", job.job_id]).check("scancel --signal=USR2")
        # Slurm holds the requeued job back for its credential lifetime (cred_expire, 120 s
        # by default): `StartTime=now` makes it fail with "Job credential revoked".
        result = job.result(timeout=WAIT)  # must not raise JobLostError while requeued
    finally:
        done.set()
        recorder.join(timeout=10)
    # result() may return on the service's own poll (a pushed end) between two of the
    # recorder's looks: its last view counts too
    last = dev.status.get(job.job_id)
    if last is not None and (not seen or seen[-1] is not last.state):
        seen.append(last.state)

    diag = f"states {seen}\nstdout:\n{job.stdout()}\nstderr:\n{job.stderr()[-3000:]}"
    assert result["steps"] == list(range(TOTAL)), diag  # every step once: resumed, not redone
    assert len(result["starts"]) == 2, diag
    assert result["starts"][1] != "0", diag  # the second start is Slurm's restart
    assert result["checkpoints"] == 1, diag
    assert job.state is JobState.COMPLETED
    # Slurm's own record: restarted once (kept by scontrol for MinJobAge=600 s)
    shown = dev.run(["scontrol", "show", "job", "-o", job.job_id]).check().stdout
    assert "Restarts=1" in shown, shown
    # The status service never called it ended while it was requeued. Where it saw the way
    # back (REQUEUED, or a second PENDING), it saw it run again after. With two nodes the
    # requeued job may start again on the other node within one poll: then it saw nothing.
    requeued = [i for i, s in enumerate(seen) if s is JobState.REQUEUED]
    pendings = [i for i, s in enumerate(seen) if s is JobState.PENDING]
    if requeued or len(pendings) >= 2:
        back = (requeued or pendings[1:])[-1]
        assert JobState.RUNNING in seen[back:], diag
    assert seen[-1] is JobState.COMPLETED, diag
    assert not any(s.is_final for s in seen[:-1]), diag
    # One log across both runs (--open-mode=append): the first run's lines are kept.
    out = job.stdout()
    assert "start 1 at step 0" in out and "start 2 at step" in out, diag
