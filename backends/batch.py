"""The scheduler-neutral description of one batch job, filled in by hpcui, rendered here."""

from __future__ import annotations

from dataclasses import dataclass, field

from hpcui.backends.containers import ContainerLaunch


@dataclass(frozen=True)
class BatchSpec:
    """Everything a batch script needs; numbers are already resolved against the profile."""

    folder: str  # absolute remote job folder (submitit's folder)
    token: str  # client token: rides in the comment, makes submit idempotent
    name: str
    nodes: int = 1
    tasks_per_node: int = 1
    cpus_per_task: int = 1
    gpus_per_node: int = 0
    gpu_directive: str = "gres"  # "gres" -> --gres=gpu[:type]:N ; "gpus-per-node" ; PBS "ngpus"
    gpu_type: str | None = None
    mem_mb: int | None = None
    time_s: int | None = None
    partition: str | None = None
    qos: str | None = None
    account: str | None = None
    constraint: str | None = None
    exclusive: bool = False
    array_size: int | None = None  # None: a single job; N: array 0..N-1
    array_parallelism: int | None = None
    extra: tuple[str, ...] = ()
    after_ok: tuple[str, ...] = ()  # start once these jobs completed successfully
    python: str = "python3"
    setup: tuple[str, ...] = ()
    pythonpath: tuple[str, ...] = ()  # e.g. the runtime bundle zip
    #: (path, sha256) the script checks before it runs anything (the runtime bundle)
    verified: tuple[tuple[str, str], ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    signal_delay_s: int = 90  # USR2 this long before the time limit: submitit checkpoints
    launcher: str = "submitit"  # "torchrun": one torchrun per node starts a rank per GPU
    max_restarts: int = 0  # torchrun --max-restarts
    #: a segment of a chain (backends/chain.py): skip when done, resume, cancel the rest
    chain: bool = False
    #: the hpcui environment the job's Python is in: touched at start (its last use)
    env_folder: str = ""
    #: run the tasks' Python inside this prepared image (backends/containers.py)
    image: ContainerLaunch | None = None


def format_mem(mb: int) -> str:
    """`480G` when whole gigabytes, else `1500M`: as the sites' example scripts write --mem."""
    return f"{mb // 1024}G" if mb % 1024 == 0 else f"{mb}M"


def format_duration(seconds: int) -> str:
    """Slurm/PBS `[D-]HH:MM:SS`, rounded up to whole minutes as Slurm does anyway."""
    minutes = -(-seconds // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    core = f"{hours:02d}:{mins:02d}:00"
    return f"{days}-{core}" if days else core
