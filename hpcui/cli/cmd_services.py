"""`hpcui forward`: a port of a running job's node on this machine, over the cluster's SSH
connection; `hpcui jupyter`: JupyterLab in a job, forwarded. With the agent on, a forward
lives in the agent and the command returns; without it, the command holds the forward
until the job ends or Ctrl-C."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from hpcui.cli import EXIT_OK, common
from hpcui.cli import output as out
from hpcui.cli.common import cluster_name, connect, resource_kwargs, split_job_ref
from hpcui.cli.models import ForwardOutput
from hpcui.errors import UsageError
from hpcui.jobs import forwarding

if TYPE_CHECKING:
    from hpcui.clusters.cluster import Cluster
    from hpcui.services.web import Kind


def cmd_forward(args: argparse.Namespace) -> int:
    if args.list:
        return _list(args)
    if args.stop is not None:
        return _stop(args)
    if args.job is None or args.port is None:
        raise UsageError("Name a job and a port: `hpcui forward JOB PORT` (or --list, --stop).")
    name, job_id = split_job_ref(args.job, cluster_name(args))
    cluster = connect(name)
    local = args.local or forwarding.free_port(args.port)
    forward = cluster.control.forward(job_id, args.port, local_port=local)
    return hold(args, forward)


def hold(args: argparse.Namespace, forward: forwarding.Forward, url: str | None = None) -> int:
    """Say where the forward is; in the agent keep it there, else hold it until the job
    ends or Ctrl-C."""
    shared = _in_agent()
    if args.json:
        out.emit_json(list[ForwardOutput], [_row(forward, url)])
    else:
        print(f"forwarding {forward.describe()}")
        if url:
            print(url)
        how = (
            "`hpcui forward --stop` ends it"
            if shared
            else "Ctrl-C ends it (with the agent on, it would stay after this command)"
        )
        out.note(f"open until the job ends; {how}")
    sys.stdout.flush()
    if shared:
        forwarding.keep(forward)
        return EXIT_OK
    try:
        forward.wait()
    except KeyboardInterrupt:
        pass
    finally:
        forward.close()
    return EXIT_OK


def _in_agent() -> bool:
    return common.SHARED_BY_AGENT  # set when the agent starts: read now, not at import


def _list(args: argparse.Namespace) -> int:
    held = forwarding.active()
    if args.json:
        out.emit_json(list[ForwardOutput], [_row(f) for f in held])
        return EXIT_OK
    if not held:
        where = "the agent" if _in_agent() else "this process (the agent is off)"
        print(f"no forwards held by {where}")
        return EXIT_OK
    out.table(
        ["LOCAL", "NODE", "JOB", "CLUSTER", "CONNECTIONS"],
        [
            [f.address, f"{f.node}:{f.remote_port}", f.job_id, f.cluster, str(f.connections)]
            for f in held
        ],
    )
    return EXIT_OK


def _stop(args: argparse.Namespace) -> int:
    which = args.stop
    held = forwarding.active()
    chosen = [f for f in held if which == "all" or which in (f.job_id, f"{f.cluster}:{f.job_id}")]
    if not chosen and which != "all":
        raise UsageError(f"No forward of job {which} ({len(held)} held): `hpcui forward --list`.")
    for f in chosen:
        f.close()
        if not args.json:
            print(f"stopped {f.describe()}")
    if args.json:
        out.emit_json(list[ForwardOutput], [_row(f) for f in chosen])
    return EXIT_OK


def _row(f: forwarding.Forward, url: str | None = None) -> ForwardOutput:
    return ForwardOutput(
        cluster=f.cluster, job_id=f.job_id, node=f.node, remote_port=f.remote_port,
        local=f.address, connections=f.connections, url=url,
    )  # fmt: skip


def cmd_jupyter(args: argparse.Namespace) -> int:
    """JupyterLab in a job: see `_serve`."""
    return _serve(args, "jupyter", args.dir)


def cmd_tensorboard(args: argparse.Namespace) -> int:
    """TensorBoard in a small job over a job's folder (`JOB`) or `--logdir`."""
    if args.stop:
        return _serve(args, "tensorboard", None)
    if args.mirror:
        return _board_on_mirror(args)
    if (args.job is None) == (args.logdir is None):
        raise UsageError("Name a job or a folder: `hpcui tensorboard JOB` or `--logdir PATH`.")
    logdir = args.logdir
    if args.job is not None:
        name, job_id = split_job_ref(args.job, cluster_name(args))
        logdir = connect(name).files.folder(job_id)  # hpcui's job folder, else its workdir
    return _serve(args, "tensorboard", logdir)


def _board_on_mirror(args: argparse.Namespace) -> int:
    """TensorBoard here over a track= job's mirror, relayed every interval while it serves."""
    from hpcui.trackers import local_board, relay

    if args.job is None or args.logdir:
        raise UsageError(
            "--mirror reads one track= job's mirror: `hpcui tensorboard --mirror JOB`."
        )
    name, job_id = split_job_ref(args.job, cluster_name(args))
    cluster = connect(name)
    if job_id not in {r.job_id for r in cluster.relay.tracked()}:
        raise UsageError(f"{job_id} is not a track= job of {name}: submit with --track auto.")
    tracker = cluster.relay  # this process's one relay of the cluster
    tracker.run_once()
    proc, url = local_board.start(relay.mirror_dir(cluster, job_id), args.local or 0)
    try:
        with local_board.ended_by_term():  # a TERM ends TensorBoard too, not only this
            tracker.start()
            print(url, flush=True)
            if not args.no_browser:
                import webbrowser  # only where a browser opens

                webbrowser.open(url)
            proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        local_board.end(proc)
        tracker.stop()
    return EXIT_OK


def _serve(args: argparse.Namespace, kind_name: str, argument: str | None) -> int:
    """Check it is installed there, submit it, wait for its own runtime file, forward its
    port, print the local URL (with a token where it has one), open the browser."""
    from hpcui.services import web as services

    kind = services.KINDS[kind_name]
    cluster = connect(cluster_name(args))
    on_login = kind.name == "tensorboard" and cluster.profile.tensorboard_on == "login"
    if args.stop:
        if on_login:
            for pid in services.stop_on_login(cluster, kind):
                for f in forwarding.active():
                    if f.cluster == cluster.name and f.job_id == f"login:{pid}":
                        f.close()
                print(f"stopped {kind.name} (pid {pid}) on {cluster.name}'s login node")
        return _stop_service(cluster, kind)
    if on_login and argument is not None:  # the profile's rule: no job
        if resource_kwargs(args):
            raise UsageError(
                f"{cluster.name}'s profile runs TensorBoard on the login node: it takes no "
                'resources (drop them, or set tensorboard_on = "job" for this cluster).'
            )
        services.check_installed(cluster, kind)
        service = services.start_on_login(cluster, kind, argument)
        out.note(f"started {kind.title} on {cluster.name}'s login node (pid {service.pid})")
        server = services.wait_for_login_server(cluster, kind, service, timeout=args.timeout)
        local = args.local or forwarding.free_port(server.port)
        forward = services.forward_login(cluster, service, server.port, local_port=local)
        return _opened(args, forward, server.local_url(forward.local_port, kind.path))
    services.check_installed(cluster, kind, **resource_kwargs(args))
    job = services.submit(cluster, kind, argument, **resource_kwargs(args))
    out.note(f"submitted {kind.title} as job {job.job_id} on {cluster.name}")
    server = services.wait_for_server(job, kind, timeout=args.timeout, said=out.note)
    local = args.local or forwarding.free_port(server.port)
    forward = cluster.control.forward(job.job_id, server.port, local_port=local)
    return _opened(args, forward, server.local_url(forward.local_port, kind.path))


def _opened(args: argparse.Namespace, forward: forwarding.Forward, url: str) -> int:
    """Open the browser unless told not to, then hold the forward (see `hold`)."""
    if not args.no_browser:
        from hpcui.services.browser import open_url

        open_url(url)
    return hold(args, forward, url)


def _stop_service(cluster: Cluster, kind: Kind) -> int:
    """Cancel the jobs of this kind hpcui started on this cluster that may still run, and
    end their forwards (one scancel/qdel for all; one that already ended is no error).
    Only hpcui's own servers: a job merely named "jupyter" is the user's."""
    from hpcui.services import web as services

    job_name = kind.name
    ids = [
        r.job_id
        for r in cluster.records()
        if services.is_service(r, kind) and r.job_id and not r.state.is_final
    ]
    for f in forwarding.active():
        if f.cluster == cluster.name and f.job_id in ids:
            f.close()
    if not ids:
        print(f"no {job_name} job of hpcui's runs on {cluster.name}")
        return EXIT_OK
    cluster.control.cancel(ids)
    for job_id in ids:
        print(f"cancelled {job_name} job {job_id} on {cluster.name}")
    return EXIT_OK
