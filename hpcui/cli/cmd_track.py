"""track: the trackers of track= jobs, mirrored here (hpcui.trackers)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from hpcui.cli import EXIT_OK
from hpcui.cli import output as out
from hpcui.cli.common import cluster_name, connect, split_job_ref
from hpcui.errors import UsageError

if TYPE_CHECKING:
    from hpcui.cli.models import TrackedJob
    from hpcui.clusters.cluster import Cluster
    from hpcui.store.registry import JobRecord


def _rows(cluster: Cluster, records: list[JobRecord]) -> list[TrackedJob]:
    from hpcui.cli.models import TrackedJob
    from hpcui.trackers import mirror, mlflow_export, relay, wandb_sync

    rows = []
    for r in records:
        local = relay.mirror_dir(cluster, r.job_id or "")
        files = mirror.mirrored(local)
        runs = wandb_sync.offline_runs(local)
        rows.append(TrackedJob(
            cluster=r.cluster, job_id=r.job_id or "", name=r.name, track=r.meta.get("track", ""),
            mirror=str(local), files=len(files), bytes=sum(p.stat().st_size for p in files),
            final=(local / relay.FINAL).exists(), mlflow=mlflow_export.links(local),
            wandb_runs=[p.name for p in runs],
            wandb_synced=[p.name for p in runs if wandb_sync.is_synced(p)],
        ))  # fmt: skip
    return rows


def cmd_track(args: argparse.Namespace) -> int:
    from hpcui.trackers import relay, wandb_sync

    cluster = connect(cluster_name(args))
    records = cluster.relay.tracked()
    if args.jobs:
        wanted = {split_job_ref(j, cluster.name)[1] for j in args.jobs}
        records = [r for r in records if r.job_id in wanted]
        missing = wanted - {r.job_id for r in records}
        if missing:
            raise UsageError(
                f"{', '.join(sorted(missing))}: not a track= job of {cluster.name} "
                "(`hpcui track list` shows them; submit with --track auto)."
            )
    if args.action == "stop":
        for r in records:
            cluster.relay.finish(r.job_id or "")
    elif args.action == "run":
        tracker = relay.Relay(cluster, interval_s=args.interval or relay.INTERVAL_S)
        print(f"relaying {len(tracker.jobs())} job(s) of {cluster.name} every "
              f"{tracker.interval_s:g} s until they end (Ctrl-C stops)", file=sys.stderr)  # fmt: skip
        tracker.run(until_idle=True)
    elif args.action == "sync":
        done = cluster.relay.run_once()
        print(f"pass: {done.files} file(s), {done.bytes} bytes from {done.jobs} job(s)",
              file=sys.stderr)  # fmt: skip
        for r in records:
            synced = wandb_sync.sync(relay.mirror_dir(cluster, r.job_id or ""))
            if synced is not None:
                print(f"{r.job_id}: {' '.join(synced.command)}\n{synced.output}", file=sys.stderr)
    rows = _rows(cluster, records)
    if args.json:
        from hpcui.cli.models import TrackedJob

        out.emit_json(list[TrackedJob], rows)
        return EXIT_OK
    if not rows:
        print(f"no track= job on {cluster.name} (submit with --track auto|wandb|mlflow|"
              "tensorboard)")  # fmt: skip
        return EXIT_OK
    out.table(
        ["JOB", "NAME", "TRACK", "FILES", "BYTES", "RELAY", "LINKS / MIRROR"],
        [[r.job_id, r.name, r.track, r.files, r.bytes, "done" if r.final else "on",
          " ".join(r.mlflow) or (f"W&B {len(r.wandb_synced)}/{len(r.wandb_runs)} synced"
                                 if r.wandb_runs else r.mirror.replace(os.path.expanduser("~"), "~"))]
         for r in rows],
        right=(3, 4),
    )  # fmt: skip
    return EXIT_OK
