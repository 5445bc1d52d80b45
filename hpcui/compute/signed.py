"""The compute-side runner: stock submitit's process_job, then the result signed.

`python -m hpcui.compute.signed FOLDER` replaces `python -m submitit.core._submit FOLDER`
in hpcui's batch scripts; PBS and torchrun call `run()`. Standard library, submitit and
the job folder's names only (this runs on the cluster). `sign` is also what the client
checks against (hpcui/result_signing.py says why results are signed).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import sys

from hpcui.backends.job_paths import RESULT_KEY, SIGNATURE_SUFFIX


def sign(data: bytes, key: bytes) -> str:
    """A result file's signature: HMAC-SHA256 of its bytes under the job's key, hex."""
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def sign_result(folder: str) -> None:
    """Sign this task's result file, if the job has a key and the task left a result."""
    from submitit import JobEnvironment

    try:
        with open(os.path.join(folder, RESULT_KEY)) as fh:
            key = bytes.fromhex(fh.read().strip())
    except FileNotFoundError:
        return  # submitted by an hpcui without signing
    result = str(JobEnvironment().paths.result_pickle)
    try:
        with open(result, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return  # requeued or killed: no result to sign
    tmp = f"{result}{SIGNATURE_SUFFIX}.tmp{os.getpid()}"
    try:
        with open(tmp, "w") as fh:
            fh.write(sign(data, key) + "\n")
        os.replace(tmp, result + SIGNATURE_SUFFIX)
    except OSError as exc:  # a full disk or quota: an unsigned result is never read, so
        # it goes, and stderr names the cause the client reports ("could not write its
        # result: the disk or quota ... is full"), not "its signature was removed"
        for path in (tmp, result):
            with contextlib.suppress(OSError):
                os.remove(path)
        print(f"hpcui: could not sign the result, removed it: {exc}", file=sys.stderr, flush=True)
        raise


def run(folder: str) -> None:
    from submitit.core.submission import process_job

    try:
        process_job(folder)
    finally:
        sign_result(folder)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m hpcui.compute.signed JOB_FOLDER")
    run(sys.argv[1])
