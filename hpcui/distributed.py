"""DDP/FSDP on the compute node: ranks, rendezvous, rank-0 I/O, sharded checkpoints, stop.

Runs inside the job (shipped in the runtime bundle), so it imports only the standard
library and `backends` at import time; torch is imported when a function needs it.

    from hpcui import distributed as hd

    def train(cfg):
        local_rank, rank, world_size, device = hd.setup()
        model = DDP(Net().to(device))                      # or fully_shard(...) for FSDP
        for step in range(cfg.steps):
            ...
            if step % 50 == 0 and hd.stop_requested():     # `job.stop()` on the client
                break
        hd.cleanup()
        return rank

    job = cluster.submit(train, cfg, gpus=8)   # one task per GPU
    job.results()                              # one return value per rank

Where the ranks come from (first match wins):
- torchrun (`launcher="torchrun"`): RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT are
  already set by torchrun and used as they are.
- Slurm (srun tasks): SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS, the per-node task
  counts (SLURM_STEP_TASKS_PER_NODE) and the node list (SLURM_STEP_NODELIST).
- PBS (no srun): the contract for hpcui's PBS launcher, one process per rank started
  per node from $PBS_NODEFILE (pbsdsh/mpiexec), is that it exports HPCUI_RANK and
  HPCUI_LOCAL_RANK, and optionally HPCUI_WORLD_SIZE (default: lines of $PBS_NODEFILE,
  one per process slot) and HPCUI_LOCAL_WORLD_SIZE (default: that host's lines).
  MASTER_ADDR is the first line of $PBS_NODEFILE; the port derives from PBS_JOBID.
- submitit's local executor (hpcui's `local` cluster): SUBMITIT_LOCAL_GLOBALID etc.
- otherwise a single process (world size 1), so the same code runs on a laptop.

MASTER_ADDR is the first node plus the site's interconnect suffix
(HPCUI_INTERCONNECT_SUFFIX, exported by the batch script from the profile; JSC's
`i`), resolved to an IP when that name resolves, else the plain first node.
MASTER_PORT derives from the job id (`backends.launch.master_port`); set
HPCUI_MASTER_PORT (or MASTER_PORT) and HPCUI_MASTER_ADDR to override.

Sharded checkpoints and resume (FSDP; works the same for DDP):

    root = f"{cfg.ckpt_dir}"                  # on a shared filesystem (scratch)
    model = build(); fully_shard(...); opt = torch.optim.AdamW(model.parameters())
    start = 0
    latest = hd.latest_checkpoint(root)       # newest COMPLETE checkpoint, or None
    if latest:
        start = hd.load_sharded(latest, model, opt)["step"] + 1   # any world size
    for step in range(start, cfg.steps):
        train_step(...)
        if step % cfg.every == 0 or hd.stop_requested():
            hd.save_sharded(hd.checkpoint_path(root, step), model, opt, extra={"step": step})
        if hd.stop_requested():               # same answer on every rank
            break

Every rank calls save_sharded/load_sharded (each writes/reads its own shard; DCP
reshards on load, so 4 ranks' checkpoint loads on 2). A checkpoint counts as complete
once its `.metadata` exists (DCP writes it last), so a job killed mid-save resumes from
the previous one. stop_requested() also turns true at the scheduler's early signal
(`signal_delay` before the time limit; hpcui/node/time_limit.py): the job runs on to
its limit unless it stops itself. On a time limit, resubmit the same function (or use submitit's
Checkpointable, whose `checkpoint()` can simply return a resubmission of the same call:
the function finds the newest checkpoint itself).

Over 500 lines: a public module users import inside a job as one namespace (setup, rank info, rank-0 I/O, sharded checkpoints, stop); splitting it would change what `hpcui.distributed` holds for them.
"""

from __future__ import annotations

import importlib.util
import io
import logging
import os
import pickle
import re
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcui.backends.job_paths import JobPaths
from hpcui.backends.launch import master_port
from hpcui.backends.nodelist import expand_nodelist, expand_tasks_per_node, nodefile_hosts

if TYPE_CHECKING:
    import torch

__all__ = [
    "RankInfo",
    "at_time_limit",
    "checkpoint_path",
    "cleanup",
    "latest_checkpoint",
    "lightning_callback",
    "load_sharded",
    "print0",
    "rank_info",
    "save0",
    "save_sharded",
    "setup",
    "stop_file_path",
    "stop_requested",
    "transformers_callback",
]

log = logging.getLogger(__name__)
_CKPT = re.compile(r"^step_(\d+)$")


@dataclass(frozen=True)
class RankInfo:
    """Who this process is in the job, and where rank 0 listens."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    master_addr: str
    master_port: int
    job_id: str
    source: str  # torchrun | slurm | pbs | local | single
    #: this node's index among the job's nodes (Lightning's NODE_RANK, torchrun's GROUP_RANK)
    node_rank: int = 0


def resolve_master(host: str, suffix: str) -> str:
    """`host+suffix` as an IP when it resolves (JSC's InfiniBand names), else `host`."""
    if not suffix:
        return host
    try:
        return socket.gethostbyname(host + suffix)
    except OSError:
        log.warning("%s%s does not resolve; using %s as MASTER_ADDR", host, suffix, host)
        return host


def _int(env: Mapping[str, str], *names: str, default: int | None = None) -> int:
    for name in names:
        value = env.get(name)
        if value not in (None, ""):
            try:
                return int(value)
            except ValueError:
                raise RuntimeError(f"{name}={value!r} is not an integer") from None
    if default is None:
        raise RuntimeError(f"none of {', '.join(names)} is set in the environment")
    return default


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port(env: Mapping[str, str], job_id: str) -> int:
    override = env.get("HPCUI_MASTER_PORT") or env.get("MASTER_PORT")
    if override:
        return _int({"port": override}, "port")
    return master_port(job_id) if job_id else _free_port()


def job_id_from_env(env: Mapping[str, str]) -> str:
    """The id the client knows the job by (`123`, array element `123_4`, PBS `123.srv`)."""
    if env.get("HPCUI_JOB_ID"):
        return env["HPCUI_JOB_ID"]
    if env.get("SLURM_ARRAY_JOB_ID") and env.get("SLURM_ARRAY_TASK_ID"):
        return f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
    for name in ("SLURM_JOB_ID", "PBS_JOBID", "SUBMITIT_LOCAL_JOB_ID"):
        if env.get(name):
            return env[name]
    return ""


def rank_info(
    env: Mapping[str, str] | None = None,
    *,
    resolve: Callable[[str, str], str] = resolve_master,
    read_file: Callable[[str], str] | None = None,
) -> RankInfo:
    """Ranks and rendezvous from the environment (see the module docstring). No side effects."""
    env = os.environ if env is None else env
    read = read_file or (lambda p: Path(p).read_text(encoding="utf-8"))
    suffix = env.get("HPCUI_INTERCONNECT_SUFFIX", "")
    job_id = job_id_from_env(env)

    if env.get("TORCHELASTIC_RUN_ID") or all(
        env.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    ):
        world = _int(env, "WORLD_SIZE")
        return RankInfo(
            rank=_int(env, "RANK"),
            local_rank=_int(env, "LOCAL_RANK"),
            world_size=world,
            local_world_size=_int(env, "LOCAL_WORLD_SIZE", default=world),
            master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
            master_port=_int(env, "MASTER_PORT"),
            job_id=job_id,
            # the variables hpcui's own runner exported (export_rank_env) say where from
            source=env.get(RANK_SOURCE_ENV) or "torchrun",
            node_rank=_int(env, "GROUP_RANK", "NODE_RANK", default=0),
        )

    if env.get("SLURM_PROCID") and env.get("SLURM_JOB_ID"):
        world = _int(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", default=1)
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
        hosts = expand_nodelist(nodelist) if nodelist else [socket.gethostname()]
        per_node = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE")
        node = _int(env, "SLURM_NODEID", default=0)
        counts = expand_tasks_per_node(per_node) if per_node else [world]
        return RankInfo(
            rank=_int(env, "SLURM_PROCID"),
            local_rank=_int(env, "SLURM_LOCALID", default=0),
            world_size=world,
            local_world_size=counts[node] if node < len(counts) else counts[-1],
            master_addr=env.get("HPCUI_MASTER_ADDR") or resolve(hosts[0], suffix),
            master_port=_port(env, env["SLURM_JOB_ID"]),
            job_id=job_id,
            source="slurm",
            node_rank=node,
        )

    if env.get("PBS_JOBID"):
        nodefile = env.get("PBS_NODEFILE")
        lines = [x.strip() for x in read(nodefile).splitlines() if x.strip()] if nodefile else []
        hosts = nodefile_hosts("\n".join(lines)) or [socket.gethostname()]
        world = _int(env, "HPCUI_WORLD_SIZE", default=max(len(lines), 1))
        if world > 1 and not env.get("HPCUI_RANK"):
            raise RuntimeError(
                f"PBS job with {world} process slots but HPCUI_RANK is not set: start one "
                "process per rank with hpcui's PBS launcher (it exports HPCUI_RANK and "
                "HPCUI_LOCAL_RANK), or set them yourself in the launch command."
            )
        me = socket.gethostname()
        return RankInfo(
            rank=_int(env, "HPCUI_RANK", default=0),
            local_rank=_int(env, "HPCUI_LOCAL_RANK", default=0),
            world_size=world,
            local_world_size=_int(env, "HPCUI_LOCAL_WORLD_SIZE", default=max(lines.count(me), 1)),
            master_addr=env.get("HPCUI_MASTER_ADDR") or resolve(hosts[0], suffix),
            master_port=_port(env, env["PBS_JOBID"]),
            job_id=job_id,
            source="pbs",
            node_rank=_int(env, "HPCUI_NODE_RANK", default=0),
        )

    if env.get("SUBMITIT_EXECUTOR") == "local" and env.get("SUBMITIT_LOCAL_GLOBALID"):
        world = _int(env, "SUBMITIT_LOCAL_NTASKS", default=1)
        return RankInfo(
            rank=_int(env, "SUBMITIT_LOCAL_GLOBALID"),
            local_rank=_int(env, "SUBMITIT_LOCAL_LOCALID", default=0),
            world_size=world,
            local_world_size=world,
            master_addr="127.0.0.1",
            master_port=_port(env, env.get("SUBMITIT_LOCAL_JOB_ID", "")),
            job_id=job_id,
            source="local",
        )

    return RankInfo(0, 0, 1, 1, "127.0.0.1", _port(env, ""), job_id, "single")


#: set beside the rank variables hpcui's runner exports, so rank_info() still says where
#: the ranks came from (slurm, pbs) rather than "torchrun"
RANK_SOURCE_ENV = "HPCUI_RANK_SOURCE"


def rank_env(info: RankInfo) -> dict[str, str]:
    """The variables torch's `env://` rendezvous, Lightning, Accelerate (and the HF
    Trainer on it) and DeepSpeed's `init_distributed` read to find their rank and rank 0."""
    return {
        "RANK": str(info.rank),
        "LOCAL_RANK": str(info.local_rank),
        "WORLD_SIZE": str(info.world_size),
        "LOCAL_WORLD_SIZE": str(info.local_world_size),
        "NODE_RANK": str(info.node_rank),
        "GROUP_RANK": str(info.node_rank),
        "MASTER_ADDR": info.master_addr,
        "MASTER_PORT": str(info.master_port),
        RANK_SOURCE_ENV: info.source,
    }


def export_rank_env(env: dict[str, str] | None = None) -> RankInfo:
    """Every task of a job, before the call runs: the frameworks find their ranks.

    Lightning reads Slurm's own variables but not PBS's; Accelerate and DeepSpeed read
    only torch's. A launcher that set them already (torchrun, accelerate launch) is
    left alone. On a node without CUDA, Accelerate is told to use the CPU
    (ACCELERATE_USE_CPU), or each rank would train alone ("DistributedType.NO").
    """
    target = os.environ if env is None else env
    info = rank_info(target)
    if info.source not in ("torchrun", "single"):
        target.update(rank_env(info))
    if info.world_size > 1 and "ACCELERATE_USE_CPU" not in target and not _has_cuda():
        target["ACCELERATE_USE_CPU"] = "true"
    return info


def _has_cuda() -> bool:
    """Whether torch sees a GPU here; False without torch (nothing to distribute then)."""
    if importlib.util.find_spec("accelerate") is None:
        return True  # nobody reads ACCELERATE_USE_CPU: do not pay for importing torch
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


# -- process group -----------------------------------------------------------------------


class _State:
    info: RankInfo | None = None
    device: Any = None
    stop: bool = False
    #: the scheduler's early signal came (hpcui.node.time_limit): the limit is near
    time_limit_near: bool = False
    time_limit_callbacks: list[Callable[[], Any]] = []


def _dist() -> Any:
    """torch.distributed if torch is already loaded and a process group exists, else None."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist
    return None


def _gpu_identity(device: Any) -> str:
    """Which physical GPU this rank uses: host and UUID (indices differ per task where a
    site binds one GPU per task)."""
    import torch

    props = torch.cuda.get_device_properties(device)
    uuid = getattr(props, "uuid", None)
    where = str(uuid) if uuid else f"{os.environ.get('CUDA_VISIBLE_DEVICES', '')}#{device.index}"
    return f"{socket.gethostname()}/{where}"


def _backend_for(gpus: int, info: RankInfo, identities: Sequence[str] | None = None) -> str:
    """nccl for one GPU per rank; gloo on CPU, and where ranks share a GPU on purpose
    (developing DDP/FSDP on one GPU): NCCL refuses that ("Duplicate GPU detected"), gloo
    takes CUDA tensors. `identities`: every rank's `_gpu_identity`, where it was asked."""
    if not gpus:
        return "gloo"
    if identities is not None and len(set(identities)) < len(identities):
        if info.rank == 0:
            print(
                f"hpcui.distributed: {len(identities)} ranks share {len(set(identities))} "
                "GPU(s) and NCCL refuses two ranks on one GPU, so the process group uses gloo "
                "(tensors stay on the GPU; collectives are slower). Pass backend= to choose.",
                file=sys.stderr,
                flush=True,
            )
        return "gloo"
    return "nccl"


def _identities(store: Any, info: RankInfo, mine: str) -> list[str]:
    """Every rank's GPU identity, through the rendezvous store (blocks until all told)."""
    store.set(f"hpcui/gpu/{info.rank}", mine)
    return [store.get(f"hpcui/gpu/{r}").decode() for r in range(info.world_size)]


def setup(
    backend: str | None = None, *, timeout_s: float | None = None
) -> tuple[int, int, int, torch.device]:
    """Join the job's process group; returns (local_rank, rank, world_size, device).

    Sets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (so
    libraries that read them agree), picks nccl when each rank has its own GPU and gloo
    otherwise (CPU, or several ranks sharing a GPU: said once, on rank 0),
    and selects this rank's GPU (local_rank modulo the visible GPUs, which also works
    where the site binds one GPU per task).
    """
    info = rank_info()
    os.environ.update(
        RANK=str(info.rank),
        LOCAL_RANK=str(info.local_rank),
        WORLD_SIZE=str(info.world_size),
        LOCAL_WORLD_SIZE=str(info.local_world_size),
        MASTER_ADDR=info.master_addr,
        MASTER_PORT=str(info.master_port),
    )
    import torch
    import torch.distributed as dist

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus:
        device = torch.device("cuda", info.local_rank % gpus)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    kwargs: dict[str, Any] = {}
    if timeout_s is not None:
        kwargs["timeout"] = timedelta(seconds=timeout_s)
    if backend is None and not dist.is_initialized():
        identities = None
        if gpus and info.local_world_size > gpus:  # shared on purpose, or one GPU per task?
            store = dist.TCPStore(
                info.master_addr,
                info.master_port,
                info.world_size,
                is_master=info.rank == 0,
                timeout=timedelta(seconds=timeout_s or 1800),
            )
            identities = _identities(store, info, _gpu_identity(device))
            kwargs["store"] = store
        backend = _backend_for(gpus, info, identities)
    if not dist.is_initialized():
        if backend == "nccl":
            kwargs["device_id"] = device
        if "store" not in kwargs:
            kwargs["init_method"] = "env://"
        dist.init_process_group(
            backend=backend, rank=info.rank, world_size=info.world_size, **kwargs
        )
    _State.info, _State.device, _State.stop = info, device, False
    return info.local_rank, info.rank, info.world_size, device


def _rank() -> int:
    dist = _dist()
    if dist is not None:
        return dist.get_rank()
    return int(os.environ.get("RANK", "0") or 0)


def _comm_device() -> Any:
    """Where collective tensors must live for the current backend (cuda for nccl)."""
    import torch

    dist = _dist()
    if dist is not None and dist.get_backend() == "nccl":
        return _State.device or torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def barrier() -> None:
    """Wait for every rank (no-op outside a process group)."""
    dist = _dist()
    if dist is None:
        return
    if dist.get_backend() == "nccl":
        dist.barrier(device_ids=[_comm_device().index])
    else:
        dist.barrier()


def cleanup() -> None:
    """Leave the process group (destroy_process_group); safe to call twice."""
    dist = _dist()
    if dist is not None:
        dist.destroy_process_group()
    _State.info, _State.device = None, None


# -- rank-0 output -----------------------------------------------------------------------


def print0(*args: Any, **kwargs: Any) -> None:
    """print() on rank 0 only, flushed (job logs are files: unflushed lines get lost)."""
    if _rank() == 0:
        kwargs.setdefault("flush", True)
        print(*args, **kwargs)


def save0(obj: Any, path: str) -> None:
    """torch.save on rank 0 only (atomically: tmp file + rename), then a barrier.

    For DDP, where every rank holds the full model. For FSDP use save_sharded.
    """
    if _rank() == 0:
        import torch

        tmp = f"{path}.tmp{os.getpid()}"
        torch.save(obj, tmp)
        os.replace(tmp, path)
    barrier()


# -- stop file ---------------------------------------------------------------------------


def stop_file_path(env: Mapping[str, str] | None = None) -> str | None:
    """The file `Job.stop()` writes: `<job folder>/<job id>.stop` (None outside a job)."""
    env = os.environ if env is None else env
    if env.get("HPCUI_STOP_FILE"):
        return env["HPCUI_STOP_FILE"]
    folder = env.get("HPCUI_JOB_FOLDER") or env.get("SUBMITIT_FOLDER")
    job_id = job_id_from_env(env)
    return JobPaths(folder, job_id).stop if folder and job_id else None


def at_time_limit(callback: Callable[[], Any]) -> None:
    """Call `callback()` once when the scheduler's early signal says the time limit is near
    (the profile's `signal_delay`, 90 s by default, before it; Slurm may send it up to a
    minute earlier). It runs in the signal handler, between two lines of the job's code:
    keep it short (set a flag, save a small state), never a collective. The job then runs
    on to the limit; stop_requested() is true from that moment."""
    _State.time_limit_callbacks.append(callback)


def run_time_limit_callbacks() -> None:
    """Each at_time_limit callback once; one that raises is reported and the rest run."""
    callbacks, _State.time_limit_callbacks = _State.time_limit_callbacks, []
    for callback in callbacks:
        try:
            callback()
        except Exception as exc:  # the job goes on: its own code decides what a failure means
            print(f"hpcui: at_time_limit callback {callback!r} raised {exc!r}", file=sys.stderr)


def stop_requested() -> bool:
    """True on EVERY rank once the stop file exists or the scheduler's early signal said the
    time limit is near; call it at the same step on all ranks.

    Rank 0 looks for the file and broadcasts the answer, so all ranks leave the loop at
    the same step and no rank is left waiting in a collective (a scheduler kill of a
    running NCCL job can hang the node instead). One tiny broadcast per call: check every
    N steps, not every micro-batch. Once true it stays true.
    """
    if _State.stop:
        return True
    path = stop_file_path()
    flag = _rank() == 0 and (_State.time_limit_near or (path is not None and os.path.exists(path)))
    dist = _dist()
    if dist is not None and dist.get_world_size() > 1:
        import torch

        t = torch.tensor([1 if flag else 0], dtype=torch.int32, device=_comm_device())
        dist.broadcast(t, src=0)
        flag = bool(t.item())
    _State.stop = flag
    return flag


def lightning_callback(checkpoint: str | None = None, every_n_steps: int = 10) -> Any:
    """A Lightning Callback that ends `trainer.fit` cleanly at `job.stop()` or the time
    limit's early signal: every N steps it asks stop_requested() (every rank at the same
    step), sets `trainer.should_stop`, and with `checkpoint=` saves Lightning's own
    checkpoint there (all ranks take part) for `trainer.fit(..., ckpt_path=...)` to resume.

        ckpt = f"{cfg.out}/last.ckpt"
        trainer = L.Trainer(..., callbacks=[hd.lightning_callback(ckpt)])
        trainer.fit(model, data, ckpt_path=ckpt if os.path.exists(ckpt) else None)
    """
    try:
        from lightning.pytorch.callbacks import Callback  # the job's own: only its Lightning
    except ImportError:  # the older package name
        from pytorch_lightning.callbacks import Callback  # the job's own: only its Lightning

    def on_train_batch_end(self: Any, trainer: Any, *args: Any) -> None:
        if trainer.global_step % max(every_n_steps, 1) or not stop_requested():
            return
        trainer.should_stop = True
        if checkpoint:
            trainer.save_checkpoint(checkpoint)  # a collective in Lightning: every rank
        if trainer.global_rank == 0:
            print(f"hpcui: stopping at step {trainer.global_step}", flush=True)

    # made with type(): Lightning is not installed (nor typed) where hpcui is checked
    stop = type("HpcuiStop", (Callback,), {"on_train_batch_end": on_train_batch_end})
    return stop()


def transformers_callback(every_n_steps: int = 10) -> Any:
    """A Hugging Face `TrainerCallback` that ends `trainer.train()` cleanly at `job.stop()`
    or the time limit's early signal: every N steps it asks stop_requested() (every rank at
    the same step) and sets the Trainer's own `should_save` and `should_training_stop`, so
    the Trainer writes `output_dir/checkpoint-<step>` (all ranks take part) and returns.

        trainer = Trainer(..., callbacks=[hd.transformers_callback()])
        trainer.train(resume_from_checkpoint=bool(get_last_checkpoint(args.output_dir)))
    """
    from transformers import TrainerCallback  # the job's own: only its transformers

    def on_step_end(self: Any, args: Any, state: Any, control: Any, **_: Any) -> Any:
        if state.global_step % max(every_n_steps, 1) or not stop_requested():
            return control
        control.should_save = True
        control.should_training_stop = True
        if state.is_world_process_zero:
            print(f"hpcui: stopping at step {state.global_step}", flush=True)
        return control

    # made with type(): transformers is not installed (nor typed) where hpcui is checked
    stop = type("HpcuiStop", (TrainerCallback,), {"on_step_end": on_step_end})
    return stop()


# -- sharded checkpoints -----------------------------------------------------------------


def checkpoint_path(root: str, step: int) -> str:
    """`root/step_00000100`: names that sort by step and that latest_checkpoint finds."""
    return os.path.join(root, f"step_{step:08d}")


def latest_checkpoint(root: str) -> str | None:
    """The newest complete checkpoint under `root` (DCP's `.metadata` written), or None."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return None
    found = []
    for name in names:
        m = _CKPT.match(name)
        if m and os.path.exists(os.path.join(root, name, ".metadata")):
            found.append((int(m.group(1)), name))
    return os.path.join(root, max(found)[1]) if found else None


def _optimizers(optimizer: Any) -> Any:
    return [] if optimizer is None else optimizer


def save_sharded(
    path: str, model: Any, optimizer: Any = None, *, extra: dict[str, Any] | None = None
) -> None:
    """Every rank writes its shard of model (+ optimizer) state with torch.distributed.checkpoint.

    `extra` (step, RNG seeds, config: anything picklable) is stored once and returned by
    load_sharded. Call on ALL ranks: it is a collective.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        get_state_dict,
    )

    msd, osd = get_state_dict(model, _optimizers(optimizer))
    state: dict[str, Any] = {"model": msd, "extra": io.BytesIO(pickle.dumps(extra or {}))}
    if optimizer is not None:
        state["optim"] = osd
    dcp.save(state, checkpoint_id=path)


def load_sharded(path: str, model: Any, optimizer: Any = None) -> dict[str, Any]:
    """Load a save_sharded checkpoint into `model` (+ optimizer) on ALL ranks; returns `extra`.

    The world size may differ from the saving job's: DCP reshards (4 ranks -> 2 works).
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        get_state_dict,
        set_state_dict,
    )

    if not os.path.exists(os.path.join(path, ".metadata")):
        raise RuntimeError(
            f"{path} is not a complete checkpoint (no .metadata): use latest_checkpoint(root) "
            "to find the newest complete one."
        )
    msd, osd = get_state_dict(model, _optimizers(optimizer))
    state: dict[str, Any] = {"model": msd, "extra": io.BytesIO()}
    if optimizer is not None:
        state["optim"] = osd
    dcp.load(state, checkpoint_id=path)
    set_state_dict(
        model,
        _optimizers(optimizer),
        model_state_dict=state["model"],
        optim_state_dict=state.get("optim", {}),
    )
    state["extra"].seek(0)
    return pickle.loads(state["extra"].read())
