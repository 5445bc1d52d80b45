"""The stable `--json` output of every command: one type per command (docs/cli.md).

Records that already cross a boundary in the core (QueueJob, HistoryJob, QuotaReport,
Module, PartitionInfo, LogChunk, Metrics, Allocation, Profile) are printed as they are; the
models here only add what is the CLI's own (a submit record, a result, a check).
Adding a field is compatible; renaming or removing one is not.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, TypeAdapter

from hpcui.backends.model import Model
from hpcui.backends.modules import Module
from hpcui.backends.records import PartitionInfo, RemoteFile, StartEstimate
from hpcui.backends.states import JobState
from hpcui.clusters.job_view import JobView
from hpcui.jobs.cleanup import CleanReport
from hpcui.logs.follow import LogChunk
from hpcui.metrics import Metrics
from hpcui.profiles import Profile
from hpcui.request.allocation import Allocation
from hpcui.request.cost import Cost
from hpcui.sitestate import (
    FreeReport,
    HistoryJob,
    LedgerLine,
    QueueJob,
    QuotaReport,
    Standing,
)


class ClusterCheck(Model):
    """`clusters --check`: could we log in, and can the remote Python run our pickles?"""

    ok: bool
    seconds: float = Field(description="wall time of the check (connect + one probe)")
    python: str | None = Field(None, description="remote Python version, e.g. 3.11.7")
    error: str | None = None
    exit_code: int = Field(0, description="the exit code this error maps to (docs/cli.md)")
    needs_code: bool = Field(
        False,
        description="the login asks a password or 2FA code and there is no terminal to "
        "ask it in: not checked, not failed (run it in a terminal)",
    )
    missing_modules: list[str] = Field(
        default_factory=list, description="modules your `setup` lines load that the site lacks"
    )


class ClusterRow(Model):
    name: str
    host: str | None = Field(None, description="None: this machine, no SSH")
    profile: str | None = None
    default: bool
    check: ClusterCheck | None = None


class ProfileRow(Model):
    name: str
    scheduler: str
    description: str = ""
    gpus_per_node: int | None = None
    gpu_model: str | None = None
    cores_per_node: int | None = None
    partitions: list[str] = Field(default_factory=list)
    retired: bool = False
    #: `built-in`: shipped with hpcui; `user`: a [profiles.NAME] table of the config
    source: Literal["built-in", "user"] = "built-in"
    #: a user profile's `base` (None: a full profile, or a built-in)
    base: str | None = None
    #: a user profile that changes the built-in of the same name (`base` = its own name)
    shadows_builtin: bool = False


class RegistryJob(Model):
    """A job of the local registry (`jobs --registry`): what hpcui remembers, no network."""

    cluster: str
    job_id: str | None
    token: str
    array_index: int = Field(description="-1: not an array element")
    name: str
    folder: str
    num_tasks: int
    state: JobState = Field(description="the last state seen; may be stale")
    state_raw: str
    submitted_at: datetime
    updated_at: datetime


class ErrorInfo(Model):
    type: str = Field(description="JobFailedError, JobCancelledError, JobLostError, ...")
    message: str
    remote_traceback: str | None = None
    stderr_tail: str | None = None


class ResultOutput(Model):
    cluster: str
    job_id: str
    state: JobState
    ok: bool
    value: Any = Field(
        None, description="the return value when JSON can carry it (else null, see value_repr)"
    )
    value_repr: str | None = Field(None, description="repr() of the return value")
    error: ErrorInfo | None = None


class SubmitOutput(Model):
    cluster: str
    job_id: str
    name: str
    folder: str = Field(description="the job folder on the cluster")
    num_tasks: int
    state: JobState
    allocation: str = Field(description="what was asked of the scheduler (one line)")
    advice: list[str] = Field(default_factory=list)
    segments: list[str] = Field(
        default_factory=list,
        description="with --chain: every segment's job id, in order (job_id is the first)",
    )
    result: ResultOutput | None = Field(None, description="with --wait or --follow")


class WaitOutput(Model):
    """One job `hpcui wait` waited for."""

    cluster: str
    job_id: str
    name: str
    state: JobState = Field(description="final, or the last known state when it timed out")
    ended: bool


#: `hpcui show --json`: the core's one view of a job (hpcui.clusters.job_view)
ShowOutput = JobView


class ActionOutput(Model):
    cluster: str
    job_id: str
    ok: bool
    message: str


class TransferOutput(Model):
    """One copy (`download`, `upload`, `sync`): files copied now and skipped as already
    there, bytes moved now of the bytes it had to copy, links not copied, files verified."""

    cluster: str
    source: str
    target: str
    copied: int
    skipped: int
    moved_bytes: int
    total_bytes: int
    links_not_copied: list[str]
    verified: int
    seconds: float


class ForwardOutput(Model):
    """One forward: connections to `local` reach `node`:`remote_port` of the job."""

    cluster: str
    job_id: str
    node: str
    remote_port: int
    local: str  # 127.0.0.1:PORT
    connections: int = 0
    url: str | None = None  # the service's address here (jupyter: with its token)


class SshHostOutput(Model):
    """One running job's node as an ssh host (`hpcui ssh-config`): `ssh HOST` reaches it."""

    host: str  # hpcui-CLUSTER-JOB
    cluster: str
    job_id: str
    node: str
    user: str | None = None
    key_pinned: bool  # False: ssh records the node's key on first use


class ScriptOutput(Model):
    cluster: str
    allocation: Allocation
    summary: str
    script: str = Field(description="the batch script; folder and token are placeholders")
    estimates: list[StartEstimate] = Field(
        default_factory=list, description="with --estimate: when it would start, per partition"
    )


class EstimateOutput(Model):
    """`submit --estimate` / `run --estimate`: when it would start (nothing submitted)."""

    cluster: str
    summary: str
    estimates: list[StartEstimate]
    cost: Cost | None = Field(None, description="at most, at the time limits; None: unknown")
    ledger: list[LedgerLine] = Field(
        default_factory=list, description="the limits it counts against, with what is left"
    )


class ClusterQueueJob(QueueJob):
    """A queue row of `hpcui jobs -c a,b` (several clusters): which cluster it is on."""

    cluster: str


class ClusterHistoryJob(HistoryJob):
    """A history row of `hpcui jobs --history -c a,b`: which cluster it is on."""

    cluster: str


class AgentCluster(Model):
    name: str
    transport: str = Field(description="how it is reached, e.g. ssh hpcuser@host:22")
    connected: bool
    connects: int = Field(description="logins so far (1 = the first one only)")


class AgentStatus(Model):
    """`hpcui agent status` (running: false and nothing else when none serves this config)."""

    running: bool
    socket: str
    pid: int | None = None
    version: str | None = None
    persist_s: float | None = None
    idle_s: float | None = None
    expires_in_s: float | None = Field(None, description="None: a request is in flight")
    active: int | None = None
    served: int | None = None
    refused: int | None = Field(None, description="connections of other users turned away")
    config: str | None = None
    clusters: list[AgentCluster] = Field(default_factory=list)
    forwards: list[str] = Field(default_factory=list, description="ports it forwards")


class SweepOutput(Model):
    """`sweep` (start), `sweep resume`: what is kept and what this call submitted."""

    cluster: str
    name: str
    elements: int = Field(description="configurations the sweep holds")
    submitted: list[str] = Field(description="job ids this call submitted (none: nothing new)")
    counts: dict[str, int] = Field(description="elements per state; NOT_SUBMITTED: never run")


class SweepTable(Model):
    """`sweep show`: one row per element (docs/sweeps.md names the columns)."""

    cluster: str
    name: str
    columns: list[str]
    rows: list[dict[str, Any]]


class SweepRow(Model):
    """`sweep list`: one sweep kept on this machine."""

    cluster: str
    name: str
    function: str
    elements: int


class TrackedJob(Model):
    """One track= job as `hpcui track list --json` gives it."""

    cluster: str
    job_id: str
    name: str
    track: str
    mirror: str
    files: int
    bytes: int
    final: bool
    mlflow: list[str]
    wandb_runs: list[str]
    wandb_synced: list[str]


def cluster_row_type(args: argparse.Namespace) -> type[ClusterQueueJob | ClusterHistoryJob]:
    """One row of `hpcui jobs --json` over several clusters."""
    return ClusterHistoryJob if getattr(args, "history", None) else ClusterQueueJob


def output_type(args: argparse.Namespace) -> Any:
    """The type a command's --json prints, given its options."""
    cmd = args.command
    if cmd == "jobs":
        if getattr(args, "registry", False):
            return list[RegistryJob]
        from hpcui.cli.common import several_clusters

        if several_clusters(getattr(args, "cluster", None)):
            return list[cluster_row_type(args)]  # type: ignore[misc]  # a model made at run time
        return list[HistoryJob] if getattr(args, "history", None) else list[QueueJob]
    if cmd == "profiles":
        return Profile if getattr(args, "name", None) else list[ProfileRow]
    if cmd == "usage":
        from hpcui.jobs.usage import UsageReport

        return UsageReport
    if cmd in ("submit", "run") and getattr(args, "estimate", False):
        return EstimateOutput
    if cmd == "sweep":
        action = getattr(args, "target", "")
        return {"show": SweepTable, "list": list[SweepRow]}.get(action, SweepOutput)
    if cmd in ("init", "add"):
        from hpcui.clusters.onboarding import Proposal

        return Proposal
    if cmd == "env":
        from hpcui.submission.env_store import EnvInfo

        action = getattr(args, "action", "list")
        return {"list": list[EnvInfo], "rm": list[str]}.get(action, EnvInfo)
    return {
        "submit": SubmitOutput,
        "run": SubmitOutput,
        "show": ShowOutput,
        "logs": LogChunk,
        "metrics": list[Metrics],
        "result": ResultOutput,
        "wait": list[WaitOutput],
        "cancel": list[ActionOutput],
        "hold": list[ActionOutput],
        "release": list[ActionOutput],
        "requeue": list[ActionOutput],
        "update": ActionOutput,
        "resubmit": ActionOutput,
        "stop": ActionOutput,
        "free": FreeReport,
        "files": list[RemoteFile],
        "download": TransferOutput,
        "upload": TransferOutput,
        "sync": TransferOutput,
        "budget": Standing,
        "quota": QuotaReport,
        "clean": CleanReport,
        "modules": list[Module],
        "partitions": list[PartitionInfo],
        "clusters": list[ClusterRow],
        "script": ScriptOutput,
        "agent": AgentStatus,
        "forward": list[ForwardOutput],
        "jupyter": list[ForwardOutput],
        "tensorboard": list[ForwardOutput],
        "ssh-config": list[SshHostOutput],
        "track": list[TrackedJob],
    }[cmd]


def schema(kind: Any) -> dict[str, Any]:
    return TypeAdapter(kind).json_schema(mode="serialization")


def print_schema(args: argparse.Namespace) -> None:
    sys.stdout.write(json.dumps(schema(output_type(args)), indent=2) + "\n")


def jsonable(value: Any) -> tuple[Any, bool]:
    """(value, True) when JSON can carry it exactly; (None, False) otherwise."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return None, False
    return value, True
