"""`hpcui clean`: a tidy remote home. Every job leaves a folder (script, pickles, logs,
results); HPC homes have small byte and file quotas (100k files is common).

A job folder is removed only when every job in it has ended — by the registry and by the
scheduler, asked once for all candidates — and either each result the folder holds was
fetched (`Job.result()` keeps a checked copy on this machine, so it stays readable) or
the submission is older than `older_than`. A job that ended without a result (TIMEOUT,
killed, cancelled) keeps its folder too until then: its logs are all that says what
happened. Pending and running jobs are never touched,
nor anything outside `<remote_base>/jobs/<token>` folders hpcui made. One remote command
per 100 folders counts files and bytes and removes them (`dry_run`: counts only); the
registry keeps the jobs, with `cleaned_at` in their meta.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path

from hpcui.backends.job_paths import result_name
from hpcui.backends.model import Model
from hpcui.backends.states import JobState
from hpcui.common.units import parse_time
from hpcui.errors import HpcuiError
from hpcui.jobs.job import kept_result_path
from hpcui.schedulers.base import Scheduler
from hpcui.store import remote as remote_side
from hpcui.store.registry import JobRecord, Registry
from hpcui.transport.base import Transport
from hpcui.transport.quoting import quote_bytes

log = logging.getLogger(__name__)

#: the `keep` policy runs at most this often per cluster
AUTO_CLEAN_S = 86400.0

BATCH = 100
_TOKEN = re.compile(r"[0-9a-f]{16}")


class CleanedFolder(Model):
    folder: str
    job_ids: list[str]
    files: int
    bytes: int


class CleanReport(Model):
    cluster: str
    dry_run: bool
    removed: list[CleanedFolder]
    files: int  # removed (or, dry run, that would be)
    bytes: int
    kept_active: int  # folders with a pending or running job
    kept_unfetched: int  # ended, a result not fetched yet, not older than the policy
    #: environments env= built that no job used within --older-than (hpcui env list)
    environments: list[str] = []
    environment_files: int = 0
    environment_bytes: int = 0
    #: ended without a result (timed out, killed, cancelled), not older than the policy:
    #: the logs say what happened
    kept_no_result: int = 0


def clean(
    name: str,
    registry: Registry,
    transport: Transport,
    scheduler: Scheduler,
    *,
    remote_base: str,
    result_cache: Path,
    older_than: timedelta | None = None,
    dry_run: bool = False,
) -> CleanReport:
    """Cluster `name`'s ended job folders under `remote_base` (see the module's doc)."""
    base = remote_base.rstrip("/") + "/jobs/"
    by_folder: dict[str, list[JobRecord]] = {}
    for rec in registry.list(name, limit=10_000_000):
        if rec.job_id and not rec.meta.get("cleaned_at"):
            by_folder.setdefault(rec.folder, []).append(rec)
    # ours only: a folder hpcui made under this cluster's job base, named by its token
    by_folder = {
        f: recs
        for f, recs in by_folder.items()
        if f.startswith(base) and _TOKEN.fullmatch(f[len(base) :])
    }
    # The registry lags both ways: a job whose end no process was waiting for (submit
    # without --wait) stays PENDING there, and a job it calls ended may have been requeued.
    # So the scheduler's word for every candidate, one call; the registry learns it too.
    ids = [r.job_id or "" for recs in by_folder.values() for r in recs]
    now_states = scheduler.status(ids) if ids else {}
    learned = {
        r.job_id: (s.state, s.state_raw)
        for recs in by_folder.values()
        for r in recs
        if r.job_id and (s := now_states.get(r.job_id)) is not None and s.state is not r.state
    }
    if learned and not dry_run:
        registry.update_states(name, learned)

    def over(rec: JobRecord) -> bool:  # the scheduler's state, else the registry's
        status = now_states.get(rec.job_id or "")
        return rec.state.is_final if status is None else not _running(status)

    ended = {f: recs for f, recs in by_folder.items() if all(over(r) for r in recs)}
    active = len(by_folder) - len(ended)
    cutoff = None if older_than is None else time.time() - older_than.total_seconds()
    unfetched, resultless = _unfetched(transport, result_cache, ended)
    keep = unfetched | resultless
    chosen = {
        f: recs
        for f, recs in ended.items()
        if f not in keep or (cutoff is not None and max(r.submitted_at for r in recs) < cutoff)
    }
    removed = _remove(transport, list(chosen), dry_run=dry_run)
    out = [
        CleanedFolder(folder=f, job_ids=[r.job_id or "" for r in chosen[f]], files=n, bytes=size)
        for f, (n, size) in removed.items()
    ]
    if not dry_run:
        registry.mark_cleaned(name, [f for f in removed], time.time())
    return CleanReport(
        cluster=name,
        dry_run=dry_run,
        removed=out,
        files=sum(c.files for c in out),
        bytes=sum(c.bytes for c in out),
        kept_active=active,
        kept_unfetched=len([f for f in ended if f in unfetched and f not in chosen]),
        kept_no_result=len([f for f in ended if f in resultless - unfetched and f not in chosen]),
    )


def _running(status: object) -> bool:
    state = getattr(status, "state", None)
    return isinstance(state, JobState) and not state.is_final


def _unfetched(
    transport: Transport, result_cache: Path, ended: dict[str, list[JobRecord]]
) -> tuple[set[str], set[str]]:
    """(folders holding a result this machine has no copy of, folders of a job that left
    no result at all), from one remote listing."""
    if not ended:
        return set(), set()
    remote = remote_side.list_results(transport, list(ended))  # result file name -> ok
    unfetched, resultless = set(), set()
    for folder, recs in ended.items():
        for rec in recs:
            for task in range(rec.num_tasks):
                name = result_name(rec.job_id or "", str(task))
                kept = kept_result_path(result_cache, folder, rec.job_id or "", task)
                if kept.exists():
                    continue
                if name in remote:
                    unfetched.add(folder)
                else:
                    resultless.add(folder)
    return unfetched, resultless


def _remove(
    transport: Transport, folders: Sequence[str], *, dry_run: bool
) -> dict[str, tuple[int, int]]:
    """Files and bytes per folder (du -k), removed unless `dry_run`: one command per batch."""
    out: dict[str, tuple[int, int]] = {}
    for start in range(0, len(folders), BATCH):
        chunk = folders[start : start + BATCH]
        cmd = (
            b"for d in "
            + b" ".join(quote_bytes(f) for f in chunk)
            + b'; do [ -d "$d" ] || continue; n=$(find "$d" -type f | wc -l); '
            b'k=$(du -sk "$d" | cut -f1); printf \'%s %s %s\\n\' "$n" "$k" "$d"; '
            + (b"" if dry_run else b'rm -rf "$d"; ')
            + b"done; true"
        )
        res = transport.run(cmd)
        if not res.ok:
            raise HpcuiError(f"Cleaning job folders failed: {res.stderr.strip()[:500]}")
        for line in res.stdout.splitlines():
            n, k, folder = [*line.split(" ", 2), "", ""][:3]
            if n.isdigit() and k.isdigit() and folder in chunk:
                out[folder] = (int(n), int(k) * 1024)
    return out


def auto_clean(
    keep: str | None, stamp: Path, clean: Callable[[timedelta], CleanReport]
) -> threading.Thread | None:
    """The config's `keep` policy: at most once a day per cluster (`stamp`, beside the
    registry, shared by every process), in a background thread (returned; None when it
    was not the time); never fails a submit."""
    if not keep:
        return None
    try:
        if time.time() - stamp.stat().st_mtime < AUTO_CLEAN_S:
            return None
    except FileNotFoundError:
        pass
    stamp.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    stamp.touch()
    older = timedelta(seconds=parse_time(keep))

    def work() -> None:
        try:
            report = clean(older)
            log.info("keep=%s: %d folders, %d files removed", keep, len(report.removed),
                     report.files)  # fmt: skip
        except HpcuiError as exc:
            log.warning("automatic clean failed: %s", exc)

    thread = threading.Thread(target=work, name="hpcui-keep", daemon=True)
    thread.start()
    return thread
