"""How a cluster's parts are chosen from its config: the connection, the scheduler kind,
the site profile, the jobs' Python and setup lines, the scheduler adapter. Pure choices
(and lazy imports of the one transport and adapter chosen: an SSH cluster never imports
the local transport, the CLI's start-up stays light); `Cluster` calls them once each."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from hpcui.config import ClusterConfig
from hpcui.errors import UsageError
from hpcui.jobs.end_push import EndPush
from hpcui.jobs.status import StatusService
from hpcui.profiles import Profile, local_machine, resolve_profile
from hpcui.schedulers.base import JobStatus, Scheduler
from hpcui.store import remote as remote_side
from hpcui.store.registry import Registry
from hpcui.transport.base import Transport


def own_transport(
    config: ClusterConfig,
    *,
    prompt: Callable[..., list[str]] | None = None,
    on_unknown_host: Callable[[str, str, str], bool] | None = None,
) -> Transport:
    """This process's own connection to the cluster (the agent's is handed in; this one
    also serves when the agent does not answer)."""
    if config.is_local:
        from hpcui.transport.local import (
            LocalTransport,
        )

        return LocalTransport()
    from hpcui.transport.ssh.session import (
        SshTransport,
    )
    from hpcui.transport.ssh.totp import with_totp

    prompt = with_totp(prompt, config.totp_command, config.name)
    return SshTransport.from_config(
        config.host or "",
        ssh_config=config.ssh_config,
        user=config.user,
        port=config.port,
        identity_file=config.identity_file,
        known_hosts=config.known_hosts,
        proxy_jump=config.proxy_jump,
        prompt=prompt,
        on_unknown_host=on_unknown_host,
        login_shell=config.login_shell,
        trust_name=config.name,
    )


def profile_name(config: ClusterConfig) -> str:
    return config.profile or ("local" if config.is_local else "generic")


def scheduler_kind(config: ClusterConfig) -> str:
    """slurm, pbs or local: the config's, else the profile's (`local` with Slurm on PATH is
    Slurm)."""
    if config.scheduler != "auto":
        return config.scheduler
    named = resolve_profile(
        profile_name(config), config.user_profiles, config.profile_overrides or None
    )
    return local_machine.scheduler_kind(named)


def profile_for(config: ClusterConfig, kind: str) -> Profile:
    """The site profile; on this machine without Slurm, filled in with its own cores,
    memory and GPUs (hpcui.profiles.local_machine) before the config's overrides."""
    name, user = profile_name(config), config.user_profiles
    overrides = config.profile_overrides or None
    if config.is_local and kind == "local":
        return local_machine.describe(resolve_profile(name, user)).with_overrides(overrides)
    profile = resolve_profile(name, user, overrides)
    if profile.scheduler == "local" and kind != "local":  # `local` with Slurm on PATH
        profile = profile.model_copy(update={"scheduler": kind})
    return profile


def job_python(config: ClusterConfig, profile: Profile, kind: str) -> str:
    """The Python jobs run with: the config's, else the profile's, else (on this machine
    without Slurm) the one running hpcui, with its packages, else python3."""
    if chosen := config.python or profile.python:
        return chosen
    return sys.executable if config.is_local and kind == "local" else "python3"


def job_setup(config: ClusterConfig, profile: Profile) -> list[str]:
    """Shell lines run before Python: the config's, else the profile's."""
    return list(config.setup if config.setup is not None else profile.setup)


def make_scheduler(
    kind: str,
    config: ClusterConfig,
    profile: Profile,
    transport: Transport,
    local_base: Callable[[], str],
) -> Scheduler:
    """The adapter for `kind`; `local_base` names the local scheduler's folder (asked only
    when it is first needed: it costs the remote probe)."""
    if kind == "slurm":
        from hpcui.schedulers.slurm import (
            SlurmScheduler,
        )

        return SlurmScheduler(transport)
    if kind == "local":
        from hpcui.schedulers.local import (
            LocalScheduler,
        )

        return LocalScheduler(
            transport, local_base, local_machine.this_machine if config.is_local else None
        )
    if kind == "pbs":
        from hpcui.schedulers.pbs import (
            PbsScheduler,
        )

        return PbsScheduler(transport, dialect=profile.pbs_dialect, node_shell=profile.node_shell)
    raise UsageError(f"Scheduler {kind!r} of cluster {config.name!r} is not supported yet.")


def status_service(
    name: str,
    scheduler: Scheduler,
    registry: Registry,
    transport: Transport,
    *,
    on_end: Callable[[], None],
) -> StatusService:
    """The cluster's one status poll, wired to its registry: states changed reach the
    registry (`on_end` when a job ended: a shown queue refreshes at once), a job the
    scheduler forgot is judged by its result file, and the login node pushes ends."""

    def states_changed(changed: dict[str, JobStatus]) -> None:
        registry.update_states(name, {j: (s.state, s.state_raw) for j, s in changed.items()})
        if any(s.state.is_final for s in changed.values()):
            on_end()

    def folder(job_id: str) -> str | None:
        rec = registry.get(name, job_id)
        return rec.folder if rec is not None else None

    def resolve_vanished(job_ids: list[str]) -> dict[str, JobStatus]:
        by_folder: dict[str, list[str]] = {}
        for jid in job_ids:
            if (where := folder(jid)) is not None:
                by_folder.setdefault(where, []).append(jid)
        if not by_folder:
            return {}
        found = remote_side.list_results(transport, list(by_folder))
        return remote_side.judge_vanished(job_ids, found)

    service = StatusService(scheduler, on_update=states_changed, resolve_vanished=resolve_vanished)
    service.end_push = EndPush(transport, folder, service.nudge)
    return service


def silence_submitit() -> None:
    """submitit logs to stderr by default; that would corrupt the TUI. Route it to our logs."""
    logger = logging.getLogger("submitit")
    logger.handlers.clear()
    logger.propagate = True
