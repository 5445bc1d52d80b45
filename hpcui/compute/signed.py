"""The compute-side runner: stock submitit's process_job, then the result signed.

`python -m hpcui.compute.signed FOLDER` replaces `python -m submitit.core._submit FOLDER`
in hpcui's batch scripts; PBS and torchrun call `run()`. Standard library and submitit
only (this runs on the cluster). Why: hpcui/result_signing.py.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sys

KEY_NAME = ".hpcui-result-key"  # backends/job_paths.RESULT_KEY (the client writes it)
SUFFIX = ".hmac"  # backends/job_paths.SIGNATURE_SUFFIX


def sign_result(folder: str) -> None:
    """Sign this task's result file, if the job has a key and the task left a result."""
    from submitit import JobEnvironment

    try:
        with open(os.path.join(folder, KEY_NAME)) as fh:
            key = bytes.fromhex(fh.read().strip())
    except FileNotFoundError:
        return  # submitted by an hpcui without signing
    result = str(JobEnvironment().paths.result_pickle)
    try:
        with open(result, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return  # requeued or killed: no result to sign
    tmp = f"{result}{SUFFIX}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(hmac.new(key, data, hashlib.sha256).hexdigest() + "\n")
    os.replace(tmp, result + SUFFIX)


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
