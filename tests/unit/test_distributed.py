"""Ranks, rendezvous address/port, stop file and torchrun wiring, from the environment alone."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hpcui.backends.batch import BatchSpec
from hpcui.backends.job_paths import JobPaths
from hpcui.backends.launch import PORT_BASE, PORT_SPAN, master_port, torchrun_argv
from hpcui.backends.slurm.script import render_script
from hpcui.distributed import rank_info, resolve_master, stop_file_path
from hpcui.profiles import load_profile
from hpcui.request.plan import batch_spec, resolve
from hpcui.request.resources import Resources


def no_dns(host: str, suffix: str) -> str:
    return host + suffix


SLURM = {
    "SLURM_JOB_ID": "4711",
    "SLURM_PROCID": "5",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "1",
    "SLURM_NTASKS": "8",
    "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
    "SLURM_STEP_NODELIST": "gpu[007-008]",
    "SLURM_JOB_NODELIST": "gpu[007-008]",
}


def test_slurm_ranks_first_node_and_port():
    info = rank_info(SLURM, resolve=no_dns)
    assert (info.rank, info.local_rank, info.world_size, info.local_world_size) == (5, 1, 8, 4)
    assert info.master_addr == "gpu007"
    assert info.master_port == master_port("4711")
    assert info.source == "slurm" and info.job_id == "4711"


def test_interconnect_suffix_is_resolved_or_dropped():
    env = {**SLURM, "HPCUI_INTERCONNECT_SUFFIX": "i"}
    assert rank_info(env, resolve=no_dns).master_addr == "gpu007i"
    assert resolve_master("localhost", "") == "localhost"
    # a suffixed name that resolves becomes an IP; one that does not falls back to the host
    assert resolve_master("localhos", "t") == "127.0.0.1"
    assert resolve_master("no-such-host-hpcui", ".invalid") == "no-such-host-hpcui"


def test_port_is_stable_distinct_unprivileged_and_overridable():
    ports = {master_port(str(j)) for j in range(100000, 100000 + PORT_SPAN)}
    assert len(ports) == PORT_SPAN  # jobs running at once never share a port
    assert all(PORT_BASE <= p < PORT_BASE + PORT_SPAN for p in ports)
    assert master_port("123.pbs01") == master_port("123.pbs01") != master_port("124.pbs01")
    assert PORT_BASE <= master_port("123[4].pbs01") < PORT_BASE + PORT_SPAN
    with pytest.raises(ValueError):
        master_port("")
    assert rank_info({**SLURM, "HPCUI_MASTER_PORT": "31000"}, resolve=no_dns).master_port == 31000
    assert rank_info({**SLURM, "MASTER_PORT": "31001"}, resolve=no_dns).master_port == 31001


def test_torchrun_environment_wins():
    env = {
        **SLURM,
        "TORCHELASTIC_RUN_ID": "4711",
        "RANK": "3",
        "LOCAL_RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "4",
        "MASTER_ADDR": "gpu007",
        "MASTER_PORT": "29400",
    }
    info = rank_info(env, resolve=no_dns)
    assert (info.rank, info.world_size, info.master_port, info.source) == (3, 4, 29400, "torchrun")


def test_pbs_contract():
    nodefile = "n1\nn1\nn2\nn2\n"
    env = {
        "PBS_JOBID": "99.pbs01",
        "PBS_NODEFILE": "/var/spool/pbs/aux/99.pbs01",
        "HPCUI_RANK": "2",
        "HPCUI_LOCAL_RANK": "0",
        "HPCUI_LOCAL_WORLD_SIZE": "2",
    }
    info = rank_info(env, resolve=no_dns, read_file=lambda p: nodefile)
    assert (info.rank, info.local_rank, info.world_size, info.local_world_size) == (2, 0, 4, 2)
    assert info.master_addr == "n1" and info.master_port == master_port("99.pbs01")
    env.pop("HPCUI_RANK")
    with pytest.raises(RuntimeError, match="HPCUI_RANK"):
        rank_info(env, resolve=no_dns, read_file=lambda p: nodefile)


def test_local_executor_and_single_process():
    env = {
        "SUBMITIT_EXECUTOR": "local",
        "SUBMITIT_LOCAL_JOB_ID": "1234",
        "SUBMITIT_LOCAL_GLOBALID": "1",
        "SUBMITIT_LOCAL_LOCALID": "1",
        "SUBMITIT_LOCAL_NTASKS": "2",
    }
    info = rank_info(env)
    assert (info.rank, info.world_size, info.master_addr) == (1, 2, "127.0.0.1")
    single = rank_info({})
    assert (single.rank, single.world_size, single.source) == (0, 1, "single")


def test_stop_file_agrees_between_client_and_job():
    folder = "/home/u/.hpcui/jobs/abc"
    assert JobPaths(folder + "/", "4711").stop == f"{folder}/4711.stop"
    job_env = {"HPCUI_JOB_FOLDER": folder, "HPCUI_JOB_ID": "4711"}
    assert stop_file_path(job_env) == JobPaths(folder, "4711").stop
    array_env = {"SUBMITIT_FOLDER": folder, "SLURM_ARRAY_JOB_ID": "7", "SLURM_ARRAY_TASK_ID": "3"}
    assert stop_file_path(array_env) == f"{folder}/7_3.stop"
    assert stop_file_path({}) is None


def test_torchrun_allocation_script_and_result_count():
    alloc = resolve(
        Resources.from_kwargs(gpus=8, launcher="torchrun", max_restarts=2), load_profile("dev")
    )
    assert (alloc.nodes, alloc.tasks_per_node, alloc.num_tasks) == (2, 1, 8)  # 8 results
    script = render_script(batch_spec(alloc, folder="/j", token="t", python="/v/python"))
    assert "HPCUI_NPROC_PER_NODE=4 HPCUI_MAX_RESTARTS=2" in script
    assert "-m hpcui.node.torchrun agent /j" in script and "hpcui.node.signed" not in script
    assert "--output=/j/%j_0_log.out" in script
    plain = render_script(BatchSpec(folder="/j", token="t", name="n", tasks_per_node=4))
    assert "-m hpcui.node.signed /j" in plain and "HPCUI_NPROC_PER_NODE" not in plain
    assert 'HPCUI_JOB_FOLDER=/j HPCUI_JOB_ID="${SLURM_JOB_ID}"' in plain
    argv = torchrun_argv(
        "py",
        nnodes=2,
        nproc_per_node=4,
        endpoint="gpu007:24711",
        run_id="4711",
        max_restarts=2,
        module="hpcui.node.torchrun",
        args=["worker", "/j"],
    )
    assert argv[:4] == ["py", "-u", "-m", "torch.distributed.run"]
    assert "--rdzv-endpoint=gpu007:24711" in argv and argv[-3:] == [
        "hpcui.node.torchrun",
        "worker",
        "/j",
    ]


def test_compute_side_imports_stay_light():
    code = (
        "import sys, hpcui.distributed, hpcui.node.torchrun; "
        "bad = {'torch', 'pydantic', 'paramiko', 'textual'} & set(sys.modules); "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the backend: nccl for one GPU per rank, gloo on CPU and where ranks share a GPU ----------


def _info(rank: int, world: int = 4, local_world: int = 4):
    from hpcui.distributed import RankInfo

    return RankInfo(rank, rank, world, local_world, "127.0.0.1", 29500, "1", "local")


def test_backend_choice(capsys):
    from hpcui.distributed import _backend_for

    assert _backend_for(0, _info(0)) == "gloo"  # CPU
    assert _backend_for(4, _info(0)) == "nccl"  # a GPU per rank, nothing asked
    one_per_task = [f"n1/GPU-{i}" for i in range(4)]  # a site binding one GPU per task
    assert _backend_for(1, _info(0), one_per_task) == "nccl"
    assert capsys.readouterr().err == ""
    shared = ["n1/GPU-0"] * 4  # gpus=1, tasks_per_node=4: develop DDP/FSDP on one GPU
    assert _backend_for(1, _info(1), shared) == "gloo"
    assert capsys.readouterr().err == ""  # said once, by rank 0 only
    assert _backend_for(1, _info(0), shared) == "gloo"
    assert "4 ranks share 1 GPU(s) and NCCL refuses two ranks on one GPU" in capsys.readouterr().err


def test_ranks_learn_each_others_gpu_through_the_rendezvous_store():
    import threading

    from torch.distributed import TCPStore

    from hpcui.distributed import _identities

    master = TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False)
    client = TCPStore("127.0.0.1", master.port, 2, is_master=False)
    got: dict[int, list[str]] = {}
    mine = {0: "n1/GPU-0", 1: "n1/GPU-0"}

    def rank(r, store):
        got[r] = _identities(store, _info(r, world=2, local_world=2), mine[r])

    threads = [threading.Thread(target=rank, args=(r, s)) for r, s in ((0, master), (1, client))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert got == {0: ["n1/GPU-0", "n1/GPU-0"], 1: ["n1/GPU-0", "n1/GPU-0"]}
