"""What every command shares: connecting (with terminal prompts), jobs, resources."""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hpcui.cli.parser import RESOURCE_PREFIX

if TYPE_CHECKING:
    from hpcui.clusters.cluster import Cluster
    from hpcui.jobs.handle import JobHandle
    from hpcui.jobs.job import Job

_open: list[Cluster] = []
#: True in the agent (hpcui.agent.server): clusters are shared by every request and stay
#: open after it; questions go to the terminal of the client being served
SHARED_BY_AGENT = False


def interactive() -> bool:
    """A person can answer questions: stdin is a terminal. In CI it is not, and we never ask."""
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def terminal_prompt(
    title: str, instructions: str, prompts: list[tuple[str, bool]], *, cluster: str = ""
) -> list[str]:
    """Keyboard-interactive (2FA) answers from the terminal; nothing is echoed or kept.
    The first line names the cluster that asks (several may, in one `jobs -c a,b`)."""
    if not prompts:  # servers may send an empty round: nothing to ask
        return []
    head = title.strip() or "login"
    print(f"{cluster}: {head}" if cluster else head, file=sys.stderr)
    if instructions.strip():
        print(instructions.strip(), file=sys.stderr)
    return [input(q) if echo else read_secret(q) for q, echo in prompts]


def read_secret(question: str) -> str:
    """getpass, or in the agent the client's terminal (with echo off there)."""
    routed = getattr(sys.stdin, "read_secret", None)
    if routed is not None:
        return str(routed(question))

    return getpass.getpass(question)


def ask_host_key(host: str, key_type: str, fingerprint: str) -> bool:
    """Unknown host key, interactive only: show the fingerprint and let the person decide."""
    print(f"{host} offers an unknown {key_type} host key {fingerprint}", file=sys.stderr)
    print("Compare it with the fingerprint your site publishes.", file=sys.stderr)
    return input("Trust it and add it to known_hosts? [y/N] ").strip().lower() in ("y", "yes")


def host_key_decision(
    yes: bool, refused: list[str] | None = None
) -> Callable[[str, str, str], bool]:
    """`trust` and `add`: the fingerprint is always printed; `--yes` accepts it, a person
    at a terminal is asked, anything else refuses (the host noted in `refused`)."""

    def decide(host: str, key_type: str, fingerprint: str) -> bool:
        print(f"{host} offers {key_type} key {fingerprint}")
        if yes:
            return True
        if not interactive():
            if refused is not None:
                refused.append(host)
            return False
        answer = input("Is this the fingerprint your site publishes? [y/N] ")
        return answer.strip().lower() in ("y", "yes")

    return decide


def connect(name: str | None, **kwargs: Any) -> Cluster:
    """The cluster, able to ask 2FA and host-key questions only when someone can answer.

    Without a terminal no callback is passed: the core then fails with an
    AuthenticationError or HostKeyError that says what to do, instead of hanging.
    """
    from hpcui.clusters.api import (
        connect as core_connect,
    )

    def asking(title: str, instructions: str, prompts: list[tuple[str, bool]]) -> list[str]:
        from hpcui.config import (
            load_config,  # the name is looked up only when a prompt comes
        )

        label = name or load_config().cluster(None).name
        return terminal_prompt(title, instructions, prompts, cluster=label)

    if SHARED_BY_AGENT:  # one Cluster per name for every client; each asks its own terminal
        from hpcui.cli.routing import (
            RoutedHostKey,
            RoutedPrompt,
        )

        kwargs.setdefault("prompt", RoutedPrompt(asking))
        kwargs.setdefault("on_unknown_host", RoutedHostKey(ask_host_key))
        return core_connect(name, **kwargs)
    if interactive():
        kwargs.setdefault("prompt", asking)
        kwargs.setdefault("on_unknown_host", ask_host_key)
    cluster = core_connect(name, **kwargs)
    _open.append(cluster)
    return cluster


def close_all() -> None:
    """Close what this process opened (status threads, SSH) so exit is prompt and clean."""
    while _open:
        cluster = _open.pop()
        try:
            cluster.close()
        except Exception:  # closing is best effort; the process is ending anyway
            pass


def cluster_name(args: argparse.Namespace) -> str | None:
    return getattr(args, "cluster", None)


def several_clusters(value: str | None) -> bool:
    """`-c a,b` or `-c all`: `hpcui jobs` over several clusters (as squeue -M a,b / -M all)."""
    return value is not None and ("," in value or value == "all")


def cluster_list(value: str | None) -> list[str] | None:
    """`-c a,b` or `-c all` (every configured cluster, as squeue -M all): the names, or None
    for one cluster. Unknown names fail here, before any connection."""
    from hpcui.config import load_config
    from hpcui.errors import UsageError

    if value is None or not several_clusters(value):
        return None
    known = list(load_config().clusters)
    if value in known:  # a cluster really named "all"
        return None
    names = known if value == "all" else [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise UsageError(
            f"No cluster named {', '.join(map(repr, unknown)) or repr(value)} in the config "
            f"(configured: {', '.join(known) or 'none'}). Use -c NAME[,NAME...] or -c all."
        )
    return list(dict.fromkeys(names))


def split_job_ref(ref: str, cluster: str | None) -> tuple[str | None, str]:
    """`JOB` or `CLUSTER:JOB` (what `hpcui jobs` prints with several clusters)."""
    if ":" in ref:
        name, _, job_id = ref.partition(":")
        if name and job_id:
            return name, job_id
    return cluster, ref


def get_job(args: argparse.Namespace, ref: str, *, refresh: bool = True) -> Job:
    """A job from the local registry, with its state fresh from the scheduler (one call)."""
    name, job_id = split_job_ref(ref, cluster_name(args))
    cluster = connect(name)
    job = cluster.get_job(job_id)
    if refresh:
        # get_job seeds the state from the registry, which may be stale; one batched poll
        # (nothing at all for a job the registry already knows is over).
        cluster.faces.refresh_states()
    return job


def job_handle(args: argparse.Namespace, ref: str) -> JobHandle:
    """The job `ref` names: hpcui's `Job`, or the handle of another job of the user that
    the scheduler describes (`hpcui logs 1234` for a plain sbatch job); `Cluster.job`
    decides which, and the caller need not ask (`hpcui.jobs.handle`)."""
    name, job_id = split_job_ref(ref, cluster_name(args))
    return connect(name).job(job_id)


def resource_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The resource options given on the command line, as `Cluster.submit` keywords."""
    out: dict[str, Any] = {}
    for key, value in vars(args).items():
        if key.startswith(RESOURCE_PREFIX) and value is not None:
            out[key[len(RESOURCE_PREFIX) :]] = value
    return out
