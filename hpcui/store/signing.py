"""Results are unpickled only when the job itself wrote them.

Unpickling runs code, and a result file comes from a folder on a shared filesystem: in a
group-writable project directory anyone in the group can swap a job folder for one with a
crafted ``*_result.pkl``. So each job gets a key (HMAC of the job's token under this
machine's secret, kept 0600 in hpcui's data directory), written 0600 into its job folder
(0700) by the submit's claim command; the compute-side runner signs each result it writes (``<result>.hmac``), and the
client checks the signature before unpickling. Whoever cannot read the job folder cannot
learn the key. Trust model and limits: docs/decisions/result-signing.md.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from hpcui.errors import ResultIntegrityError
from hpcui.node.signed import sign
from hpcui.store.registry import default_path

__all__ = ["check", "job_key", "machine_secret", "sign"]

SECRET_NAME = "result-signing.key"


def _secret_path() -> Path:

    return default_path().parent / SECRET_NAME


def machine_secret() -> bytes:
    """32 random bytes, created once (0600, never overwritten: a race keeps the first)."""
    return _secret_at(_secret_path())


@functools.lru_cache(maxsize=8)
def _secret_at(path: Path) -> bytes:
    """Read once per process (every submit and get_job needs it). Created whole or not
    at all: written to a private temporary file, then linked into place, so a process
    racing this one never reads a half-written secret."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32) + "\n")
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: keep theirs
        finally:
            tmp.unlink()
    return bytes.fromhex(path.read_text().strip())


def job_key(token: str) -> bytes:
    """The job's signing key: the same for every task and array element of a submission."""
    return hmac.new(
        machine_secret(), b"hpcui-result-key:" + token.encode(), hashlib.sha256
    ).digest()


def check(data: bytes, signature: str | None, key: bytes, *, what: str, job_id: str) -> None:
    """Raise ResultIntegrityError unless `signature` is `data`'s under `key`."""
    if signature is None:
        raise ResultIntegrityError(
            f"The result of job {job_id} ({what}) has no signature: the job did not write it, "
            "or its signature was removed. hpcui does not unpickle it. If someone else can "
            "write to your remote_base, make it private (chmod 700) and resubmit.",
            job_id=job_id,
        )
    if not hmac.compare_digest(sign(data, key), signature.strip()):
        raise ResultIntegrityError(
            f"The result of job {job_id} ({what}) does not match its signature: it was changed "
            "or truncated after the job wrote it. hpcui does not unpickle it. Check who can "
            "write to your remote_base; resubmit the job.",
            job_id=job_id,
        )
