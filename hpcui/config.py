"""User configuration: which clusters exist and how to reach them (TOML)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from hpcui.backends.model import Model
from hpcui.common.config_path import config_path
from hpcui.common.units import parse_time, persist_seconds
from hpcui.errors import ConfigError
from hpcui.profiles import resolve_profile

LOCAL = "local"
#: what a [clusters.NAME] may be called
CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class ClusterConfig(Model):
    """One `[clusters.NAME]` table. No `host` means this machine (no SSH)."""

    model_config = ConfigDict(extra="forbid")

    name: str = ""
    host: str | None = None
    ssh_config: str | None = None
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    proxy_jump: str | None = None
    login_shell: bool = True
    #: a command whose last output line answers the login's 2FA code prompt (e.g.
    #: `oathtool --totp -b @FILE`, a password manager's CLI): unattended logins where a
    #: site allows them. Only the command lives here, never the secret (docs/cli.md)
    totp_command: str | list[str] | None = None
    profile: str | None = None
    scheduler: Literal["auto", "slurm", "pbs", "local"] = "auto"
    #: None: the profile's `python`, else "python3" (see `Cluster.python`)
    python: str | None = None
    #: None: the profile's `setup` lines (see `Cluster.setup`); [] means none at all
    setup: list[str] | None = None
    remote_base: str = "~/.hpcui"
    #: "push": a `tail -F` per followed log on the login node sends new lines as they come
    #: (one exec channel each, same connection); "poll": a stat + ranged read every
    #: 0.1-2 s, for sites that do not want a long-running reader on their login nodes
    log_follow: Literal["push", "poll"] = "push"
    #: remove the folders of ended jobs submitted longer ago than this (e.g. "30d"),
    #: fetched or not: `hpcui clean --older-than KEEP` at most once a day per cluster, in
    #: the background after a submit; None: only `hpcui clean` by hand
    keep: str | None = None
    #: refuse an array, sweep or chain (before anything queues) whose cost at its time
    #: limits exceeds this share of what its account has left in Slurm's ledger
    #: (GrpTRESMins less spent, in flight and committed: `hpcui budget`); 0: never check
    budget_guard: float = Field(1.0, ge=0)

    @field_validator("keep")
    @classmethod
    def _keep_is_a_duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_time(value)  # ValueError with the accepted forms
        return value

    defaults: dict[str, str | int | bool] = Field(default_factory=dict)
    #: deep-merged over the built-in profile (see docs/profiles.md), e.g. partition limits
    profile_overrides: dict[str, Any] = Field(default_factory=dict)
    #: the config's `[profiles.NAME]` tables (set by `Config`, not a key of the table)
    _user_profiles: dict[str, dict[str, Any]] = PrivateAttr(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return self.host is None

    @property
    def user_profiles(self) -> dict[str, dict[str, Any]]:
        """The user profiles of the config this cluster comes from (`profile` may name one)."""
        return self._user_profiles


class AgentConfig(Model):
    """`[agent]`: how long the per-user agent keeps connections after the last call."""

    model_config = ConfigDict(extra="forbid")

    #: "10m", "90s", seconds; 0: no agent (every call connects by itself)
    persist: str | int | float = "10m"

    @field_validator("persist")
    @classmethod
    def _persist_is_a_duration(cls, value: str | int | float) -> str | int | float:
        persist_seconds(value)  # ValueError with the accepted forms
        return value

    @property
    def persist_s(self) -> float:
        return persist_seconds(self.persist, warn=False)  # said once, when the file was read


#: what `hpcui mcp` offers an AI agent only when `[mcp] allow` names it (it changes things)
MCP_ACTIONS = ("submit", "cancel", "hold", "release", "download")


class McpConfig(Model):
    """`[mcp]`: what the MCP server (`hpcui mcp`) may do beyond reading."""

    model_config = ConfigDict(extra="forbid")

    #: tools that change something, offered to MCP clients: names of MCP_ACTIONS, or "all"
    allow: list[str] = Field(default_factory=list)

    @field_validator("allow")
    @classmethod
    def _known_actions(cls, value: list[str]) -> list[str]:
        bad = [v for v in value if v not in (*MCP_ACTIONS, "all")]
        if bad:
            raise ValueError(
                f"[mcp] allow: unknown {', '.join(map(repr, bad))} (choose from "
                f'{", ".join(MCP_ACTIONS)}, or "all")'
            )
        return value

    def allowed(self) -> set[str]:
        return set(MCP_ACTIONS) if "all" in self.allow else set(self.allow)


class Config(Model):
    model_config = ConfigDict(extra="forbid")

    default: str | None = None
    clusters: dict[str, ClusterConfig] = Field(default_factory=dict)
    #: user profiles, `[profiles.NAME]` tables (a full profile, or `base = "lumi-g"` + changes)
    profiles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: the app's key bindings by binding id, `[keys]` table: `jobs.cancel = "x"` (TOML reads
    #: the dotted id as a nested table; `load_config` flattens it back to "jobs.cancel")
    keys: dict[str, str] = Field(default_factory=dict)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    path: str | None = None

    @model_validator(mode="after")
    def _share_profiles(self) -> Config:
        for c in self.clusters.values():
            c._user_profiles = self.profiles
        return self

    def cluster(self, name: str | None) -> ClusterConfig:
        name = name or self.default or LOCAL
        try:
            return self.clusters[name]
        except KeyError:
            known = ", ".join(sorted(self.clusters)) or "none"
            where = self.path or "the built-in defaults"
            raise ConfigError(
                f"No cluster named {name!r} in {where} (known: {known}). Add a "
                f'[clusters.{name}] table with at least `host = "..."`, or pick a known one.'
            ) from None


def _flat_keys(table: Any, p: Path, prefix: str = "") -> dict[str, Any]:
    """`[keys]` with `jobs.cancel = "x"` parses as {"jobs": {"cancel": "x"}}: join it back."""
    if not isinstance(table, dict):
        raise ConfigError(f'{p}: `keys` must be a table: [keys] then lines like jobs.cancel = "x".')
    flat: dict[str, Any] = {}
    for name, value in table.items():
        if isinstance(value, dict):
            flat.update(_flat_keys(value, p, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = value
    return flat


def load_config(path: str | Path | None = None) -> Config:
    """Read the config; a missing default file gives only the embedded `local` cluster."""
    import tomllib  # Python 3.11+ (requires-python)

    p = Path(path).expanduser() if path else config_path()
    data: dict = {}
    if p.exists():
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{p} is not valid TOML: {exc}. Fix the file.") from exc
    elif path or os.environ.get("HPCUI_CONFIG"):
        raise ConfigError(f"Config file {p} does not exist: check HPCUI_CONFIG or the path given.")
    unknown = sorted(set(data) - {"default", "clusters", "profiles", "keys", "agent", "mcp"})
    if unknown:
        raise ConfigError(
            f"{p}: unknown top-level key(s) {', '.join(unknown)}; expected default, "
            "[clusters.NAME], [profiles.NAME], [keys], [agent] and [mcp]. Check the spelling."
        )
    clusters = data.get("clusters", {})
    if not isinstance(clusters, dict):
        raise ConfigError(f"{p}: `clusters` must be a table of [clusters.NAME] tables.")
    clusters.setdefault(LOCAL, {"profile": LOCAL})
    bad = [n for n in clusters if not CLUSTER_NAME.fullmatch(n)]
    if bad:  # names become file names (the log spool) and words on command lines
        raise ConfigError(
            f"{p}: cluster name(s) {', '.join(map(repr, bad))} may use only letters, digits, "
            "'.', '_' and '-' (starting with a letter or digit). Rename those tables."
        )
    try:
        for name, table in clusters.items():
            if isinstance(table, dict):
                table["name"] = name
        cfg = Config(
            default=data.get("default"),
            clusters=clusters,
            profiles=data.get("profiles", {}),
            keys=_flat_keys(data.get("keys", {}), p),
            agent=data.get("agent", {}),
            mcp=data.get("mcp", {}),
            path=str(p),
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise ConfigError(f"{p}: {loc}: {first['msg']}. Fix that entry.") from exc
    if cfg.default and cfg.default not in cfg.clusters:
        raise ConfigError(
            f"{p}: default = {cfg.default!r} names no [clusters.{cfg.default}] table."
        )
    if cfg.profiles:
        for name in cfg.profiles:  # a bad table fails here, naming it, not at first use
            try:
                resolve_profile(name, cfg.profiles)
            except ConfigError as exc:
                raise ConfigError(f"{p}: {exc}") from None
    return cfg
