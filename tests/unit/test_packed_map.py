"""Many small calls as few array tasks (issue 59, item 3): how calls are packed per task
and arrays split at the site's limit (hpcui.submission.arrays), the node-side runner that
keeps a failing call to itself (hpcui.node.packed), the limits as each scheduler prints
them (real captures), and the handles a packed map returns."""

from __future__ import annotations

import pickle

import cloudpickle
import pytest

from hpcui.backends import array_limits
from hpcui.errors import JobFailedError, UsageError
from hpcui.jobs.packed import CallList
from hpcui.node.packed import Packed
from hpcui.submission.arrays import MIN_TASKS, ArrayLimit, packed_calls, plan_arrays
from hpcui.submission.frameworks import code_text
from tests.conftest import fixture_text


class Site:
    """A scheduler's MaxArraySize, counting how often it was asked (a round trip each)."""

    def __init__(self, value: int | None) -> None:
        self.value, self.asked = value, 0

    def max_array_size(self) -> int | None:
        self.asked += 1
        return self.value


class Limit(ArrayLimit):
    """hpcui's own ArrayLimit over a Site, with no profile value unless given."""

    def __init__(self, value: int | None, profile: int | None = None) -> None:
        self.site = Site(value)
        super().__init__(lambda: profile, self.site)  # type: ignore[arg-type]

    @property
    def asked(self) -> int:
        return self.site.asked


def test_ten_thousand_ten_ms_calls_pack_into_a_few_tasks_without_asking_the_limit():
    limit = Limit(1001)
    shape = plan_arrays(10_000, call_s=0.01, limit=limit)
    assert shape.calls_per_task == 10_000 // MIN_TASKS
    assert shape.tasks == MIN_TASKS and len(shape.arrays) == 1
    assert limit.asked == 0  # 16 tasks: no site sets a lower limit


def test_long_calls_are_not_packed_past_the_task_target():
    shape = plan_arrays(200, call_s=30.0, limit=Limit(None))
    assert shape.calls_per_task == 2 and shape.tasks == 100


def test_one_call_per_task_splits_at_max_array_size_in_order():
    limit = Limit(1001)
    shape = plan_arrays(10_000, limit=limit)
    assert limit.asked == 1
    assert [len(r) for r in shape.arrays] == [1001] * 9 + [991]
    flat = [i for r in shape.arrays for i in r]
    assert flat == list(range(10_000))


def test_a_profile_limit_holds_for_a_small_map_and_costs_no_round_trip():
    limit = Limit(1001, profile=4)
    shape = plan_arrays(10, limit=limit)
    assert [list(r) for r in shape.arrays] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert limit.asked == 0


def test_the_site_is_asked_once_per_cluster():
    limit = Limit(1001)
    for _ in range(3):
        plan_arrays(5000, limit=limit)
    assert limit.asked == 1


def test_parallelism_is_shared_out_over_the_arrays_or_refused():
    shape = plan_arrays(3000, limit=Limit(1001), parallelism=50)
    assert len(shape.arrays) == 3 and shape.parallelism == 16  # 48 at once at most
    with pytest.raises(UsageError, match="array_parallelism=2 cannot be kept over the 3 arrays"):
        plan_arrays(3000, limit=Limit(1001), parallelism=2)
    assert plan_arrays(30, limit=Limit(1001), parallelism=2).parallelism == 2


@pytest.mark.parametrize(
    ("kw", "said"),
    [
        ({"calls_per_task": 0}, "at least 1"),
        ({"calls_per_task": 2.5}, "whole number"),
        ({"calls_per_task": True}, "whole number"),
        ({"call_s": -1}, "> 0"),
        ({"call_s": "fast"}, "> 0"),
        ({"call_s": 1.0, "calls_per_task": 3}, "not both"),
    ],
)
def test_bad_packing_is_refused_with_what_to_give(kw, said):
    with pytest.raises(UsageError, match=said):
        plan_arrays(10, limit=Limit(None), **kw)


def test_arrays_switched_off_are_said():
    with pytest.raises(UsageError, match="MaxArraySize = 0"):
        plan_arrays(500, limit=Limit(0))


def test_packed_calls_keep_each_call_whole_and_in_order():
    calls = [((i,), {"k": i}) for i in range(7)]
    tasks = packed_calls(calls, 3)
    assert [len(args) for args, _ in tasks] == [3, 3, 1]
    assert [c for args, _ in tasks for c in args] == calls


def risky(x: int, *, fail_on: int = -1) -> int:
    if x == fail_on:
        raise ValueError(f"call {x} failed on purpose")
    return x * x


def test_a_failing_call_fails_alone_and_keeps_its_traceback():
    run = cloudpickle.loads(cloudpickle.dumps(Packed(risky)))  # as the node unpickles it
    out = run(((1,), {"fail_on": 2}), ((2,), {"fail_on": 2}), ((3,), {"fail_on": 2}))
    assert out[0] == ("success", 1) and out[2] == ("success", 9)
    kind, tb = out[1]
    assert kind == "error" and "call 2 failed on purpose" in tb and "risky" in tb


def test_a_packed_call_still_names_and_reads_as_the_users_function():
    packed = Packed(risky)
    assert (packed.__module__, packed.__qualname__) == (__name__, "risky")
    code = code_text(packed)
    assert code is not None and code.where.endswith(".risky")
    assert code.bodies and "fail_on" in code.bodies[0][0]


@pytest.mark.parametrize(
    ("fixture", "parse", "want"),
    [
        ("slurm-22.05.8-dev/scontrol_show_config.txt", array_limits.parse_slurm, 10001),
        ("slurm-24.11.5-dev24/scontrol_show_config.txt", array_limits.parse_slurm, 10001),
        ("openpbs-23.06/qstat_Bf_json.json", array_limits.parse_pbs, 10000),
    ],
)
def test_the_limit_as_each_scheduler_prints_it(fixture, parse, want):
    assert parse(fixture_text(fixture)) == want


def test_a_config_without_the_line_is_slurms_default_and_other_text_is_refused():
    text = fixture_text("slurm-22.05.8-dev/scontrol_show_config.txt")
    without = "\n".join(ln for ln in text.splitlines() if not ln.startswith("MaxArraySize"))
    assert array_limits.parse_slurm(without) == array_limits.SLURM_DEFAULT
    with pytest.raises(ValueError, match="not `scontrol show config`"):
        array_limits.parse_slurm("scontrol: error: Invalid user\n")
    with pytest.raises(ValueError, match="not `qstat -Bf -F json`"):
        array_limits.parse_pbs("qstat: cannot connect to server\n")


class FinishedTask:
    """A finished array task as a CallList reads it: its list of outcomes (or its error)."""

    cluster_name = "c"

    def __init__(self, job_id: str, outcomes) -> None:
        self.job_id, self.outcomes, self.reads = job_id, outcomes, 0

    def result(self, timeout=None):
        self.reads += 1
        if isinstance(self.outcomes, Exception):
            raise self.outcomes
        return pickle.loads(pickle.dumps(self.outcomes))

    def wait(self, timeout=None):
        return None


def test_a_call_list_reads_each_task_once_and_says_which_call_failed():
    run = Packed(risky)
    tasks = [
        FinishedTask("7_0", run(*[((i,), {"fail_on": 4}) for i in range(0, 3)])),
        FinishedTask("7_1", run(*[((i,), {"fail_on": 4}) for i in range(3, 6)])),
        FinishedTask("7_2", run(*[((i,), {"fail_on": 4}) for i in range(6, 7)])),
    ]
    calls = CallList(tasks, 3, 7)  # type: ignore[arg-type]
    assert [c.job_id for c in calls] == ["7_0"] * 3 + ["7_1"] * 3 + ["7_2"]
    assert [calls[i].result() for i in (0, 3, 5, 6)] == [0, 9, 25, 36]
    err = calls[4].exception()
    assert isinstance(err, JobFailedError)
    assert "Call 4 of the map (job 7_1 on c, call 1 of that task)" in str(err)
    assert "call 4 failed on purpose" in (err.remote_traceback or "")
    with pytest.raises(JobFailedError, match="Call 4"):
        calls.results()
    assert [t.reads for t in tasks] == [1, 1, 1]


def test_a_task_lost_as_a_whole_fails_each_of_its_calls_with_its_error():
    from hpcui.errors import JobLostError

    lost = JobLostError("Job 9_1 ended OUT_OF_MEMORY without a result", job_id="9_1")
    tasks = [FinishedTask("9_0", [("success", 1), ("success", 2)]), FinishedTask("9_1", lost)]
    calls = CallList(tasks, 2, 4)  # type: ignore[arg-type]
    assert [calls[0].result(), calls[1].result()] == [1, 2]
    assert calls[2].exception() is lost and calls[3].exception() is lost
    assert tasks[1].reads == 1


def on_gpu(x: int, *, fail_on: int = -1) -> tuple[int, str, int, float, float]:
    """Which GPU a call saw, in which process, and when it ran."""
    import os
    import time

    began = time.monotonic()
    time.sleep(0.4)
    if x == fail_on:
        raise ValueError(f"call {x} failed on purpose")
    return x, os.environ["CUDA_VISIBLE_DEVICES"], os.getpid(), began, time.monotonic()


def test_tasks_per_gpu_runs_calls_side_by_side_each_on_one_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")  # the task's GPUs, as Slurm names them

    def local(x: int, **kw):  # as a by-value function arrives: pickle cannot send it on
        return on_gpu(x, **kw)

    run = cloudpickle.loads(cloudpickle.dumps(Packed(local, gpus=2, tasks_per_gpu=2)))
    out = run(*[((i,), {"fail_on": 5}) for i in range(8)])
    ok = [v for kind, v in out if kind == "success"]
    assert [v[0] for v in ok] == [0, 1, 2, 3, 4, 6, 7]  # in call order
    assert out[5][0] == "error" and "call 5 failed on purpose" in out[5][1]
    assert {v[1] for v in ok} == {"5", "7"}  # one GPU each, never both
    assert len({v[2] for v in ok}) == 4  # four workers: two per GPU
    first_round = sorted(ok[:4], key=lambda v: v[3])
    assert first_round[-1][3] < first_round[0][4]  # the four ran at once
    by_worker: dict[int, set[str]] = {}
    for v in ok:
        by_worker.setdefault(v[2], set()).add(v[1])
    assert all(len(seen) == 1 for seen in by_worker.values())  # a worker keeps its GPU


def test_tasks_per_gpu_needs_gpus_on_one_node():
    from hpcui.clusters.mapping import side_by_side_gpus
    from hpcui.request.resources import Resources

    assert side_by_side_gpus(Resources(gpus=4), 2) == 4
    assert side_by_side_gpus(Resources(gpus=4), None) == 0
    with pytest.raises(UsageError, match="ask for GPUs per task too"):
        side_by_side_gpus(Resources(), 2)
    with pytest.raises(UsageError, match="shares the GPUs of one node"):
        side_by_side_gpus(Resources(gpus=8, nodes=2), 2)
    with pytest.raises(UsageError, match="1 or more"):
        side_by_side_gpus(Resources(gpus=1), 0)
