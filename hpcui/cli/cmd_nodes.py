"""`hpcui proxy`, `hpcui ssh-config`, `hpcui code`: a job's node for ssh, rsync, git and VS
Code, over the login hpcui already holds (hpcui.services.node_ssh says how)."""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import time
from typing import Any

from hpcui.backends.states import JobState
from hpcui.cli import EXIT_OK
from hpcui.cli import output as out
from hpcui.cli.common import (
    cluster_list,
    cluster_name,
    connect,
    resource_kwargs,
    split_job_ref,
)
from hpcui.cli.models import SshHostOutput
from hpcui.errors import UsageError, WaitTimeout
from hpcui.services import node_ssh


def cmd_proxy(args: argparse.Namespace) -> int:
    """Without the agent (the thin client hands `proxy` to the agent when it can): this
    process logs in and carries the connection (node_ssh.proxy_here)."""
    if args.job is None:
        name, job_id = split_job_ref(args.cluster_or_job, cluster_name(args))
    else:
        name, job_id = args.cluster_or_job, args.job
    node_ssh.proxy_here(lambda: connect(name), job_id, args.port, fdpass=args.fdpass)
    return EXIT_OK


def _clusters(args: argparse.Namespace) -> list[str | None]:
    names = cluster_list(cluster_name(args))
    return list(names) if names is not None else [cluster_name(args)]


def cmd_ssh_config(args: argparse.Namespace) -> int:
    entries: list[node_ssh.NodeHost] = []
    names = _clusters(args)
    for name in names:
        cluster = connect(name)
        if cluster.config.host is None and len(names) > 1:
            continue  # `-c all`: this machine's jobs need no ssh
        found = node_ssh.hosts(cluster, node_ssh.running_nodes(cluster))
        entries += found
        if args.install:
            node_ssh.remember(cluster.name, found, replace=True, track=True)
    if args.install:
        done = node_ssh.install()
        if not args.json:
            print(f"wrote {len(entries)} host(s) to {done.hosts_file}")
            if done.include_added:
                kept = f" (the old file is {done.backup})" if done.backup else ""
                print(f"~/.ssh/config now includes it{kept}")
            out.note("kept up to date as jobs start and end while the agent runs")
    elif not args.json:
        sys.stdout.write(node_ssh.render(entries))
    if args.json:
        out.emit_json(list[SshHostOutput], [_row(e) for e in entries])
    return EXIT_OK


def _row(e: node_ssh.NodeHost) -> SshHostOutput:
    return SshHostOutput(
        host=e.alias, cluster=e.cluster, job_id=e.job_id, node=e.node, user=e.user,
        key_pinned=e.pinned,
    )  # fmt: skip


def cmd_code(args: argparse.Namespace) -> int:
    resources = resource_kwargs(args)
    if args.new:
        if args.job is not None:
            raise UsageError("`hpcui code --new` makes its own job: name no JOB.")
        cluster = connect(cluster_name(args))
        job_id = _hold_job(cluster, resources, timeout=args.timeout)
    else:
        if args.job is None:
            raise UsageError("Name a running job (`hpcui code JOB`), or ask for one with --new.")
        if resources:
            raise UsageError("Resources go with --new (a new job); a running job takes none.")
        name, job_id = split_job_ref(args.job, cluster_name(args))
        cluster = connect(name)
    entry, command = node_ssh.vscode_command(cluster, job_id)
    shown = shlex.join(command)
    if args.dry_run:
        print(shown)
        if not node_ssh.included():
            out.note("VS Code finds the host once `hpcui ssh-config --install` has run")
        return EXIT_OK
    done = node_ssh.keep_entry(entry)
    if done.include_added:
        out.note(f"~/.ssh/config now includes {done.hosts_file}")
    if shutil.which("code") is None:
        print(shown)
        out.note("`code` is not on PATH: run the line above where VS Code is installed")
        return EXIT_OK
    out.note(f"opening VS Code on job {job_id}'s node {entry.node}: {shown}")
    subprocess.run(command, check=False)
    return EXIT_OK


def _hold_job(cluster: Any, resources: dict[str, Any], *, timeout: float) -> str:
    """Submit a job that holds its allocation, wait until it runs (its state said as it
    changes); its id."""
    from hpcui.node.services import hold

    resources.setdefault("name", "vscode")
    job = cluster.submit(hold, **resources)
    out.note(
        f"submitted job {job.job_id} on {cluster.name} to hold a node; it ends with "
        f"`hpcui cancel {job.job_id}` or at its time limit"
    )
    deadline = time.monotonic() + timeout
    said = ""
    while True:
        details = cluster.control.details(job.job_id)
        state = details.state.value + (f" ({details.reason})" if details.reason else "")
        if state != said:
            out.note(f"job {job.job_id}: {state}")
            said = state
        if details.state is JobState.RUNNING and details.nodelist:
            return str(job.job_id)
        if details.state.is_final:
            raise UsageError(f"Job {job.job_id} ended before it ran ({state}): see `hpcui show`.")
        if time.monotonic() > deadline:
            raise WaitTimeout(
                f"Job {job.job_id} did not start within {timeout:.0f} s; it stays queued "
                f"(`hpcui code {job.job_id}` once it runs, `hpcui cancel {job.job_id}`)."
            )
        time.sleep(1.0)
