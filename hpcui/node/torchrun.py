"""`launcher="torchrun"|"accelerate"` on the compute node: one agent per node, submitit
workers under it.

The batch script runs `python -m hpcui.node.torchrun agent FOLDER` as one srun task per
node (on PBS: as the one task hpcui's per-node launcher starts there). The agent finds
the first node and the job's port the same way `hpcui.distributed` does, then becomes
(exec) torchrun with a c10d rendezvous there:

    python -m torch.distributed.run --nnodes=N --nproc-per-node=G --rdzv-backend=c10d
        --rdzv-endpoint=FIRST_NODE:PORT --rdzv-id=JOBID --max-restarts=R
        --module hpcui.node.torchrun worker FOLDER

`launcher="deepspeed"` on one node execs DeepSpeed's own launcher (`deepspeed --num_gpus G
--no_local_rank`); `launcher="accelerate"` execs `accelerate launch` instead (backends/launch.py's
`accelerate_argv`: the CSC guide's command, this node's `--machine_rank` computed here,
the job's uploaded config file if it has one), which starts torchrun's workers the same way.

Each worker maps torchrun's RANK/LOCAL_RANK/WORLD_SIZE onto the SLURM_* variables
submitit reads, points its stdout/stderr at `<jobid>_<rank>_log.{out,err}`, and runs
stock submitit's `process_job`: so every rank leaves `<jobid>_<rank>_result.pkl`, the
files `Job.results()` and `Job.stdout(rank)` read, exactly as under srun tasks.
"""

from __future__ import annotations

import os
import signal
import sys

from hpcui.backends.launch import (
    LAUNCHER_CONFIG,
    LAUNCHER_ENV,
    accelerate_argv,
    deepspeed_argv,
    torchrun_argv,
)
from hpcui.distributed import job_id_from_env, rank_info


def agent(folder: str) -> None:
    """Per node: exec torchrun (never returns)."""
    env = os.environ
    info = rank_info(env)  # the Slurm view: one task per node
    nnodes = int(
        env.get("SLURM_JOB_NUM_NODES")
        or env.get("SLURM_NNODES")
        or env.get("HPCUI_NUM_NODES")  # PBS
        or info.world_size
    )
    nproc = int(env.get("HPCUI_NPROC_PER_NODE", "1"))
    if env.get(LAUNCHER_ENV) == "accelerate":
        config = os.path.join(folder, LAUNCHER_CONFIG)
        argv = accelerate_argv(
            sys.executable,
            nnodes=nnodes,
            nproc_per_node=nproc,
            node_rank=info.node_rank,
            main_ip=info.master_addr,
            main_port=info.master_port,
            config_file=config if os.path.exists(config) else None,
            module="hpcui.node.torchrun",
            args=["worker", folder],
        )
        print("hpcui: node", info.node_rank, "runs:", " ".join(argv), flush=True)
    elif env.get(LAUNCHER_ENV) == "deepspeed":  # one node: DeepSpeed's own launcher
        argv = deepspeed_argv(
            sys.executable,
            nproc_per_node=nproc,
            main_ip=info.master_addr,
            main_port=info.master_port,
            module="hpcui.node.torchrun",
            args=["worker", folder],
        )
        print("hpcui: runs:", " ".join(argv), flush=True)
    else:
        argv = torchrun_argv(
            sys.executable,
            nnodes=nnodes,
            nproc_per_node=nproc,
            endpoint=f"{info.master_addr}:{info.master_port}",
            run_id=info.job_id or "hpcui",
            max_restarts=int(env.get("HPCUI_MAX_RESTARTS", "0")),
            module="hpcui.node.torchrun",
            args=["worker", folder],
        )
    # torchrun must not mistake the agent's Slurm rank for a worker's
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NODE_RANK"):
        os.environ.pop(key, None)
    sys.stdout.flush()
    # The early time-limit signal reaches every process of the step: torchrun has no
    # handler for USR2 (its default action ends the process, and the whole job with it).
    # Ignored here, ignored by torchrun after exec; each worker's runner handles it.
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    os.execv(sys.executable, argv)


def _redirect(folder: str, job_id: str, rank: int) -> None:
    for fd, suffix in ((1, "out"), (2, "err")):
        path = os.path.join(folder, f"{job_id}_{rank}_log.{suffix}")
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(target, fd)
        os.close(target)


def worker(folder: str) -> None:
    """Per rank: present torchrun's rank to submitit as a Slurm task, then run the call."""
    env = os.environ
    rank, local_rank, world = env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"]
    on_pbs = env.get("SUBMITIT_EXECUTOR") == "pbs"
    if on_pbs:  # hpcui.node.pbs_env reads the HPCUI_* view
        env.update(
            HPCUI_RANK=rank,
            HPCUI_LOCAL_RANK=local_rank,
            HPCUI_WORLD_SIZE=world,
            HPCUI_LOCAL_WORLD_SIZE=env.get("LOCAL_WORLD_SIZE", "1"),
            HPCUI_NODE_RANK=env.get("GROUP_RANK", env.get("HPCUI_NODE_RANK", "0")),
        )
    else:
        env.update(SLURM_PROCID=rank, SLURM_LOCALID=local_rank, SLURM_NTASKS=world)
        env.pop("SLURM_STEP_NUM_TASKS", None)
    job_id = job_id_from_env(env)
    if job_id:
        _redirect(folder, job_id, int(rank))
    if on_pbs:
        from hpcui.node import pbs_env

        pbs_env.main([folder])
        return
    from hpcui.node.signed import run

    run(folder)  # stock process_job, then the result signed


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in ("agent", "worker"):
        raise SystemExit("usage: python -m hpcui.node.torchrun {agent|worker} FOLDER")
    (agent if args[0] == "agent" else worker)(args[1])


if __name__ == "__main__":
    main()
