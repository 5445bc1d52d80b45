"""The module-level API: `hpcui.connect`, `hpcui.submit`, `hpcui.get_job`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from hpcui.clusters.cluster import Cluster
from hpcui.config import load_config
from hpcui.jobs.job import Job

_clusters: dict[str, Cluster] = {}
_lock = threading.Lock()


def connect(name: str | None = None, **kwargs: Any) -> Cluster:
    """The cluster `name` from the config (default: the configured default, else `local`).

    One Cluster per name per process; keyword arguments (prompt=, on_unknown_host=) apply
    when it is first created. Its connection is the hpcui agent's (one per cluster for
    every hpcui process of this user, docs/cli.md) unless the agent is off.
    """
    config = load_config()
    cfg = config.cluster(name)
    with _lock:
        cluster = _clusters.get(cfg.name)
        if cluster is None:
            if "transport" not in kwargs:
                from hpcui.transport.agent.remote import agent_transport  # when it is on

                kwargs["transport"] = agent_transport(
                    cfg.name,
                    is_local=cfg.is_local,
                    persist_s=config.agent.persist_s,
                    prompt=kwargs.get("prompt"),
                    on_unknown_host=kwargs.get("on_unknown_host"),
                )
            cluster = _clusters[cfg.name] = Cluster(cfg, **kwargs)
            agent = kwargs.get("transport")
            if agent is not None and hasattr(agent, "direct") and agent.direct is None:
                agent.direct = cluster.faces.own_transport  # an agent that does not answer
        return cluster


def submit(
    fn: Callable[..., Any], *args: Any, cluster: str | Cluster | None = None, **kwargs: Any
) -> Job:
    """Submit `fn(*args)` to `cluster` (default: the configured default). See Cluster.submit."""
    target = cluster if isinstance(cluster, Cluster) else connect(cluster)
    return target.submit(fn, *args, **kwargs)


def get_job(cluster: str | Cluster | None, job_id: str | int) -> Job:
    """A job submitted earlier, from the local registry: works in a new process too."""
    target = cluster if isinstance(cluster, Cluster) else connect(cluster)
    return target.get_job(str(job_id))
