"""The early time-limit signal in the real runner (`python -m hpcui.node.signed`).

Each test runs the runner as the node does: a job folder with a submitit pickle, submitit's
local job environment, a real process that gets a real USR2 (sent by the test, as Slurm's
`--signal` does, or by the runner's own timer, as on PBS). Stock submitit ends a callable
that cannot checkpoint on that signal ("timed-out and not checkpointable"); hpcui lets it
run on with stop_requested() true. A Checkpointable keeps submitit's checkpoint.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import cloudpickle
import pytest
from submitit.core.utils import DelayedSubmission
from submitit.helpers import Checkpointable

from hpcui.backends.job_paths import split_signature

ROOT = Path(__file__).resolve().parents[2]
JOB = "77"


def runs_to_the_end(folder: str) -> dict:
    """Waits for the limit to be near, then works 1 s more and says what it saw."""
    import os as _os
    import time as _t

    from hpcui import distributed as hd

    seen: list[str] = []
    hd.at_time_limit(lambda: seen.append("callback"))
    open(_os.path.join(folder, "started"), "w").close()
    start = _t.monotonic()
    while not hd.stop_requested():
        if _t.monotonic() - start > 30:
            return {"stop_requested": False}
        _t.sleep(0.05)
    noticed = _t.monotonic() - start
    _t.sleep(1.0)  # still alive after the signal: it was not the end
    return {"stop_requested": True, "after_s": noticed, "seen": seen}


class Counter(Checkpointable):
    def __init__(self) -> None:
        self.checkpoints = 0

    def __call__(self, folder: str) -> str:
        import os as _os
        import time as _t

        open(_os.path.join(folder, "started"), "w").close()
        _t.sleep(30)
        return "never"

    def checkpoint(self, *args, **kwargs):
        self.checkpoints += 1
        return super().checkpoint(*args, **kwargs)


def _start(tmp_path: Path, fn, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    folder = tmp_path / "job"
    folder.mkdir()
    delayed = DelayedSubmission(fn, str(folder))
    delayed.set_timeout(3, 3)  # a 3-minute job: submitit calls any signal there "timed out"
    with open(folder / f"{JOB}_submitted.pkl", "wb") as fh:
        cloudpickle.dump(delayed, fh)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SUBMITIT_EXECUTOR": "local",
        "SUBMITIT_LOCAL_JOB_ID": JOB,
        "SUBMITIT_LOCAL_NTASKS": "1",
        "SUBMITIT_LOCAL_LOCALID": "0",
        "SUBMITIT_LOCAL_GLOBALID": "0",
        "SUBMITIT_LOCAL_JOB_NUM_NODES": "1",
        "SUBMITIT_LOCAL_NODEID": "0",
        **(extra_env or {}),
    }
    return subprocess.Popen(
        [sys.executable, "-u", "-m", "hpcui.node.signed", str(folder)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_started(tmp_path: Path) -> None:
    deadline = time.monotonic() + 30
    while not (tmp_path / "job" / "started").exists():
        assert time.monotonic() < deadline, "the callable never started"
        time.sleep(0.05)


def _result(tmp_path: Path):
    data = (tmp_path / "job" / f"{JOB}_0_result.pkl").read_bytes()
    return pickle.loads(split_signature(data)[0])


@pytest.mark.timeout(60)
def test_a_callable_that_cannot_checkpoint_runs_on_after_the_signal(tmp_path):
    proc = _start(tmp_path, runs_to_the_end)
    _wait_started(tmp_path)
    proc.send_signal(signal.SIGUSR2)  # what Slurm's --signal=USR2@90 delivers
    _, err = proc.communicate(timeout=40)
    assert proc.returncode == 0, err
    kind, value = _result(tmp_path)
    assert kind == "success", value  # stock submitit: "timed-out and not checkpointable"
    assert value["stop_requested"] is True and value["seen"] == ["callback"]
    assert "the job's time limit is near" in err
    assert "stop_requested() is true" in err


@pytest.mark.timeout(60)
def test_on_pbs_the_runner_sends_the_signal_itself_at_walltime_minus_delay(tmp_path):
    env = {
        "HPCUI_TIME_LIMIT_S": "4",
        "HPCUI_SIGNAL_DELAY_S": "2",
        "HPCUI_JOB_START": str(time.time()),
    }
    proc = _start(tmp_path, runs_to_the_end, env)
    _, err = proc.communicate(timeout=40)
    assert proc.returncode == 0, err
    kind, value = _result(tmp_path)
    assert kind == "success", value
    assert value["stop_requested"] is True
    # 4 s limit - 2 s delay = 2 s after the start (the callable starts a little later)
    assert 0.5 < value["after_s"] < 3.0, value


@pytest.mark.timeout(60)
def test_a_checkpointable_still_checkpoints_on_the_signal(tmp_path):
    proc = _start(tmp_path, Counter())
    _wait_started(tmp_path)
    proc.send_signal(signal.SIGUSR2)
    _, err = proc.communicate(timeout=40)
    # submitit's checkpoint-and-requeue: the checkpointed call replaces the pickle and the
    # task exits for the scheduler to start it again (the local environment cannot requeue)
    assert proc.returncode != 0, err
    with open(tmp_path / "job" / f"{JOB}_submitted.pkl", "rb") as fh:
        again = pickle.load(fh)
    assert again.function.checkpoints == 1
    assert not (tmp_path / "job" / f"{JOB}_0_result.pkl").exists()


def test_the_near_limit_note_states_the_real_window():
    from hpcui.node.time_limit import left_window

    # Slurm: asked 30 s before, may come a minute sooner; PBS: hpcui's own timer, exact
    assert left_window({"HPCUI_SIGNAL_DELAY_S": "30"}).startswith("30 to 90 s left")
    pbs = {"HPCUI_SIGNAL_DELAY_S": "30", "HPCUI_TIME_LIMIT_S": "120"}
    assert left_window(pbs) == "30 s left"


def test_sigterm_and_sigcont_are_said_in_hpcuis_words_not_bypassing(capsys):
    import signal

    from hpcui.node import time_limit

    time_limit._ending.clear()
    time_limit.note_ending(signal.SIGCONT)
    assert capsys.readouterr().err == ""
    time_limit.note_ending(signal.SIGTERM)
    time_limit.note_ending(signal.SIGTERM)
    err = capsys.readouterr().err
    assert err.count("the scheduler is ending the job") == 1 and "Bypassing" not in err
