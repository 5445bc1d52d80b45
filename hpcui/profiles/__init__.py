"""Site profiles: each site's rules as data (node shape, GPU directive, partitions)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hpcui.errors import ConfigError


class Partition(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    max_time_s: int | None = None
    max_gpus_per_node: int | None = None
    max_nodes: int | None = None
    gpu: bool = False


class Profile(BaseModel):
    """What hpcui knows about one machine. Values marked [?] in SITES.md are overridable."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    scheduler: Literal["slurm", "pbs", "local"] = "slurm"
    gpus_per_node: int = 0
    cores_per_node: int = 1
    mem_per_node_mb: int | None = None
    #: how GPUs are asked for: `gres` -> --gres=gpu[:type]:N, `gpus-per-node` -> --gpus-per-node=N
    gpu_directive: Literal["gres", "gpus-per-node"] = "gres"
    gpu_type: str | None = None
    cpus_per_gpu: int | None = None
    mem_per_gpu_mb: int | None = None
    partitions: list[Partition] = Field(default_factory=list)
    default_partition: str | None = None
    gpu_partition: str | None = None
    requires_account: bool = False
    interconnect_suffix: str = ""
    #: the site's quota tool (e.g. "bsc_quota"); None: try the known tools in order
    quota_command: str | None = None

    def partition(self, name: str | None) -> Partition | None:
        for p in self.partitions:
            if p.name == name:
                return p
        return None


@cache
def load_profile(name: str) -> Profile:
    """Load a built-in profile by name (data files shipped inside the package)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover
        import tomli as tomllib
    path = resources.files(__package__).joinpath(f"{name}.toml")
    if not path.is_file():
        known = sorted(
            p.name[:-5] for p in resources.files(__package__).iterdir() if p.name.endswith(".toml")
        )
        raise ConfigError(
            f"No built-in profile {name!r} (known: {', '.join(known)}). "
            "Fix `profile = ...` in your cluster config."
        )
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return Profile(name=name, **data)
