"""What this machine offers the embedded `local` cluster: cores, memory and GPUs.

Detected at run time, once per process, so that `submit(fn, gpus=4)` on a GPU
workstation is checked against the GPUs that are really there (and visible: an
already-set CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES is honoured, as a job started
from this shell would see it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Literal

from hpcui.backends.gpu_smi import (
    GpuQueryError,
    GpuReading,
    nvidia_query_command,
    parse_nvidia_query,
    parse_rocm_json,
    rocm_query_command,
    visible,
)
from hpcui.profiles import Profile

SMI_TIMEOUT_S = 10.0
#: the variable that selects GPUs for each vendor's runtime
VISIBILITY = {"nvidia": "CUDA_VISIBLE_DEVICES", "amd": "ROCR_VISIBLE_DEVICES"}

Runner = Callable[[list[str]], tuple[int, str, str]]


@dataclass(frozen=True)
class LocalMachine:
    """The machine's shape as the local cluster uses it."""

    cores: int
    mem_mb: int | None
    vendor: Literal["nvidia", "amd"] | None = None
    gpus: tuple[GpuReading, ...] = ()
    #: why there is no GPU (or what limited them), said to the user where it matters
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def visibility_var(self) -> str | None:
        return VISIBILITY[self.vendor] if self.vendor else None

    @property
    def gpu_ids(self) -> tuple[str, ...]:
        """What a job's visibility variable lists: NVIDIA UUIDs (the same GPU whatever
        CUDA_DEVICE_ORDER says), AMD indices."""
        if self.vendor == "nvidia":
            return tuple(g.uuid or str(g.index) for g in self.gpus)
        return tuple(str(g.index) for g in self.gpus)

    @property
    def gpu_model(self) -> str | None:
        names = sorted({g.name for g in self.gpus if g.name})
        return " + ".join(names) if names else None

    def summary(self) -> str:
        mem = f", {self.mem_mb // 1024} GiB" if self.mem_mb else ""
        gpus = f", {len(self.gpus)}x {self.gpu_model or 'GPU'}" if self.gpus else ", no GPU"
        return f"{self.cores} cores{mem}{gpus}"


def _run(argv: list[str]) -> tuple[int, str, str]:
    try:
        res = subprocess.run(
            argv, capture_output=True, text=True, timeout=SMI_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return 124, "", f"{argv[0]} did not answer in {SMI_TIMEOUT_S:g} s"
    except OSError as exc:
        return 127, "", f"{argv[0]}: {exc.strerror or exc}"
    return res.returncode, res.stdout, res.stderr


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _mem_mb() -> int | None:
    """Physical memory, or the cgroup's limit when a container or session sets a lower one."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return None
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as f:
            limit = f.read().strip()
        if limit.isdigit():
            total = min(total, int(limit))
    except OSError:
        pass
    return total >> 20


def _gpus(
    env: Mapping[str, str], which: Callable[[str], str | None], run: Runner
) -> tuple[Literal["nvidia", "amd"] | None, tuple[GpuReading, ...], tuple[str, ...]]:
    notes: list[str] = []
    tools: list[tuple[Literal["nvidia", "amd"], list[str], Callable[[str], list[GpuReading]]]] = [
        ("nvidia", nvidia_query_command(), parse_nvidia_query),
        ("amd", rocm_query_command(), parse_rocm_json),
    ]
    for vendor, argv, parse in tools:
        if which(argv[0]) is None:
            notes.append(f"{argv[0]} not found")
            continue
        rc, out, err = run(argv)
        if rc != 0:
            first = (err.strip() or out.strip()).splitlines()[:1]
            notes.append(f"{argv[0]} failed (exit {rc}{': ' + first[0] if first else ''})")
            continue
        try:
            found = parse(out)
        except GpuQueryError as exc:
            notes.append(f"{argv[0]}: {exc}")
            continue
        if not found:
            notes.append(f"{argv[0]} lists no GPU")
            continue
        var = VISIBILITY[vendor]
        shown = visible(found, env.get(var))
        if env.get(var) is not None:
            notes.append(f"{var}={env[var]} leaves {len(shown)} of {len(found)} GPU(s)")
        return vendor, tuple(shown), tuple(notes)
    return None, (), tuple(notes)


def detect(
    env: Mapping[str, str] | None = None,
    which: Callable[[str], str | None] = shutil.which,
    run: Runner = _run,
) -> LocalMachine:
    """Look now (tests pass their own env, which and run)."""
    env = os.environ if env is None else env
    vendor, gpus, notes = _gpus(env, which, run)
    return LocalMachine(cores=_cores(), mem_mb=_mem_mb(), vendor=vendor, gpus=gpus, notes=notes)


@cache
def this_machine() -> LocalMachine:
    """This machine as this process first saw it."""
    return detect()


def scheduler_kind(profile: Profile, scheduler: str = "auto") -> str:
    """slurm, pbs or local: the config's choice, else the profile's, where the `local`
    profile means Slurm when sbatch is on PATH and plain processes otherwise."""
    if scheduler != "auto":
        return scheduler
    if profile.scheduler == "local" and shutil.which("sbatch"):
        return "slurm"
    return profile.scheduler


def describe(profile: Profile, machine: LocalMachine | None = None) -> Profile:
    """The `local` profile filled in with this machine's shape (values a user's profile
    table already sets are kept)."""
    m = machine or this_machine()
    detected = {
        "gpus_per_node": len(m.gpus),
        "gpu_model": m.gpu_model,
        "cores_per_node": m.cores,
        "mem_per_node": m.mem_mb,
    }
    update: dict[str, object] = {k: v for k, v in detected.items() if getattr(profile, k) is None}
    said = [f"no GPU: {'; '.join(m.notes) or 'none found'}"] if not m.gpus else list(m.notes)
    if said:  # each once, also when a described profile is described again
        update["notes"] = [*profile.notes, *(n for n in said if n not in profile.notes)]
    update["description"] = f"this machine ({m.summary()}): local processes, no scheduler"
    return profile.model_copy(update=update)
