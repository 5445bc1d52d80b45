"""shell, files, download, upload, sync: into a running job, its folder as files, and
folders both ways."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hpcui.cli import EXIT_OK
from hpcui.cli import output as out
from hpcui.cli.common import (
    cluster_name,
    connect,
    interactive,
    resource_kwargs,
    split_job_ref,
)
from hpcui.common.formatting import printable, size
from hpcui.errors import UsageError

if TYPE_CHECKING:
    from hpcui.clusters.cluster import Cluster
    from hpcui.jobs.transfer import Transfer


def cmd_shell(args: argparse.Namespace) -> int:
    """A login shell inside the job (srun --overlap --pty). With the agent on, the pty
    channel is opened on the agent's login and relayed (a 2FA site asks no second code);
    the command itself always runs here, where the terminal is."""
    from hpcui.services.terminal import (
        bridge,
        shell_unavailable,
        window,
    )

    why = shell_unavailable()
    if why:  # said before logging in: nothing is opened on the cluster
        raise UsageError(f"`hpcui shell` is not available here: {why}")
    if not sys.stdin.isatty():
        raise UsageError("`hpcui shell` needs a terminal (stdin is not one).")
    resources = resource_kwargs(args)
    if args.new:
        from hpcui.request.plan import explain

        if args.job is not None or args.node:
            raise UsageError("`hpcui shell --new` makes its own job: name no JOB or --node.")
        cluster = connect(cluster_name(args))
        alloc = cluster.plan(**resources)  # refused here, before any login, when it cannot run
        cols, rows = window()
        chan = cluster.control.open_allocation(alloc, cols=cols, rows=rows)
        out.note(
            f"asking {cluster.name} for an allocation ({explain(alloc).splitlines()[0]}); the "
            "shell opens on its first node when it starts: exit (or Ctrl-D) ends the job"
        )
        status = bridge(chan)
        out.note(f"left the allocation (shell exit status {status})")
        return EXIT_OK
    if args.job is None:
        raise UsageError("Name a job (`hpcui shell JOB`), or ask for a new one with --new.")
    if resources:
        raise UsageError("Resources go with --new (a new allocation); a job's shell takes none.")
    name, job_id = split_job_ref(args.job, cluster_name(args))
    cluster = connect(name)
    cols, rows = window()
    chan = cluster.control.open_shell(job_id, node=args.node, cols=cols, rows=rows)
    out.note(f"shell in job {job_id} on {cluster.name}: exit (or Ctrl-D) to leave")
    status = bridge(chan)
    out.note(f"left job {job_id} (shell exit status {status})")
    return EXIT_OK


def _folder(args: argparse.Namespace) -> tuple[Cluster, str, str]:
    name, job_id = split_job_ref(args.job, cluster_name(args))
    cluster = connect(name)
    base = cluster.files.folder(job_id)
    sub = (getattr(args, "path", None) or "").strip("/")
    if ".." in Path(sub).parts:
        raise UsageError(f"Give a path inside the job's folder, not {sub!r}.")
    return cluster, job_id, f"{base.rstrip('/')}/{sub}" if sub else base


def cmd_files(args: argparse.Namespace) -> int:
    from hpcui.backends.records import RemoteFile

    cluster, _job_id, path = _folder(args)
    try:
        entries = cluster.files.list(path)
    except UsageError as exc:
        if "is a file" not in str(exc) or args.json:
            raise
        text, total = cluster.files.read_text(path)
        for line in text.splitlines():
            print(printable(line))
        if total > len(text.encode()):
            out.note(f"(first {len(text.encode())} of {total} bytes: `hpcui download` for all)")
        return EXIT_OK
    if args.json:
        out.emit_json(list[RemoteFile], entries)
        return EXIT_OK
    out.note(path)
    out.table(
        ["NAME", "SIZE", "MODIFIED"],
        [
            (
                e.name + ("/" if e.is_dir else ""),
                "-" if e.is_dir else size(e.size),
                e.modified.astimezone().strftime("%Y-%m-%d %H:%M") if e.modified else "",
            )
            for e in entries
        ],
        right=(1,),
    )
    return EXIT_OK


def cmd_download(args: argparse.Namespace) -> int:
    """A file or a whole folder of a job's: a folder lands in DEST/<its name>, and a run
    again copies only what is missing or changed (a cut-off copy resumes)."""
    cluster, _job_id, path = _folder(args)
    dest = Path(args.dest or ".")
    if (args.dest or "").endswith("/"):
        dest.mkdir(parents=True, exist_ok=True)
    _copy(args, cluster.name, "downloaded", lambda **kw: cluster.files.fetch(path, dest, **kw))
    return EXIT_OK


def cmd_upload(args: argparse.Namespace) -> int:
    """A dataset or a config to the cluster: REMOTE is relative to the remote home."""
    cluster = connect(args.cluster)
    local = Path(args.local)
    remote = _remote(args.remote)
    _copy(args, cluster.name, "uploaded", lambda **kw: cluster.files.upload(local, remote, **kw))
    return EXIT_OK


def cmd_sync(args: argparse.Namespace) -> int:
    """One way, as `rsync -a SRC/ DEST/`: DEST becomes a copy of SRC's contents (only what
    differs moves); one side is CLUSTER:PATH. Nothing is ever deleted on the other side."""
    from hpcui.config import load_config

    names = set(load_config().clusters)
    src, dest = (_side(x, names) for x in (args.src, args.dest))
    if (src[0] is None) == (dest[0] is None):
        raise UsageError(
            "Name the cluster on exactly one side, as rsync does: `hpcui sync CLUSTER:PATH "
            f"LOCAL` or `hpcui sync LOCAL CLUSTER:PATH` (clusters: {', '.join(sorted(names))})."
        )
    if src[0] is not None:
        cluster = connect(src[0])
        remote = _remote(src[1])
        local = Path(dest[1])
        _copy(
            args, cluster.name, "synced",
            lambda **kw: cluster.files.fetch(remote, local, into=False, **kw),
        )  # fmt: skip
    else:
        assert dest[0] is not None
        cluster = connect(dest[0])
        local = Path(src[1])
        if not local.is_dir():
            raise UsageError(f"{local} is not a folder here: `hpcui sync` copies folders.")
        remote = _remote(dest[1])
        _copy(
            args, cluster.name, "synced",
            lambda **kw: cluster.files.upload(local, remote, into=False, **kw),
        )  # fmt: skip
    return EXIT_OK


def _side(text: str, clusters: set[str]) -> tuple[str | None, str]:
    """`CLUSTER:PATH` (a configured cluster's name before the first colon) or a local path."""
    name, sep, rest = text.partition(":")
    if sep and name in clusters:
        return name, rest or "."
    if sep and name and "/" not in name:
        raise UsageError(
            f"{name!r} is not a cluster of yours (clusters: {', '.join(sorted(clusters))}); "
            f"a local path with a colon is written ./{text}."
        )
    return None, text


def _remote(path: str) -> str:
    """A remote path as the user wrote it; `~/x` and relative paths are in the remote home
    (as scp and rsync read them)."""
    if path.startswith("~/"):
        path = path[2:]
    if path in ("~", ""):
        path = "."
    return path


def _copy(args: argparse.Namespace, cluster: str, did: str, run: Callable[..., Transfer]) -> None:
    """Run one copy with a progress bar (on a terminal) and say what it did."""
    from hpcui.cli.models import TransferOutput

    started = time.monotonic()
    bar = _Bar("copying") if interactive() and not args.json else None
    result = run(
        progress=bar, checksum=args.checksum,
        note=lambda text: print(f"hpcui: {text}", file=sys.stderr),
    )  # fmt: skip
    if bar:
        bar.finish()
    secs = max(time.monotonic() - started, 1e-6)
    if args.json:
        out.emit_json(
            TransferOutput,
            TransferOutput(
                cluster=cluster, source=result.source, target=result.target,
                copied=result.copied, skipped=result.skipped, moved_bytes=result.moved,
                total_bytes=result.total, links_not_copied=result.links,
                verified=result.verified, seconds=round(secs, 3),
            ),
        )  # fmt: skip
        return
    print(
        f"{did} {result.target}: {result.summary()} ({size(result.moved)} moved now, "
        f"{result.moved / secs / 1e6:.1f} MB/s)"
    )


class _Bar:
    """A one-line progress bar on stderr, redrawn at most 10 times a second."""

    def __init__(self, label: str) -> None:
        self.label = label[:30]
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.1 and done < total:
            return
        self.last = now
        frac = done / total if total else 1.0
        filled = int(frac * 30)
        sys.stderr.write(
            f"\r{self.label} [{'#' * filled}{'.' * (30 - filled)}] {frac:5.1%} "
            f"{size(done)}/{size(total)}"
        )
        sys.stderr.flush()

    def finish(self) -> None:
        sys.stderr.write("\n")
