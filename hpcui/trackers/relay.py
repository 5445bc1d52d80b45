"""The tracker relay: every interval, one command mirrors every tracked job's folder.

A job submitted with `track=` writes its trackers' files into `<job folder>/track/<id>`
(hpcui.node.track_env). While such jobs run, and once more after each ends, the relay asks
the login node for what grew in all of them in one command (hpcui.trackers.mirror: one
listing of each folder, only new bytes back), writes it into `<data dir>/track/<cluster>/
<id>/`, and hands the mirror to the exporters (MLflow's server where this machine names
one). A job whose last pass after its end is done is marked and left alone. The relay
keeps no state of its own: the mirror is the state, so a relay killed, asleep or cut off
starts again where the files here end.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hpcui.backends.job_paths import JobPaths
from hpcui.errors import HpcuiError
from hpcui.store.registry import JobRecord
from hpcui.trackers import mirror, mlflow_export, wandb_sync
from hpcui.trackers.site import Site

log = logging.getLogger(__name__)

#: seconds between passes: a running job's metrics reach this machine within it. A pass
#: costs the login node one python3 start and one walk (~20 ms on a 2-core VM for 20
#: jobs: benchmarks/track_bench.py), so 30 s keeps it under 0.1 % of a core
INTERVAL_S = 30.0
#: in a mirror: its last pass after the job's end is done
FINAL = ".hpcui-final"


def mirror_root(cluster: Site) -> Path:
    """Where this machine keeps a cluster's mirrors: beside the registry."""
    return cluster.registry.path.parent / "track" / cluster.name


def mirror_dir(cluster: Site, job_id: str) -> Path:
    return mirror_root(cluster) / job_id.replace("/", "_")


@dataclass
class Pass:
    """What one pass did (the benchmark and the tests count them)."""

    jobs: int = 0
    files: int = 0
    bytes: int = 0
    commands: int = 0
    finished: list[str] = field(default_factory=list)


#: hands a mirror to a tracker here: (cluster, record, mirror, the job ended)
Exporter = Callable[[Site, JobRecord, Path, bool], None]


class Relay:
    """One cluster's relay; `run_once()` is a pass, `start()` a thread of passes."""

    def __init__(
        self,
        cluster: Site,
        *,
        interval_s: float = INTERVAL_S,
        exporters: list[Exporter] | None = None,
    ) -> None:
        self.cluster = cluster
        self.interval_s = interval_s
        self.exporters = exporters if exporters is not None else default_exporters()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.passes = 0

    def tracked(self) -> list[JobRecord]:
        """Every job of this cluster submitted with track=, newest first."""
        return self.cluster.registry.tracked(self.cluster.name)

    def jobs(self) -> list[JobRecord]:
        """Tracked jobs whose mirror is not final yet."""
        return [
            r
            for r in self.tracked()
            if r.job_id and not (mirror_dir(self.cluster, r.job_id) / FINAL).exists()
        ]

    def summary(self, record: JobRecord) -> str | None:
        """A track= job's line for `hpcui show` and the Job screen: what it relays, where
        the mirror is, and its runs' links once imported (None for any other job)."""
        kind = record.meta.get("track")
        if not kind or not record.job_id:
            return None
        local = mirror_dir(self.cluster, record.job_id)
        said = f"{kind}: {len(mirror.mirrored(local))} file(s) mirrored to {local}"
        said += " (relayed to the end)" if (local / FINAL).exists() else ""
        links = mlflow_export.links(local)
        runs = wandb_sync.offline_runs(local)
        if links:
            said += f"; MLflow {' '.join(links)}"
        if runs:
            done = sum(wandb_sync.is_synced(r) for r in runs)
            said += f"; W&B {done}/{len(runs)} run(s) synced (`hpcui track sync {record.job_id}`)"
            said += ", uploading live" if any(wandb_sync.live(r) for r in runs) else ""
        return said

    def finish(self, job_id: str) -> None:
        """Relay this job no more (`hpcui track stop`), as after its last pass."""
        local = mirror_dir(self.cluster, job_id)
        local.mkdir(parents=True, exist_ok=True, mode=0o700)
        (local / FINAL).touch()

    def run_once(self) -> Pass:
        """One pass over every tracked job not final: ended jobs get this last pass."""
        records = self.jobs()
        done = Pass(jobs=len(records))
        if not records:
            return done
        ended = {r.job_id for r in records if self._ended(r)}  # before the pass: nothing after
        roots = [JobPaths(r.folder, r.job_id or "").track for r in records]
        locals_ = [mirror_dir(self.cluster, r.job_id or "") for r in records]
        for path in locals_:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
        more = True
        while more:  # a pass takes everything there is, in bounded answers
            res = self.cluster.transport.run(
                [self.cluster.python, "-S", "-I", "-c", mirror.REMOTE],
                stdin=mirror.request(roots, locals_),
                timeout=300,
            )
            done.commands += 1
            if res.exit_status != 0:
                raise HpcuiError(
                    f"the tracker relay's pass on {self.cluster.name} failed "
                    f"({res.stderr.strip()[-300:] or f'exit {res.exit_status}'}); the mirrors "
                    "here are kept and the next pass goes on from them."
                )
            got = mirror.apply(res.stdout_bytes, locals_)
            done.files += got.files
            done.bytes += got.bytes
            more = got.bytes >= mirror.PASS_BYTES
        for record, local in zip(records, locals_):
            for export in self.exporters:
                try:
                    export(self.cluster, record, local, record.job_id in ended)
                except HpcuiError as exc:  # the tracker's words; the mirror stays
                    log.warning("%s", exc)
            live = any(wandb_sync.live(r) for r in wandb_sync.offline_runs(local))
            if record.job_id in ended and not live:  # a live upload ends first
                self.finish(record.job_id or "")
                done.finished.append(record.job_id or "")
        self.passes += 1
        return done

    def _ended(self, record: JobRecord) -> bool:
        try:
            return self.cluster.job(record.job_id or "").state.is_final
        except HpcuiError:
            return False

    def run(self, *, until_idle: bool = True) -> None:
        """Passes every interval; with `until_idle`, until no tracked job is left."""
        while not self._stop.is_set():
            try:
                done = self.run_once()
            except HpcuiError as exc:  # a cut link: the next pass resumes from the mirrors
                log.warning("%s", exc)
                done = Pass(jobs=1)
            if until_idle and done.jobs == 0:
                return
            self._stop.wait(self.interval_s)

    def start(self) -> Relay:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(
                target=self.run, kwargs={"until_idle": False}, name="hpcui-track", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """No more passes; the live uploads this process started end with it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 60)
        wandb_sync.end_live(mirror_root(self.cluster))


def default_exporters() -> list[Exporter]:
    """What this machine hands the mirrors to: MLflow's server where MLFLOW_TRACKING_URI
    names one (http/https); W&B's live upload where W&B is logged in here."""
    return [mlflow_export.export, wandb_sync.export_live]
