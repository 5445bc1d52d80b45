"""`hpcui init` (asks) and `hpcui add NAME` (flags): add a cluster to the config."""

from __future__ import annotations

import argparse
from pathlib import Path

from hpcui.cli import EXIT_OK
from hpcui.cli import output as out
from hpcui.cli.common import host_key_decision, interactive, terminal_prompt
from hpcui.errors import UsageError


def _ask(question: str, default: str | None = None) -> str | None:
    shown = f" [{default}]" if default else ""
    answer = input(f"{question}{shown}: ").strip()
    return answer or default


def cmd_init(args: argparse.Namespace) -> int:

    if not interactive():
        raise UsageError(
            "hpcui init asks questions, and this is not a terminal: use `hpcui add NAME "
            "--host HOST [--user U --key PATH --jump HOST --account A] --yes` instead."
        )
    print("Add a cluster. Enter takes the value in brackets; answers can be changed later")
    print("in the config file. The host may be an alias from ~/.ssh/config.")
    args.host = args.host or _ask("Login host (or ssh alias)")
    if not args.host:
        raise UsageError("No host given: nothing was written.")
    from hpcui.clusters.onboarding import (
        split_destination,
    )

    host = split_destination(args.host)[1]  # a wrong form is said now, not after every question
    args.name = args.name or _ask("Name for it in hpcui", host.split(".")[0].replace(":", "-"))
    args.user = args.user or _ask("User name there (empty: from ssh config / this user)")
    args.key = args.key or _ask("Private key file (empty: ssh config / agent)")
    args.jump = args.jump or _ask("Jump host (empty: none)")
    return cmd_add(args)


def cmd_add(args: argparse.Namespace) -> int:
    from hpcui.clusters import onboarding
    from hpcui.config import (
        ClusterConfig,
        config_path,
    )

    if not args.host:
        raise UsageError("hpcui add needs --host HOST (a login node or an ssh config alias).")
    user, host, port = onboarding.split_destination(args.host)
    for what, given, inline in (("user", args.user, user), ("port", args.port, port)):
        if given and inline and str(given) != str(inline):
            raise UsageError(
                f"--host {args.host} says {what} {inline} and --{what} says {given}: give one."
            )
    path = Path(args.config_file).expanduser() if args.config_file else config_path()
    onboarding.check_name(args.name, path)
    args.host = host
    base = ClusterConfig(
        name=args.name,
        host=host,
        port=args.port or port,
        user=args.user or user or None,
        identity_file=args.key or None,
        proxy_jump=args.jump or None,
        ssh_config=args.ssh_config or None,
    )

    on_unknown_host = host_key_decision(args.yes)

    def ask_account(profile: str) -> str | None:
        if not interactive() or args.yes:
            return None
        return _ask(f"The {profile} profile charges an account (project): which one")

    out.note(f"connecting to {args.host} and looking at the site...")
    proposal = onboarding.propose(
        args.name,
        base,
        profile=args.profile,
        python=args.python,
        setup=list(args.setup or []) or None,
        account=args.account,
        ask_account=ask_account,
        prompt=terminal_prompt,
        on_unknown_host=on_unknown_host,
    )
    facts = proposal.facts
    if not args.json:
        print(f"scheduler: {facts.scheduler or 'none found'} · host {facts.hostname}")
        print(f"profile:   {proposal.cluster.profile} ({proposal.profile_reason})")
        print(f"python:    {proposal.cluster.python} ({proposal.python_reason})")
        print(f"\nThe table for {path}:\n")
        print(proposal.table())
        if not args.yes and interactive():
            if _ask("Write it" + (" and run a test job" if not args.no_test else ""), "y") not in (
                "y",
                "yes",
            ):
                out.note("nothing was written")
                return EXIT_OK
    if not args.no_test:
        out.note("running a tiny test job (skip with --no-test)...")
    done = onboarding.add_cluster(
        proposal,
        path,
        test=not args.no_test,
        prompt=terminal_prompt,
        on_unknown_host=on_unknown_host,
    )
    if args.json:
        out.emit_json(onboarding.Proposal, done)
    else:
        tested = "the test job ran; " if done.tested else ""
        print(f"{tested}{args.name} added to {path}. Try: hpcui -c {args.name} jobs")
        if args.command == "init" and not args.yes and interactive():
            _first_environment(args.name)
    return EXIT_OK


def _first_environment(name: str) -> None:
    """`hpcui init` offers the first environment (docs/environments.md): the packages the
    user's jobs need, built on the login node now rather than at the first submit."""
    wanted = _ask(
        "Packages your jobs need there, built once now (a requirements file, or names like "
        "torch==2.13.0; empty: later, `--env auto` at submit builds what a call uses)"
    )
    if not wanted:
        return
    from hpcui.cli.common import connect

    items = [wanted] if wanted.endswith((".txt", ".in")) else wanted.replace(",", " ").split()
    python = connect(name).environments.build(items)
    print(f"environment ready: {python} (submit with --env {' '.join(items)} to use it)")
