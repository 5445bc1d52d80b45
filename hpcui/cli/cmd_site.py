"""quota, clean, modules, partitions, clusters, profiles, trust, exec: the site and its
setup."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from hpcui.cli import EXIT_CONNECTION, EXIT_OK, exit_code_for
from hpcui.cli import output as out
from hpcui.cli.common import cluster_name, connect, host_key_decision
from hpcui.errors import HostKeyError, HpcuiError, PromptNeededError, UsageError

if TYPE_CHECKING:
    from hpcui.cli.models import ClusterCheck
    from hpcui.profiles import Profile


def cmd_quota(args: argparse.Namespace) -> int:
    from hpcui.sitestate import QuotaReport

    report = connect(cluster_name(args)).site.quota_report()
    if args.json:
        out.emit_json(QuotaReport, report)
        return EXIT_OK

    def limit(soft: int | None, hard: int | None, fmt: Callable[[int], str]) -> str:
        """`soft/hard`, or `-` when the site sets no limit."""
        vals = [v for v in (soft, hard) if v is not None]
        return "/".join(fmt(v) for v in vals) if vals else "-"

    def files(n: int | None) -> str:
        return "-" if n is None else f"{n:,}"

    rows = [
        (
            e.filesystem,
            e.kind or "",
            e.name or "",
            out.size(e.used_bytes),
            limit(e.soft_bytes, e.hard_bytes, out.size),
            files(e.files_used),
            limit(e.files_soft, e.files_hard, files),
            e.grace or "",
            "near limit" if e.near_limit else "",
        )
        for e in report.entries
    ]
    out.table(
        ["FILESYSTEM", "KIND", "NAME", "USED", "LIMIT", "FILES", "FILE LIMIT", "GRACE", ""],
        rows,
        colours={8: "red"},
        right=(3, 5),
    )
    out.note(f"reported by {report.tool}")
    if (own := report.own) is not None:
        share = (
            f" = {own.share_of_file_limit:.0%} of the file limit on {own.filesystem}"
            if own.share_of_file_limit is not None
            else ""
        )
        line = (
            f"hpcui's own folders ({own.base}): {own.files:,} files, {out.size(own.bytes)}{share}"
        )
        if own.warn:
            out.warn(f"{line}: `hpcui clean` removes the folders of fetched jobs")
        else:
            out.note(line)
    return EXIT_OK


def cmd_clean(args: argparse.Namespace) -> int:

    from hpcui.jobs.cleanup import CleanReport

    older = None if args.older_than is None else timedelta(seconds=args.older_than)
    cluster = connect(cluster_name(args))
    report = cluster.clean(older_than=older, dry_run=args.dry_run)
    if older is not None:  # environments count too, by the same age (hpcui env list)
        envs = cluster.environments.clean(older, dry_run=args.dry_run)
        report = report.model_copy(update={
            "environments": [e.key for e in envs],
            "environment_files": sum(e.inodes for e in envs),
            "environment_bytes": sum(e.size_bytes for e in envs),
        })  # fmt: skip
    if args.json:
        out.emit_json(CleanReport, report)
        return EXIT_OK
    verb = "would remove" if report.dry_run else "removed"
    for folder in report.removed:
        out.note(f"{verb} {folder.folder} ({', '.join(folder.job_ids)}): {folder.files} files")
    out.note(
        f"{report.cluster}: {verb} {len(report.removed)} job folder(s), {report.files:,} files, "
        f"{out.size(report.bytes)}; kept {report.kept_active} with pending or running jobs and "
        f"{report.kept_unfetched} whose results were not fetched (`hpcui result ID` fetches) "
        f"and {report.kept_no_result} whose jobs left no result (their logs say why: "
        "`hpcui logs ID`); --older-than TIME removes old ones anyway"
    )
    if report.environments:
        out.note(
            f"{verb} {len(report.environments)} environment(s) unused for that long "
            f"({', '.join(report.environments)}): {report.environment_files:,} files, "
            f"{out.size(report.environment_bytes)}"
        )
    return EXIT_OK


def cmd_modules(args: argparse.Namespace) -> int:
    from hpcui.backends.modules import Module
    from hpcui.sitestate import listed, module_label

    cluster = connect(cluster_name(args))
    unlisted = 0  # hidden modules --avail leaves out
    if args.search:
        mods = cluster.site.module_search(args.search)
    else:
        state = cluster.site.modules(with_setup=args.setup)
        mods = (
            state.loaded
            if args.avail is None
            else listed(state.available, args.avail, show_hidden=args.hidden)
        )
        if args.avail is not None:
            unlisted = len(listed(state.available, args.avail, show_hidden=True)) - len(mods)
        if state.setup_failure is not None:  # a job with this setup would fail the same way
            out.warn(f"the setup of {cluster.name} fails: {state.setup_failure.message}")
    if args.json:
        out.emit_json(list[Module], mods)
        return EXIT_OK

    def flags(m: Module) -> str:
        marks = (
            ("D", m.default), ("L", m.loaded), ("S", m.sticky), ("H", m.hidden),
            ("E", m.extension),
        )  # fmt: skip
        return "".join(c for c, on in marks if on)

    out.table(
        ["MODULE", "FLAGS", "DESCRIPTION"],
        [
            (
                module_label(m),
                flags(m),
                (m.description or "").splitlines()[0] if m.description else "",
            )
            for m in mods
        ],
        colours={1: "green"},
    )
    if not mods:
        what = (
            f"matching {args.search!r}"
            if args.search
            else "loaded"
            if args.avail is None
            else f"available named like {args.avail!r}"
            if args.avail
            else "available"
        )
        out.note(f"no modules {what} on {cluster.name}")
    else:
        out.note("flags: D default, L loaded, S sticky, H hidden (loadable, not in a plain avail)")
    if unlisted:
        out.note(
            f"{unlisted} hidden module(s) not listed: --hidden lists them, or name one in full"
        )
    return EXIT_OK


def cmd_partitions(args: argparse.Namespace) -> int:
    from hpcui.backends.records import PartitionInfo

    cluster = connect(cluster_name(args))
    parts = cluster.site.partitions() if cluster.capabilities.partitions else []
    if not parts and not args.json:
        out.note(f"{cluster.name} has no partitions or queues to show")
    if args.json:
        out.emit_json(list[PartitionInfo], parts)
        return EXIT_OK
    if any(p.kind for p in parts):  # PBS queues: job counts and kind, no node counts
        out.table(
            ["QUEUE", "AVAIL", "KIND", "QUEUED", "RUNNING"],
            [
                (
                    p.partition,
                    p.avail,
                    p.kind or "-",
                    _counts(p.jobs_queued),
                    _counts(p.jobs_running),
                )
                for p in parts
            ],
            colours={1: lambda s: "green" if s == "up" else "red"},
            right=(3, 4),
        )
        return EXIT_OK
    out.table(
        [
            "PARTITION",
            "AVAIL",
            "TIMELIMIT",
            "NODES(A/I/O/T)",
            "CPUS(A/I/O/T)",
            "GPUS/NODE",
            "NODELIST",
        ],
        [
            (
                p.partition + ("*" if p.is_default else ""),
                p.avail,
                out.duration(p.time_limit_s) if p.time_limit_s else "infinite",
                _counts(p.nodes_alloc, p.nodes_idle, p.nodes_other, p.nodes_total),
                _counts(p.cpus_alloc, p.cpus_idle, p.cpus_other, p.cpus_total),
                p.gpus_per_node if p.gpus_per_node is not None else "-",
                p.nodelist,
            )
            for p in parts
        ],
        colours={1: lambda s: "green" if s == "up" else "red"},
        right=(5,),
    )
    return EXIT_OK


def _counts(*values: int | None) -> str:
    """`a/i/o/t`, or `-` where the scheduler does not count (PBS: nodes; the wrapper: jobs)."""
    return "-" if any(v is None for v in values) else "/".join(map(str, values))


def cmd_clusters(args: argparse.Namespace) -> int:
    from hpcui.cli.models import ClusterRow
    from hpcui.config import load_config

    cfg = load_config()
    if args.names_only:  # shell completion: fast, no network
        print("\n".join(sorted(cfg.clusters)))
        return EXIT_OK
    default = cfg.default or "local"
    names = args.names or sorted(cfg.clusters)
    for n in names:
        cfg.cluster(n)  # an unknown name is a usage error (exit 2) that lists the known ones
    rows = [
        ClusterRow(
            name=n,
            host=cfg.clusters[n].host,
            profile=cfg.clusters[n].profile,
            default=n == default,
        )
        for n in names
    ]
    code = EXIT_OK
    if args.check:
        for row in rows:  # a cluster that needs a code here is said, the others checked
            row.check = _check(row.name)
            if not row.check.needs_code:
                code = code or row.check.exit_code
    if args.json:
        out.emit_json(list[ClusterRow], rows)
        return code
    headers = ["", "NAME", "HOST", "PROFILE"]
    if args.check:
        headers += ["CHECK", "PYTHON", "TIME"]
    table_rows = []
    for r in rows:
        cells = ["*" if r.default else "", r.name, r.host or "(this machine)", r.profile or ""]
        if r.check:
            cells += [
                "ok" if r.check.ok else "needs a code" if r.check.needs_code else "FAILED",
                r.check.python or "-",
                f"{r.check.seconds * 1000:.0f} ms",
            ]
        table_rows.append(cells)
    colours = {4: lambda s: "green" if s == "ok" else "red"} if args.check else {}
    out.table(headers, table_rows, colours=colours)
    for r in rows:
        if r.check and r.check.error:
            out.warn(f"{r.name}: {r.check.error}")
        if r.check and r.check.missing_modules:
            out.warn(
                f"{r.name}: setup loads modules the site lacks: {', '.join(r.check.missing_modules)}"
            )
    return code


def _check(name: str) -> ClusterCheck:
    """Log in, probe home/job folder/Python in one round trip, check the setup modules."""
    from hpcui.cli.models import ClusterCheck

    started = time.monotonic()
    try:
        cluster = connect(name)
        info = cluster.remote_info()  # refuses a Python of another minor version
        python = ".".join(map(str, info.python_version or ()))
        try:
            missing = cluster.site.missing_setup_modules()
        except HpcuiError:  # no module system: nothing to check
            missing = []
    except PromptNeededError:
        return ClusterCheck(
            ok=False,
            seconds=time.monotonic() - started,
            error=f"needs a code to log in: run `hpcui clusters --check {name}` in a terminal",
            exit_code=EXIT_CONNECTION,
            needs_code=True,
        )
    except HpcuiError as exc:
        return ClusterCheck(
            ok=False,
            seconds=time.monotonic() - started,
            error=str(exc),
            exit_code=exit_code_for(exc),
        )
    return ClusterCheck(
        ok=True, seconds=time.monotonic() - started, python=python, missing_modules=missing
    )


def cmd_profiles(args: argparse.Namespace) -> int:
    from hpcui.cli.models import ProfileRow
    from hpcui.config import load_config
    from hpcui.profiles import (
        Profile,
        builtin_profiles,
        resolve_profile,
    )
    from hpcui.profiles.local_machine import (
        describe,
        scheduler_kind,
    )

    user = load_config().profiles
    builtins = builtin_profiles()

    def resolved(name: str) -> Profile:
        """A profile as a cluster on this machine would use it (`local`: its own shape)."""
        p = resolve_profile(name, user)
        return describe(p) if scheduler_kind(p) == "local" and p.scheduler == "local" else p

    if args.name:
        prof = resolved(args.name)
        if args.json:
            out.emit_json(Profile, prof)
            return EXIT_OK
        out.key_values(
            [
                ("profile", prof.name),
                ("source", _source(args.name, user, builtins)),
                ("description", prof.description),
                ("scheduler", prof.scheduler),
                ("retired", f"yes (successor: {prof.successor})" if prof.retired else None),
                ("login hosts", ", ".join(prof.login_hosts)),
                ("node", _node_shape(prof)),
                ("per GPU", f"{prof.gpu_cores or '?'} cores" if prof.gpus_per_node else None),
                ("python", prof.python),
                ("setup", "; ".join(prof.setup)),
                ("quota tool", prof.quota_command),
                ("module system", prof.module_system),
                ("unconfirmed", ", ".join(prof.unconfirmed)),
            ]
        )
        if prof.partitions:
            print()
            out.table(
                ["PARTITION", "GPU", "AUTO", "MAX TIME", "MAX NODES", "GPUS"],
                [
                    (
                        p.name,
                        "yes" if p.gpu else "",
                        "yes" if p.auto else "",
                        out.duration(p.max_time) if p.max_time else "-",
                        p.max_nodes or "-",
                        f"{p.min_gpus or 0}..{p.max_gpus}" if p.max_gpus or p.min_gpus else "-",
                    )
                    for p in prof.partitions.values()
                ],
            )
        for n in prof.notes:
            out.note(f"note: {n}")
        return EXIT_OK
    rows = []
    for name in sorted(set(builtins) | set(user)):
        p = resolved(name)
        base = user[name].get("base") if name in user else None
        rows.append(
            ProfileRow(
                name=name,
                scheduler=p.scheduler,
                description=p.description,
                gpus_per_node=p.gpus_per_node,
                gpu_model=p.gpu_model,
                cores_per_node=p.cores_per_node,
                partitions=list(p.partitions),
                retired=p.retired,
                source="user" if name in user else "built-in",
                base=base if isinstance(base, str) else None,
                shadows_builtin=name in user and name in builtins,
            )
        )
    if args.json:
        out.emit_json(list[ProfileRow], rows)
        return EXIT_OK
    out.table(
        ["PROFILE", "SOURCE", "SCHEDULER", "NODE", "DESCRIPTION"],
        [
            (
                r.name + (" (retired)" if r.retired else ""),
                _source(r.name, user, builtins),
                r.scheduler,
                f"{r.gpus_per_node}x {r.gpu_model or 'GPU'}, {r.cores_per_node or '?'} cores"
                if r.gpus_per_node
                else (f"CPU, {r.cores_per_node} cores" if r.cores_per_node else "-"),
                r.description,
            )
            for r in rows
        ],
    )
    return EXIT_OK


def _source(name: str, user: dict, builtins: list[str]) -> str:
    """`built-in`, `user`, `user (base lumi-g)` or `user (changes built-in)`."""
    if name not in user:
        return "built-in"
    base = user[name].get("base")
    if name in builtins:
        return "user (changes built-in)"
    return f"user (base {base})" if base else "user"


def _node_shape(prof: Profile) -> str:
    """`4 x H100 64GB, 80 cores, 512.0G` (`?` where the profile does not know)."""
    gpus = f"{prof.gpus_per_node} x {prof.gpu_model or 'GPU'}" if prof.gpus_per_node else "CPU"
    mem = out.size(prof.mem_per_node * 2**20) if prof.mem_per_node else "?"
    return f"{gpus}, {prof.cores_per_node or '?'} cores, {mem}"


def cmd_trust(args: argparse.Namespace) -> int:
    """Accept a host key on purpose: the fingerprint is always shown, never added silently."""
    name = args.name or cluster_name(args)
    refused: list[str] = []
    try:
        cluster = connect(name, on_unknown_host=host_key_decision(args.yes, refused))
        cluster.run("true").check("connection test")
    except Exception as exc:
        if refused:
            raise HostKeyError(
                "not a terminal: re-run with --yes after checking the fingerprint above",
                host=refused[0],
                fingerprint="",
                key_type="",
            ) from exc
        raise
    print(f"{cluster.name}: host key trusted, connection works")
    return EXIT_OK


def cmd_exec(args: argparse.Namespace) -> int:

    cmd = list(args.cmd)
    if cmd[:1] == ["--"]:
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("exec needs a command, e.g. `hpcui exec 'squeue --me'`.")
    # as `ssh host 'cmd'`: one argument is a shell command line (pipes, `;`, quotes are the
    # remote shell's), several are a program and its arguments, each passed as it is
    res = connect(cluster_name(args)).run(cmd[0] if len(cmd) == 1 else cmd)
    sys.stdout.write(res.stdout)
    sys.stderr.write(res.stderr)
    return res.exit_status
