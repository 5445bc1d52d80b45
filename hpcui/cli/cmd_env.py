"""`hpcui env list|show|rm|build`: the environments env= built on a cluster (their size and
inode count: the quotas that bite first), one removed, one built ahead of any job."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from hpcui.cli import EXIT_OK
from hpcui.cli import output as out
from hpcui.cli.common import cluster_name, connect
from hpcui.errors import UsageError

if TYPE_CHECKING:
    from hpcui.submission.env_store import EnvInfo


def cmd_env(args: argparse.Namespace) -> int:
    from hpcui.submission.env_store import EnvInfo

    cluster = connect(cluster_name(args))
    store = cluster.environments
    if args.action == "build":
        if not args.items:
            raise UsageError("Name what to install: `hpcui env build numpy==2.1.0 ...` or a file.")
        python = store.build(args.items)
        if args.json:
            out.emit_json(EnvInfo, store.show(python.split("/envs/")[1].split("/")[0]))
        else:
            print(python)
        return EXIT_OK
    if args.action == "rm":
        if not args.items:
            raise UsageError("Name the environments to remove (`hpcui env list` shows them).")
        gone = store.remove(args.items)
        if args.json:
            out.emit_json(list[str], gone)
        else:
            for key in gone:
                print(f"removed environment {key} on {cluster.name}")
        return EXIT_OK
    if args.action == "show":
        if len(args.items) != 1:
            raise UsageError("Name one environment: `hpcui env show KEY`.")
        env = store.show(args.items[0])
        if args.json:
            out.emit_json(EnvInfo, env)
        else:
            out.key_values(_fields(env))
        return EXIT_OK
    envs = store.list()
    if args.json:
        out.emit_json(list[EnvInfo], envs)
        return EXIT_OK
    rows = [[v for k, v in _fields(e) if k != "python"] for e in envs]
    headers = ["KEY", "REQUIREMENTS", "SIZE", "INODES", "BUILT", "USED HERE", "IN USE BY"]
    out.table(headers, rows, right=(2, 3))
    if not envs:
        out.note(f"no environments on {cluster.name} (submit with --env, or `hpcui env build`)")
    return EXIT_OK


def _fields(e: EnvInfo) -> list[tuple[str, str]]:
    return [
        ("key", e.key),
        ("python", e.python),
        ("requirements", " ".join(e.requirements)),
        ("size", out.size(e.size_bytes)),
        ("inodes", f"{e.inodes:,}"),
        ("built", out.when(e.built_at)),
        ("used here", out.when(e.used_at)),
        ("in use by", " ".join(e.in_use_by) or "-"),
    ]
