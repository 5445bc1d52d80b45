"""Facts shared by the submitting side and the compute side of a distributed job.

One place each: the launchers a job may ask for (and which of them start one agent per
node), the rendezvous port a job derives from its id, and the command lines the per-node
agent runs (torchrun; Accelerate's `accelerate launch`). Pure functions.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    from hpcui.backends.batch import BatchSpec

#: how a job's ranks start. submitit: one scheduler task per rank (srun / hpcui's PBS
#: launcher); lightning and deepspeed start the same way (the frameworks read the rank
#: variables every task exports); torchrun and accelerate: one agent per node that starts
#: the node's ranks itself. "auto" is chosen from what the code imports, before planning.
Launcher = Literal["submitit", "torchrun", "lightning", "accelerate", "deepspeed", "auto"]
LAUNCHERS: tuple[str, ...] = get_args(Launcher)
#: launchers that run one agent per node, which starts a rank per GPU (or per CPU slot)
PER_NODE: frozenset[str] = frozenset({"torchrun", "accelerate"})


def agent_per_node(launcher: str, nodes: int) -> bool:
    """One agent per node starts the node's ranks: torchrun and accelerate always, and
    DeepSpeed on one node, where its own `deepspeed` launcher is the guide's way (over
    several nodes the guide's form is one srun task per rank: no pdsh, no hostfile)."""
    return launcher in PER_NODE or (launcher == "deepspeed" and nodes == 1)


#: the environment variable that tells the per-node agent which launcher it is
LAUNCHER_ENV = "HPCUI_LAUNCHER"
#: the job folder's copy of the launcher's config file (Accelerate's YAML), uploaded with
#: the job; the agent passes it as `--config_file`
LAUNCHER_CONFIG = "launcher_config.yaml"

#: Derived ports fall in [PORT_BASE, PORT_BASE + PORT_SPAN): unprivileged, below Linux's
#: ephemeral range (32768+), so an outgoing connection never holds the port first.
PORT_BASE = 20000
PORT_SPAN = 10000


def master_port(job_id: str | int) -> int:
    """The rendezvous port of a job: every rank computes the same one from the job id.

    Numeric ids (Slurm) map by modulo, so jobs whose ids differ by less than PORT_SPAN
    (all jobs running at once on a site, in practice) never share a port; other ids
    (PBS `123.server`, `123[4].server`) by CRC32.
    """
    text = str(job_id).strip()
    if not text:
        raise ValueError("job id is empty: cannot derive a port")
    n = int(text) if text.isdigit() else zlib.crc32(text.encode())
    return PORT_BASE + n % PORT_SPAN


def torchrun_argv(
    python: str,
    *,
    nnodes: int,
    nproc_per_node: int,
    endpoint: str,
    run_id: str,
    max_restarts: int,
    module: str,
    args: list[str],
) -> list[str]:
    """`python -m torch.distributed.run ...` with c10d rendezvous on `endpoint` (first node)."""
    return [
        python,
        "-u",
        "-m",
        "torch.distributed.run",
        f"--nnodes={nnodes}",
        f"--nproc-per-node={nproc_per_node}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={endpoint}",
        f"--rdzv-id={run_id}",
        f"--max-restarts={max_restarts}",
        "--module",
        module,
        *args,
    ]


def accelerate_argv(
    python: str,
    *,
    nnodes: int,
    nproc_per_node: int,
    node_rank: int,
    main_ip: str,
    main_port: int,
    config_file: str | None,
    module: str,
    args: list[str],
) -> list[str]:
    """`accelerate launch` as the CSC guide writes it, one per node, with this node's rank
    evaluated here (no shell escaping). A config file decides the distributed type (FSDP,
    DeepSpeed, mixed precision); without one it is plain multi-process data parallel. The
    topology flags always come from the allocation, so they win over the file's."""
    argv = [python, "-u", "-m", "accelerate.commands.launch"]
    if config_file:
        argv += ["--config_file", config_file]
    else:
        argv += ["--multi_gpu", "--mixed_precision", "no", "--dynamo_backend", "no"]
    return [
        *argv,
        f"--num_machines={nnodes}",
        f"--num_processes={nnodes * nproc_per_node}",
        f"--machine_rank={node_rank}",
        f"--main_process_ip={main_ip}",
        f"--main_process_port={main_port}",
        "--module",
        module,
        *args,
    ]


def deepspeed_argv(
    python: str, *, nproc_per_node: int, main_ip: str, main_port: int, module: str, args: list[str]
) -> list[str]:
    """DeepSpeed's own launcher on one node (`deepspeed --num_gpus G`), its workers told
    their rank by the environment rather than a `--local_rank` argument."""
    return [
        python, "-u", "-m", "deepspeed.launcher.runner", f"--num_gpus={nproc_per_node}",
        f"--master_addr={main_ip}", f"--master_port={main_port}", "--no_local_rank",
        "--module", module, *args,
    ]  # fmt: skip


def per_node_lines(spec: BatchSpec) -> list[str]:
    """The batch script's lines for a per-node agent: how many ranks it starts, and (as
    a comment, since the node computes its own rank) the command each node runs."""
    nproc = max(spec.gpus_per_node, 1)
    lines = [
        f"export {LAUNCHER_ENV}={spec.launcher} HPCUI_NPROC_PER_NODE={nproc} "
        f"HPCUI_MAX_RESTARTS={spec.max_restarts}"
    ]
    if spec.launcher == "deepspeed":
        shown = deepspeed_argv(
            "python", nproc_per_node=nproc, main_ip="FIRST_NODE", main_port=0,
            module="hpcui.node.torchrun", args=["worker", spec.folder],
        )  # fmt: skip
        words = " ".join(w.replace("=0", "=$PORT") if "port" in w else w for w in shown)
        lines.append(f"# the node's agent runs: {words}")
    if spec.launcher == "accelerate":
        shown = accelerate_argv(
            "python", nnodes=spec.nodes, nproc_per_node=nproc, node_rank=0,
            main_ip="FIRST_NODE", main_port=0, config_file=None, module="hpcui.node.torchrun",
            args=["worker", spec.folder],
        )  # fmt: skip
        words = " ".join(
            "--machine_rank=$NODE_RANK" if w.startswith("--machine_rank") else
            "--main_process_port=$PORT" if w.startswith("--main_process_port") else w
            for w in shown
        )  # fmt: skip
        lines.append(
            f"# each node's agent runs: {words} (with --config_file {LAUNCHER_CONFIG} when the "
            "job has one; NODE_RANK and PORT as hpcui.distributed derives them)"
        )
    return lines


#: what a per-task framework launcher's script says (one scheduler task per rank, the rank
#: variables exported by hpcui's runner in each task before the call)
_PER_TASK_NOTE = {
    "lightning": "Lightning finds its ranks in the scheduler's variables (Slurm) or in the "
    "RANK/LOCAL_RANK/WORLD_SIZE/NODE_RANK/MASTER_ADDR/MASTER_PORT each task exports",
    "deepspeed": "deepspeed.init_distributed() reads the RANK/LOCAL_RANK/WORLD_SIZE/"
    "MASTER_ADDR/MASTER_PORT each task exports (the CSC guide's srun form, no pdsh)",
}


def per_task_lines(spec: BatchSpec) -> list[str]:
    """A comment for the per-task framework launchers (the renderers call it where no
    agent runs per node): their script is submitit's."""
    note = _PER_TASK_NOTE.get(spec.launcher)
    return [f"# launcher {spec.launcher}: one task per rank; {note}"] if note else []
