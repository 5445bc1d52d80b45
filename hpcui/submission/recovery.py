"""Finishing submissions that were cut off: no job lost, none submitted twice.

Every submit records its token before the upload (state SUBMITTING, `meta.submitter` =
this process) and claims its job folder before it unpacks anything
(`hpcui.store.remote.submit_claim`). A submission whose record still has no job id is
*unfinished*; once its submitter is gone (killed, crashed) or gave up (a timeout, a link
that did not come back), it is finished here from what the job folder and the scheduler
say — never guessed, never deleted while the outcome is open:

======================  =====================================  ==========================
folder says             meaning                                the record becomes
======================  =====================================  ==========================
ID                      the scheduler answered                 its job id, tracked
NOFOLDER / UNCLAIMED    the claim never ran: nothing submitted dropped, folder removed
LIVE                    the submitting shell still runs        unchanged, looked at later
DEAD                    claimed, no answer, shell gone         the job carrying the token,
                                                               else FAILED "NOT SUBMITTED"
======================  =====================================  ==========================
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hpcui.errors import HpcuiError
from hpcui.schedulers.base import Scheduler
from hpcui.store import remote as remote_side
from hpcui.store.registry import JobRecord, Registry
from hpcui.transport.base import Transport

log = logging.getLogger(__name__)

#: a submission older than this is finished even if a process with its submitter's pid
#: lives (pids are reused); no submit takes an hour
ORPHAN_S = 3600.0
#: folders asked about in one remote command
BATCH = 100
NOT_SUBMITTED = "NOT SUBMITTED (cut off after its claim; no job carries its token)"

_in_flight: set[tuple[str, str]] = set()
_in_flight_lock = threading.Lock()


@contextlib.contextmanager
def in_flight(cluster: str, token: str) -> Iterator[None]:
    """Marks a submit this process is still making: recovery leaves it alone meanwhile."""
    with _in_flight_lock:
        _in_flight.add((cluster, token))
    try:
        yield
    finally:
        with _in_flight_lock:
            _in_flight.discard((cluster, token))


def submitter() -> dict[str, Any]:
    """Who makes a submission (kept in its record's meta) so others can tell it died."""
    return {"pid": os.getpid(), "host": socket.gethostname()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process holds the pid now; it is alive, not ours
    return True


def abandoned(rec: JobRecord, now: float | None = None) -> bool:
    """True when no live process is still making this submission."""
    with _in_flight_lock:
        if (rec.cluster, rec.token) in _in_flight:
            return False
    age = (time.time() if now is None else now) - rec.submitted_at
    who = rec.meta.get("submitter") or {}
    pid, host = who.get("pid"), who.get("host")
    if host != socket.gethostname() or not isinstance(pid, int) or os.name != "posix":
        return age > ORPHAN_S  # (os.kill(pid, 0) would end the process on Windows)
    if pid == os.getpid():
        return True  # ours, and not in flight: a submit here that gave up on it
    return age > ORPHAN_S or not _alive(pid)


@dataclass
class Recovered:
    """What one pass found, by token."""

    found: dict[str, str] = field(default_factory=dict)  # token -> the scheduler's job id
    #: token -> what the submit got: [base id], or a chain's segment ids in order
    ids: dict[str, list[str]] = field(default_factory=dict)
    not_submitted: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # still being submitted somewhere


def finish_cut_off(
    name: str,
    registry: Registry,
    transport: Transport,
    scheduler: Scheduler,
    track: Callable[[list[str]], None],
    *,
    tokens: Iterable[str] | None = None,
) -> Recovered:
    """Finish the abandoned submissions of cluster `name` (or exactly `tokens`, abandoned or
    not); a job found is tracked with `track`.

    One remote command per 100 folders, plus one token lookup only for a claim whose
    shell died without an answer.
    """
    want = None if tokens is None else set(tokens)
    recs = [
        r
        for r in registry.unfinished_submissions(name)
        if (r.token in want if want is not None else abandoned(r))
    ]
    out = Recovered()
    if not recs:
        return out
    verdicts: dict[str, remote_side.FolderVerdict] = {}
    for start in range(0, len(recs), BATCH):
        folders = [r.folder for r in recs[start : start + BATCH]]
        res = transport.run(remote_side.reconcile_command(folders))
        res.check("looking for cut-off submissions")
        verdicts.update(remote_side.parse_reconcile(res.stdout))
    for rec in recs:
        verdict = verdicts.get(rec.folder, remote_side.FolderVerdict("LIVE"))
        _finish(name, registry, transport, scheduler, track, rec, verdict, out)
    return out


def _finish(
    name: str,
    registry: Registry,
    transport: Transport,
    scheduler: Scheduler,
    track: Callable[[list[str]], None],
    rec: JobRecord,
    verdict: remote_side.FolderVerdict,
    out: Recovered,
) -> None:
    token = rec.token
    job_id: str | None = None
    chained = "chain" in rec.meta
    got: list[str] = []
    if verdict.state == "ID":
        try:  # the answer's lines, joined by commas (a chain's segments)
            got = [scheduler.parse_submit(a) for a in verdict.answer.split(",") if a]
            job_id = got[0] if got else None
        except HpcuiError:
            verdict = remote_side.FolderVerdict("DEAD")  # an answer with no id: ask the token
    if verdict.state == "LIVE":
        out.waiting.append(token)
        return
    if verdict.state in ("NOFOLDER", "UNCLAIMED"):
        log.warning(
            "submission %s on %s never reached its claim: nothing was submitted", token, name
        )
        registry.remove_token(name, token)
        if verdict.state == "UNCLAIMED":
            with contextlib.suppress(HpcuiError):
                transport.run(["rm", "-rf", rec.folder])
        out.not_submitted.append(token)
        return
    if job_id is None:  # DEAD: the scheduler's own list decides
        job_id = scheduler.find_token(token)
    if job_id is None:
        log.warning("submission %s on %s: %s", token, name, NOT_SUBMITTED)
        registry.mark_not_submitted(name, token, NOT_SUBMITTED)
        out.not_submitted.append(token)
        return
    if chained:  # after a lost answer only the first segment is known by its token
        got = got or [job_id]
        registry.set_chain_ids(name, token, got)
    else:
        registry.set_job_ids(name, token, job_id, is_array=rec.array_index >= 0)
        got = [job_id]
    ids = [r.job_id for r in registry.by_token(name, token) if r.job_id]
    track(ids)
    out.ids[token] = got
    log.warning("submission %s on %s finished after a cut-off: job %s", token, name, job_id)
    out.found[token] = job_id
