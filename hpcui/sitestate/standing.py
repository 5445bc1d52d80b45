"""What is free now and where the user stands: free CPUs/GPUs per partition (sinfo --Node),
fair share and pending jobs' priority (sshare, sprio), and the project's allocation from
the site's own tool (lumi-allocations, bsc_acct, jutil, csc-projects)."""

from __future__ import annotations

from pydantic import Field

from hpcui.backends.allocations import ALLOCATION_COMMANDS, ALLOCATION_PARSERS
from hpcui.backends.model import Model
from hpcui.backends.records import (
    AllocationEntry,
    FairShare,
    JobPriority,
    NodeInfo,
    PartitionFree,
)
from hpcui.backends.slurm.free import free_by_partition
from hpcui.sitestate.budget import Budget
from hpcui.transport.base import Transport


class FreeReport(Model):
    """Free capacity now: per partition, and the nodes behind it."""

    partitions: list[PartitionFree]
    nodes: list[NodeInfo]

    @classmethod
    def of(cls, nodes: list[NodeInfo]) -> FreeReport:
        return cls(partitions=free_by_partition(nodes), nodes=nodes)


class AllocationReport(Model):
    """The site tool's answer: parsed where hpcui knows its layout, else its text."""

    tool: str
    entries: list[AllocationEntry] = Field(default_factory=list)
    text: str = Field("", description="the tool's output as printed (tools without a parser)")
    error: str = ""


class Standing(Model):
    fair_share: list[FairShare]
    pending: list[JobPriority]
    note: str = ""
    allocation: AllocationReport | None = Field(
        None, description="None where the profile names no allocation tool"
    )
    ledger: Budget | None = Field(
        None, description="spent / in flight / committed / left of the user's accounts"
    )


def fetch_allocation(transport: Transport, tool: str) -> AllocationReport:
    """Run the site's allocation tool (ONE call); a missing or failing tool is reported,
    not raised: fair share and priority are still worth showing."""
    argv = ALLOCATION_COMMANDS.get(tool)
    if argv is None:
        return AllocationReport(tool=tool, error=f"hpcui does not know the tool {tool!r}")
    res = transport.run(argv)
    if not res.ok:
        said = (res.stderr.strip() or res.stdout.strip())[-300:] or f"exit status {res.exit_status}"
        return AllocationReport(
            tool=tool, error=f"`{' '.join(argv)}` failed: {said} (is it on PATH in a login shell?)"
        )
    parser = ALLOCATION_PARSERS.get(tool)
    if parser is None:
        return AllocationReport(tool=tool, text=res.stdout)
    try:
        return AllocationReport(tool=tool, entries=parser(res.stdout))
    except ValueError as exc:
        return AllocationReport(tool=tool, text=res.stdout, error=str(exc))
