"""Several cluster tables for one login: each job once.

Two `[clusters.*]` tables for the same machine and account (say one per Python
environment) each list the same `squeue --me`, so every job showed twice (and its rows
disagreed for seconds: PENDING under one, CANCELLED under the other). A site is what a
table logs in to — host, port and user as ssh resolves them; a table without a host is
this machine. A job belongs to the table that submitted it (the registry says which); any other
job of the user goes under the site's first table (config order) that is listed. The app's
table and `hpcui jobs -c ...` both ask here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from hpcui.config import ClusterConfig
from hpcui.errors import HpcuiError
from hpcui.store.registry import JobRecord
from hpcui.transport.ssh.config import resolve


class _HasJobId(Protocol):
    @property
    def job_id(self) -> str: ...


T = TypeVar("T", bound=_HasJobId)
Site = tuple[str, int, str]


def site_of(cfg: ClusterConfig) -> Site:
    """Who logs in where, as ssh resolves it (an alias of the ssh config to its HostName,
    Port and User): the same tuple means the same `squeue --me`. A jump host is only the
    way there. A table without a host is this machine."""
    if not cfg.host:
        return ("", 0, "")
    try:
        target = resolve(
            cfg.host, ssh_config=cfg.ssh_config, user=cfg.user, port=cfg.port,
            proxy_jump=cfg.proxy_jump,
        )  # fmt: skip
    except HpcuiError:  # an unreadable ssh config: connecting says so; here the table stays apart
        return (cfg.host.lower(), cfg.port or 22, cfg.user or "")
    return (target.hostname.lower(), target.port, target.user)


def shared_sites(configs: Mapping[str, ClusterConfig]) -> dict[Site, list[str]]:
    """The sites more than one table logs in to, with their tables in config order (reads
    the ssh config files: once per config, not per refresh)."""
    groups: dict[Site, list[str]] = {}
    for name, cfg in configs.items():
        groups.setdefault(site_of(cfg), []).append(name)
    return {site: names for site, names in groups.items() if len(names) > 1}


def one_per_site(
    by_cluster: Mapping[str, Sequence[T]],
    groups: Mapping[Site, list[str]],
    records: Iterable[JobRecord],
) -> dict[str, list[T]]:
    """`by_cluster` (each table's listing) with each job of a shared site (`groups`, from
    `shared_sites`) under one table: the one that submitted it, else the site's first
    table that is listed."""
    out = {name: list(rows) for name, rows in by_cluster.items()}
    listed = {site: [n for n in names if n in by_cluster] for site, names in groups.items()}
    listed = {site: names for site, names in listed.items() if len(names) > 1}
    if not listed:
        return out  # the usual case: one table per site, nothing to do
    site_by_name = {name: site for site, names in groups.items() for name in names}
    owner: dict[tuple[Site, str], str] = {}
    for rec in records:
        site = site_by_name.get(rec.cluster)
        if site is not None and rec.job_id and rec.cluster in by_cluster:
            owner[(site, rec.job_id)] = rec.cluster
            owner.setdefault((site, rec.job_id.split("_")[0]), rec.cluster)  # an array's
    for site, names in listed.items():
        first = names[0]
        for name in names:
            out[name] = [
                row
                for row in out[name]
                if (
                    owner.get((site, row.job_id))
                    or owner.get((site, row.job_id.split("_")[0]))
                    or first
                )
                == name
            ]
    return out


def records_to_show(
    records: Iterable[JobRecord],
    by_cluster: Mapping[str, Sequence[T]],
    groups: Mapping[Site, list[str]],
) -> list[JobRecord]:
    """The registry's jobs a live list adds to the queues: all but those of a table that is
    not listed (not connected) whose job a listed table of the same login already shows —
    that job is that row, not a second one ("dev 399" and "devtorch 399" for one job, the
    second answering "devtorch is not connected" when opened)."""
    records = list(records)
    site_by_name = {name: site for site, names in groups.items() for name in names}
    shown = {
        (site_by_name[name], row.job_id)
        for name, rows in by_cluster.items()
        if name in site_by_name
        for row in rows
    }
    if not shown:
        return records
    return [
        rec
        for rec in records
        if rec.cluster in by_cluster or (site_by_name.get(rec.cluster), rec.job_id) not in shown
    ]
