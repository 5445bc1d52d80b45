"""The local job registry (SQLite): jobs outlive the Python process and the laptop's reboot.

A submission is recorded before sbatch runs (state SUBMITTING, keyed by its client
token) and completed with the job id after; a crash in between leaves a record that
the token lookup can finish, never a lost job.
"""

from __future__ import annotations

import builtins
import functools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from pydantic import Field

from hpcui.backends.model import Model
from hpcui.backends.states import JobState
from hpcui.errors import RegistryError

#: seconds a call waits for another process's lock before it fails with RegistryError
BUSY_TIMEOUT_S = 30.0
P = ParamSpec("P")
R = TypeVar("R")

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    cluster     TEXT NOT NULL,
    token       TEXT NOT NULL,
    job_id      TEXT,
    array_index INTEGER,
    name        TEXT NOT NULL DEFAULT '',
    folder      TEXT NOT NULL,
    num_tasks   INTEGER NOT NULL DEFAULT 1,
    state       TEXT NOT NULL,
    state_raw   TEXT NOT NULL DEFAULT '',
    submitted_at REAL NOT NULL,
    updated_at  REAL NOT NULL,
    meta        TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (cluster, token, array_index)
);
CREATE UNIQUE INDEX IF NOT EXISTS jobs_by_id ON jobs(cluster, job_id);
"""


#: a chain's segment that a cut-off submit never queued
CHAIN_CUT = "not submitted: the chain's submit was cut off before this segment"


def segment_index(segment: int) -> int:
    """A chain's segment in array_index: -1, -2, ... (-1 alone is a plain job: segment 0
    reads as one where chains are not known)."""
    return -1 - segment


class JobRecord(Model):
    cluster: str
    token: str
    job_id: str | None = None
    array_index: int = -1  # -1: not an array element
    name: str = ""
    folder: str
    num_tasks: int = 1
    state: JobState = JobState.SUBMITTING
    state_raw: str = ""
    submitted_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)
    meta: dict = Field(default_factory=dict)


def default_path() -> Path:
    env = os.environ.get("HPCUI_DATA_DIR")
    if env:
        base = Path(env).expanduser()
    else:
        from platformdirs import user_data_dir

        base = Path(user_data_dir("hpcui"))
    return base / "registry.sqlite"


def _sqlite_errors(
    method: Callable[Concatenate[Registry, P], R],
) -> Callable[Concatenate[Registry, P], R]:
    """sqlite3 errors become RegistryError: a message that says which file and what to do,
    caught by every face like any other hpcui error (the app shows it and stays up)."""

    @functools.wraps(method)
    def wrapper(self: Registry, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise RegistryError(
                f"The job registry {getattr(self, 'path', default_path())} could not be used: {exc}. If another hpcui "
                "process holds it, try again when it is done; if the file is damaged, move "
                "it aside (hpcui starts a new one, and forgets the jobs it listed)."
            ) from exc

    return wrapper


_shared: dict[Path, Registry] = {}
_shared_lock = threading.Lock()


def shared_registry() -> Registry:
    """The process's one connection to the registry at `default_path()` (every face and
    every Cluster use it; a path set per test through HPCUI_DATA_DIR gets its own)."""
    path = default_path()
    with _shared_lock:
        reg = _shared.get(path)
        if reg is None:
            reg = _shared[path] = Registry(path)
        return reg


class JobRecords:
    """What the faces read of the local registry — every cluster's jobs, connected or not
    (the app's table before a cluster answers, `hpcui jobs --registry`): list and get,
    nothing that writes. Everything else about a job goes through its Cluster."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    @property
    def path(self) -> Path:
        return self._registry.path

    def get(self, cluster: str, job_id: str) -> JobRecord | None:
        return self._registry.get(cluster, job_id)

    def list(self, cluster: str | None = None, limit: int = 1000) -> builtins.list[JobRecord]:
        return self._registry.list(cluster, limit=limit)


def job_records() -> JobRecords:
    """The read view of the process's registry (`shared_registry`)."""
    return JobRecords(shared_registry())


class Registry:
    """Thread-safe; one connection per process, WAL so several processes can share it."""

    @_sqlite_errors
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not self.path.exists():  # private from the start: job names, folders, scripts
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=BUSY_TIMEOUT_S)
        self._lock = threading.Lock()
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL: a commit survives a crash of this process (what the record
            # before sbatch is for) without an fsync per submit.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)

    @_sqlite_errors
    def add(self, records: list[JobRecord]) -> None:
        with self._lock, self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO jobs VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                [_row(r) for r in records],
            )

    @_sqlite_errors
    def set_job_ids(self, cluster: str, token: str, base_id: str, is_array: bool) -> None:
        """Complete a submission: give every record of `token` its scheduler id.

        A scheduler can hand out an id again (a reinstalled controller starts from 1):
        older records holding one of the new ids keep their data but give up the id
        (kept in meta as `reused_job_id`), so the new job is recorded, never lost.
        """
        now = time.time()
        with self._lock, self._db:
            indices = [
                r[0]
                for r in self._db.execute(
                    "SELECT array_index FROM jobs WHERE cluster=? AND token=?", (cluster, token)
                )
            ]
            new_ids = [f"{base_id}_{i}" for i in indices] if is_array else [base_id]
            for start in range(0, len(new_ids), 500):
                chunk = new_ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                self._db.execute(
                    "UPDATE jobs SET meta = json_set(meta, '$.reused_job_id', job_id), "
                    f"job_id = NULL, updated_at = ? WHERE cluster = ? AND token != ? "
                    f"AND job_id IN ({marks})",
                    (now, cluster, token, *chunk),
                )
            if is_array:
                self._db.execute(
                    "UPDATE jobs SET job_id = ? || '_' || array_index, state=?, updated_at=? "
                    "WHERE cluster=? AND token=?",
                    (base_id, JobState.PENDING.value, now, cluster, token),
                )
            else:
                self._db.execute(
                    "UPDATE jobs SET job_id=?, state=?, updated_at=? WHERE cluster=? AND token=?",
                    (base_id, JobState.PENDING.value, now, cluster, token),
                )

    @_sqlite_errors
    def set_chain_ids(self, cluster: str, token: str, ids: list[str]) -> None:
        """Complete a chain's submission: segment k (array_index -1-k) gets ids[k]; a
        segment the submit never reached (a cut-off answer) is marked not submitted."""
        now = time.time()
        with self._lock, self._db:
            marks = ",".join("?" * len(ids))
            self._db.execute(  # an id handed out again: as in set_job_ids
                "UPDATE jobs SET meta = json_set(meta, '$.reused_job_id', job_id), "
                f"job_id = NULL, updated_at = ? WHERE cluster = ? AND token != ? "
                f"AND job_id IN ({marks})",
                (now, cluster, token, *ids),
            )
            for k, job_id in enumerate(ids):
                self._db.execute(
                    "UPDATE jobs SET job_id=?, state=?, updated_at=? "
                    "WHERE cluster=? AND token=? AND array_index=?",
                    (job_id, JobState.PENDING.value, now, cluster, token, segment_index(k)),
                )
            self._db.execute(
                "UPDATE jobs SET state=?, state_raw=?, updated_at=? "
                "WHERE cluster=? AND token=? AND job_id IS NULL",
                (JobState.FAILED.value, CHAIN_CUT, now, cluster, token),
            )

    @_sqlite_errors
    def update_states(self, cluster: str, states: dict[str, tuple[JobState, str]]) -> None:
        now = time.time()
        with self._lock, self._db:
            self._db.executemany(
                "UPDATE jobs SET state=?, state_raw=?, updated_at=? WHERE cluster=? AND job_id=? "
                "AND (state != ? OR state_raw != ?)",
                [
                    (s.value, raw, now, cluster, jid, s.value, raw)
                    for jid, (s, raw) in states.items()
                ],
            )

    @_sqlite_errors
    def set_meta(self, cluster: str, job_id: str, key: str, value: Any) -> None:
        """Keep `value` (JSON) under `key` in the job's record (e.g. the call that made it)."""
        with self._lock, self._db:
            self._db.execute(
                "UPDATE jobs SET meta = json_set(meta, '$.' || ?, json(?)) "
                "WHERE cluster=? AND job_id=?",
                (key, json.dumps(value), cluster, job_id),
            )

    @_sqlite_errors
    def mark_not_submitted(self, cluster: str, token: str, why: str) -> None:
        """A cut-off submission that no job carries: FAILED with the reason, kept visible."""
        with self._lock, self._db:
            self._db.execute(
                "UPDATE jobs SET state=?, state_raw=?, updated_at=? "
                "WHERE cluster=? AND token=? AND job_id IS NULL",
                (JobState.FAILED.value, why, time.time(), cluster, token),
            )

    def unfinished_submissions(self, cluster: str) -> list[JobRecord]:
        """One record per submission still waiting for its job id (its first element)."""
        return self._query(
            "WHERE cluster=? AND job_id IS NULL AND state=? AND array_index IN (-1, 0) "
            "ORDER BY submitted_at",
            (cluster, JobState.SUBMITTING.value),
        )

    @_sqlite_errors
    def mark_cleaned(self, cluster: str, folders: list[str], when: float) -> None:
        """`hpcui clean` removed these job folders: their jobs stay listed, marked."""
        with self._lock, self._db:
            self._db.executemany(
                "UPDATE jobs SET meta = json_set(meta, '$.cleaned_at', ?) "
                "WHERE cluster=? AND folder=?",
                [(when, cluster, f) for f in folders],
            )

    @_sqlite_errors
    def remove_token(self, cluster: str, token: str) -> None:
        with self._lock, self._db:
            self._db.execute("DELETE FROM jobs WHERE cluster=? AND token=?", (cluster, token))

    def get(self, cluster: str, job_id: str) -> JobRecord | None:
        rows = self._query("WHERE cluster=? AND job_id=?", (cluster, job_id))
        return rows[0] if rows else None

    def by_token(self, cluster: str, token: str) -> list[JobRecord]:
        return self._query("WHERE cluster=? AND token=? ORDER BY array_index", (cluster, token))

    def tagged(self, cluster: str, key: str, value: str) -> builtins.list[JobRecord]:
        """The records whose meta holds `key` = `value` (a sweep's elements), oldest first."""
        return self._query(
            "WHERE cluster=? AND json_extract(meta, '$.' || ?) = ? ORDER BY submitted_at",
            (cluster, key, value),
        )

    def tracked(self, cluster: str, limit: int = 200) -> builtins.list[JobRecord]:
        """The jobs submitted with track= (hpcui.trackers.relay), newest first."""
        return self._query(
            "WHERE cluster=? AND job_id IS NOT NULL AND json_extract(meta, '$.track') IS NOT NULL"
            " ORDER BY submitted_at DESC LIMIT ?",
            (cluster, limit),
        )

    def list(self, cluster: str | None = None, limit: int = 1000) -> builtins.list[JobRecord]:
        if cluster is None:
            return self._query("ORDER BY submitted_at DESC LIMIT ?", (limit,))
        return self._query("WHERE cluster=? ORDER BY submitted_at DESC LIMIT ?", (cluster, limit))

    @_sqlite_errors
    def _query(self, where: str, args: tuple) -> builtins.list[JobRecord]:
        with self._lock:
            cur = self._db.execute(f"SELECT * FROM jobs {where}", args)
            cols = [c[0] for c in cur.description]
            rows = cur.fetchall()
        out = []
        for row in rows:
            data = dict(zip(cols, row))
            data["meta"] = json.loads(data["meta"] or "{}")
            out.append(JobRecord(**data))
        return out

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _row(r: JobRecord) -> tuple:
    return (
        r.cluster,
        r.token,
        r.job_id,
        r.array_index,
        r.name,
        r.folder,
        r.num_tasks,
        r.state.value,
        r.state_raw,
        r.submitted_at,
        r.updated_at,
        json.dumps(r.meta),
    )
