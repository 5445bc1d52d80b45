"""hpcui's PBS adapter end to end against the PBS Pro mock (tests/pbsmock) on the dev cluster.

PBS Pro itself cannot run here. The mock replays PBS Pro 19's qsub/qstat/qdel output
shapes (see tests/pbsmock/pbsmock.py) and really runs each job on the dev cluster's
Slurm with PBS's environment, so everything hpcui does is real: SSH, upload, the
rendered PBS script, the launcher, submitit on the node, ONE qstat per poll, qdel,
results read back. The mock is installed under ~/pbsmock for `hpcuser` and put first
on PATH for this test's commands only (other tests keep Slurm's Torque wrappers).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcui.backends.pbs import status as pbs
from hpcui.backends.states import JobState
from hpcui.clusters.cluster import Cluster
from hpcui.errors import JobCancelledError, JobFailedError, UsageError
from hpcui.transport.base import Command, CommandResult, Transport
from hpcui.transport.quoting import to_command
from tests.support.jobs import wait_job_state

pytestmark = pytest.mark.devcluster

MOCK = Path(__file__).resolve().parent.parent / "pbsmock" / "pbsmock.py"
COMMANDS = ("qsub", "qstat", "qselect", "qdel", "qhold", "qrls", "qalter", "qrerun", "pbs_tmrsh")


class MockOnPath(Transport):
    """The cluster's transport with ~/pbsmock/bin first on PATH for every command."""

    def __init__(self, inner: Transport, history: bool = True) -> None:
        self.inner = inner
        self.description = inner.description
        flag = "1" if history else "0"
        self.prefix = f'export PATH="$HOME/pbsmock/bin:$PATH" PBSMOCK_HISTORY={flag}; '.encode()

    def run(self, cmd: Command, *, timeout=None, stdin=None) -> CommandResult:
        return self.inner.run(self.prefix + to_command(cmd), timeout=timeout, stdin=stdin)

    def _put_files(self, directory, files, then, first) -> CommandResult:
        then = None if then is None else self.prefix + to_command(then)
        return self.inner.put_files(directory, files, then=then, first=first)

    def write_file(self, path, data, *, mode=0o600) -> int:
        return self.inner.write_file(path, data, mode=mode)

    def read_file(self, path, *, offset=0, length=None) -> bytes:
        return self.inner.read_file(path, offset=offset, length=length)

    def stat_size(self, path):
        return self.inner.stat_size(path)

    def close(self) -> None:
        self.inner.close()


def install_mock(transport: Transport) -> None:
    """Copy the mock and its command stubs to ~/pbsmock (atomic renames: parallel-safe)."""
    home = transport.home()
    root = f"{home}/pbsmock"
    transport.run(["mkdir", "-p", f"{root}/bin", f"{root}/state"]).check("mkdir pbsmock")
    files = {f"{root}/pbsmock.py": MOCK.read_bytes()}
    for name in COMMANDS:
        stub = f'#!/bin/sh\nexec /usr/bin/python3 "{root}/pbsmock.py" {name} "$@"\n'
        files[f"{root}/bin/{name}"] = stub.encode()
    for path, data in files.items():
        transport.write_file(f"{path}.tmp{id(files)}", data, mode=0o755)
        transport.run(["mv", "-f", f"{path}.tmp{id(files)}", path]).check("installing pbsmock")


def _cluster(history: bool = True, python: str | None = None) -> Cluster:
    from hpcui.config import load_config

    update: dict = {"scheduler": "pbs"} | ({"python": python} if python else {})
    # the mock's nodes are no ssh hosts: its pbs_tmrsh reaches them from the login node
    # (PBS_JOBID names the job), where a real site's default `ssh NODE` would
    update["profile_overrides"] = {"node_shell": "pbs_tmrsh"}
    cfg = load_config().cluster("dev").model_copy(update=update)
    plain = Cluster(cfg)
    install_mock(plain.transport)
    return Cluster(cfg, transport=MockOnPath(plain.transport, history=history))


@pytest.fixture
def pbs_dev(dev_env) -> Iterator[Cluster]:
    cluster = _cluster()
    yield cluster
    cluster.close()


@pytest.fixture
def pbs_dev_no_history(dev_env) -> Iterator[Cluster]:
    cluster = _cluster(history=False)
    yield cluster
    cluster.close()


def add(a, b):
    return a + b


def boom(x):
    raise ValueError(f"pbs boom {x}")


def slow(seconds):
    import time as _t

    _t.sleep(seconds)
    return seconds


def ranks():
    import os as _os
    import socket

    import submitit

    from hpcui.distributed import rank_info

    info = rank_info()
    env = submitit.JobEnvironment()
    return {
        "rank": info.rank,
        "local_rank": info.local_rank,
        "world": info.world_size,
        "local_world": info.local_world_size,
        "source": info.source,
        "submitit_rank": env.global_rank,
        "node": env.node,
        "pbs_jobid": _os.environ.get("PBS_JOBID"),
        "host": socket.gethostname(),
        "nodefile": open(_os.environ["PBS_NODEFILE"]).read().split(),
        "slurm_vars": sorted(k for k in _os.environ if k.startswith("SLURM_")),
    }


PBS_ID = re.compile(r"\d+\.pbsmock")


def test_dialect_is_pbs_pro(pbs_dev):
    assert pbs_dev.scheduler.dialect == "pbspro"


def test_submit_result_and_qstat_json(pbs_dev):
    job = pbs_dev.submit(add, 1, 2, time="5m")
    assert PBS_ID.fullmatch(job.job_id), job.job_id
    assert job.result(timeout=180) == 3
    assert job.state is JobState.COMPLETED
    # the server's own record, read through hpcui's public parser
    text = pbs_dev.run(["qstat", "-x", "-f", "-F", "json", job.job_id]).check().stdout
    (rec,) = pbs.parse_qstat_json(text)
    assert rec.state is JobState.COMPLETED and rec.exit_status == 0
    assert rec.resources_requested["walltime"] == "00:05:00"
    token = pbs_dev.registry.get(pbs_dev.name, job.job_id).token
    assert pbs_dev.scheduler.find_token(token) == job.job_id  # HPCUI_TOKEN in Variable_List
    assert "pbs_version" not in job.stdout()  # the task's own log, not qstat's


def test_map_in_order_one_qsub_one_qstat_per_poll(pbs_dev):
    jobs = pbs_dev.map(add, range(6), range(10, 16), time="5m")
    assert len({j.job_id.rsplit("_", 1)[0] for j in jobs}) == 1  # one array: one qsub
    assert [j.job_id.rsplit("_", 1)[1] for j in jobs] == [str(i) for i in range(6)]
    pbs_dev.status.poll_once()
    assert pbs_dev.status.last_poll_calls == 1
    assert [j.result(timeout=300) for j in jobs] == [a + b for a, b in zip(range(6), range(10, 16))]
    assert {j.state for j in jobs} == {JobState.COMPLETED}


def test_map_of_one_is_a_one_element_array(pbs_dev):
    (job,) = pbs_dev.map(add, [4], [5])
    assert job.job_id.endswith("_0")
    assert job.result(timeout=180) == 9


def test_failing_function_gives_remote_traceback(pbs_dev):
    job = pbs_dev.submit(boom, 7)
    with pytest.raises(JobFailedError) as err:
        job.result(timeout=180)
    assert "ValueError: pbs boom 7" in str(err.value)
    assert job.state is JobState.FAILED
    assert job.cluster.status.get(job.job_id).state_raw == "F (Exit_status 1)"


def test_qdel_gives_cancelled(pbs_dev):
    job = pbs_dev.submit(slow, 300)
    wait_job_state(job, {JobState.RUNNING}, 120)
    queue = {q.job_id: q.partition for q in pbs_dev.site.queue()}[job.job_id]
    (part,) = [p for p in pbs_dev.site.partitions() if p.partition == queue]  # qstat -Q
    assert part.avail == "up" and part.kind == "exec" and part.jobs_running >= 1
    job.cancel()
    assert job.wait(timeout=90) is JobState.CANCELLED
    assert "271" in job.cluster.status.get(job.job_id).state_raw  # 256 + SIGTERM
    with pytest.raises(JobCancelledError):
        job.result()


def test_two_nodes_eight_gpus_one_process_per_gpu(pbs_dev):
    """select=2:ngpus=4:mpiprocs=4 on two real hosts of the dev cluster: PBS_NODEFILE names
    both, the launcher starts the second node through pbs_tmrsh; eight ranks, as submitit
    and hpcui.distributed see them."""
    job = pbs_dev.submit(ranks, gpus=8, time="5m")
    script = pbs_dev.registry.get(pbs_dev.name, job.job_id).meta["script"]
    assert "#PBS -l select=2:ncpus=8:ngpus=4:mem=8000mb:mpiprocs=4" in script
    assert "#PBS -l place=scatter" in script
    values = job.results(timeout=300)
    assert [v["rank"] for v in values] == list(range(8))
    assert [v["submitit_rank"] for v in values] == list(range(8))
    assert [v["node"] for v in values] == [0] * 4 + [1] * 4
    assert [v["local_rank"] for v in values] == [0, 1, 2, 3] * 2
    assert {(v["world"], v["local_world"], v["source"]) for v in values} == {(8, 4, "pbs")}
    assert {v["pbs_jobid"] for v in values} == {job.job_id}
    assert [v["host"] for v in values] == ["node1"] * 4 + ["node2"] * 4 or [
        v["host"] for v in values
    ] == ["node2"] * 4 + ["node1"] * 4
    first = values[0]["host"]
    second = "node2" if first == "node1" else "node1"
    assert {tuple(v["nodefile"]) for v in values} == {(first,) * 4 + (second,) * 4}
    assert {tuple(v["slurm_vars"]) for v in values} == {()}  # a PBS job, also on the sister


def sleeper(seconds):
    import time as _t

    _t.sleep(seconds)
    return seconds


def test_usage_of_a_two_node_pbs_job_on_its_exec_hosts(pbs_dev):
    """qstat's exec_host names both nodes; the probe runs on each through the node shell;
    resources_used gives the job's CPU (the mock counts none, so 0)."""
    import time as _t

    job = pbs_dev.submit(sleeper, 60, gpus=8, time="5m")
    try:
        end = _t.monotonic() + 120
        sample = None
        while _t.monotonic() < end:
            if job.state is JobState.RUNNING:
                sample = job.usage()
                if sample.gpus:
                    break
            _t.sleep(1)
        assert sample is not None and sample.gpus, f"no usage: {sample}"
        assert sorted({g.node for g in sample.gpus}) == ["node1", "node2"]
        assert len(sample.gpus) == 8 and {g.util_pct for g in sample.gpus} == {0.0, 100.0}
        [step] = sample.tasks
        assert step.step == job.job_id and step.ntasks == 16  # ncpus of select=2:ncpus=8
        assert step.cpu_s == 0 and step.elapsed_s is not None
    finally:
        job.cancel()
    job.wait(timeout=60)
    assert pbs_dev.usage.look([job.job_id])[job.job_id].notes == [
        "the job is not running: no node to sample"
    ]


def torchrun_ranks():
    import os

    import torch

    from hpcui import distributed as hd

    _, rank, world, _ = hd.setup()
    t = torch.tensor([float(rank + 1)])
    torch.distributed.all_reduce(t)
    hd.cleanup()
    return {
        "rank": rank,
        "world": world,
        "sum": t.item(),
        "group_rank": os.environ.get("GROUP_RANK"),
        "elastic": bool(os.environ.get("TORCHELASTIC_RUN_ID")),
    }


def test_torchrun_on_two_pbs_nodes(dev_env):
    """launcher="torchrun" on PBS: one agent per node (node 1 through pbs_tmrsh), a c10d
    rendezvous, 8 torch workers, one all_reduce, a result and a log per rank."""
    with _cluster(python="/opt/hpcui-devcluster/venv/bin/python") as cluster:
        job = cluster.submit(torchrun_ranks, gpus=8, launcher="torchrun", time="5m")
        script = cluster.registry.get(cluster.name, job.job_id).meta["script"]
        assert "-m hpcui.node.torchrun agent" in script and "mpiprocs=1" in script
        values = job.results(timeout=300)
        assert [v["rank"] for v in values] == list(range(8))
        assert {(v["world"], v["sum"], v["elastic"]) for v in values} == {(8, 36.0, True)}
        assert [v["group_rank"] for v in values] == ["0"] * 4 + ["1"] * 4
        assert job.state is JobState.COMPLETED


def test_finished_job_without_server_history_resolved_from_result_files(pbs_dev_no_history):
    ok = pbs_dev_no_history.submit(add, 2, 2)
    bad = pbs_dev_no_history.submit(boom, 1)
    assert ok.result(timeout=180) == 4
    assert ok.state is JobState.COMPLETED
    assert "result file" in ok.cluster.status.get(ok.job_id).state_raw
    with pytest.raises(JobFailedError):
        bad.result(timeout=180)
    assert bad.state is JobState.FAILED
    # the mock server really forgot them: qstat -x no longer knows the ids
    res = pbs_dev_no_history.run(["qstat", "-x", "-f", "-F", "json", ok.job_id])
    assert "Unknown Job Id" in res.stderr


def test_details_hold_release_walltime_rerun_and_afterok_on_pbs_pro(pbs_dev):
    """Issue 23, features 1 and 3 on PBS Pro (the stand-in: qhold/qrls/qalter/qrerun drive
    the real Slurm job behind it): Output_Path without its host, a user hold and its
    release, a new walltime, a rerun of a running job, and afterok (-W depend=)."""
    first = pbs_dev.submit(slow, 8, time="5m", name="pbs-first", extra=["-h"])
    second = pbs_dev.submit(add, 4, 5, time="5m", name="pbs-second", after_ok=[first])
    try:
        d = pbs_dev.control.details(first.job_id)
        assert d.state is JobState.PENDING and d.state_raw == "H"
        assert d.stdout.startswith("/") and ":" not in d.stdout and d.stdout.endswith(".log")
        assert "Keep_Files=n" in d.log_note  # the stand-in's qstat -f says so, as PBS does
        pbs_dev.control.set_time_limit(first.job_id, "7m")
        assert pbs_dev.control.details(first.job_id).time_limit_s == 420
        pbs_dev.control.hold([first.job_id])  # held again: still fine
        pbs_dev.control.release([first.job_id])
        deadline = time.monotonic() + 90
        while pbs_dev.control.details(first.job_id).state is not JobState.RUNNING:
            assert time.monotonic() < deadline, "the released job never ran"
            time.sleep(0.5)
        with pytest.raises(UsageError, match="PBS refused `qhold`"):
            pbs_dev.control.hold([first.job_id])  # a running job cannot be held
        pbs_dev.control.requeue([first.job_id])
        assert pbs_dev.control.details(first.job_id).state_raw in ("Q", "R")
        assert second.result(timeout=240) == 9  # ran only after the rerun first completed
        assert first.result(timeout=60) == 8
        with pytest.raises(UsageError, match="PBS does not know job"):
            pbs_dev.control.details("999999.pbsmock")
    finally:
        pbs_dev.control.cancel([first.job_id, second.job_id])
