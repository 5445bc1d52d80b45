"""The compute-side runner: stock submitit's process_job, then the result signed.

`python -m hpcui.node.signed FOLDER` replaces `python -m submitit.core._submit FOLDER`
in hpcui's batch scripts; PBS and torchrun call `run()`. Standard library, submitit and
the job folder's names only (this runs on the cluster). `sign` is also what the client
checks against (hpcui/store/signing.py says why results are signed).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import hmac
import os
import sys

from hpcui.backends import chain
from hpcui.backends.job_paths import (
    CALL_INDEX_ENV,
    CALLS_PACK,
    RESULT_KEY,
    SIGNATURE_TRAILER,
    read_call,
)


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
    # The signature goes at the end of the result file itself (unpickling stops before
    # it): one file and one read per result instead of two.
    tmp = f"{result}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data + SIGNATURE_TRAILER + sign(data, key).encode() + b"\n")
        os.replace(tmp, result)
    except OSError as exc:  # a full disk or quota: an unsigned result is never read, so
        # it goes, and stderr names the cause the client reports ("could not write its
        # result: the disk or quota ... is full"), not "its signature was removed"
        for path in (tmp, result):
            with contextlib.suppress(OSError):
                os.remove(path)
        print(f"hpcui: could not sign the result, removed it: {exc}", file=sys.stderr, flush=True)
        raise


def write_call(folder: str) -> None:
    """An array element's call, from the calls pack to where submitit's runner reads it.
    Already there after a requeue: that is the state submitit's checkpoint() left."""
    index = os.environ.get(CALL_INDEX_ENV)
    if not index:
        return
    from submitit import JobEnvironment

    target = str(JobEnvironment().paths.submitted_pickle)
    if os.path.exists(target):
        return
    with open(os.path.join(folder, CALLS_PACK), "rb") as fh:
        data = read_call(fh, int(index))
    tmp = f"{target}.tmp{os.getpid()}"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, target)  # every task of the element may do this: same bytes


def mark_chain_done(folder: str) -> None:
    """A chain's segment, task 0 only: write DONE when this segment finished the chain's
    work (backends/chain.py decides from the result and the time-limit flag), so the
    segments after it are cancelled and never run the call again."""
    from submitit import JobEnvironment

    from hpcui import distributed

    env = JobEnvironment()
    if env.global_rank != 0:
        return
    try:
        with open(env.paths.result_pickle, "rb") as fh:
            head: bytes | None = fh.read(64)
    except FileNotFoundError:
        head = None
    if not chain.finished_work(head, distributed._State.time_limit_near):
        if head is not None:
            print(
                "hpcui: the call returned after the time-limit signal: the chain's next "
                "segment goes on from its checkpoint",
                file=sys.stderr,
                flush=True,
            )
        return
    done = os.path.join(folder, chain.DONE)
    tmp = f"{done}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(f"{env.job_id}\n")
    os.replace(tmp, done)


class _Exit:
    #: set once the task returned and its result is signed (and torch.distributed ran)
    skip_native_teardown = False


def _last_exit_handler() -> None:
    """Registered before the task runs, so it runs after every exit handler the task
    registered (atexit is last-in, first-out) and after Python joined its threads.

    torch's native teardown (a gloo/c10d thread destroyed while joinable: "terminate called
    without an active exception") can abort a rank that has finished its work, and Slurm
    then calls a job with every result signed FAILED. After a successful task that used
    torch.distributed, the process ends here with 0, before that teardown.
    """
    if _Exit.skip_native_teardown:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(0)


def run(folder: str) -> None:
    from submitit.core.submission import (
        process_job,
    )

    from hpcui.node import time_limit

    atexit.register(_last_exit_handler)
    time_limit.install()  # the early signal says the limit is near; the job runs to it
    time_limit.arm_from_env()  # PBS sends none: USR2 at walltime - delay (else no-op)
    os.environ["SUBMITIT_FOLDER"] = str(folder)  # as process_job sets it: the job's paths
    write_call(folder)
    from hpcui import distributed

    try:
        distributed.export_rank_env()  # Lightning, Accelerate, DeepSpeed find their ranks
    except Exception as exc:  # a call that is not distributed still runs
        # (in an image on PBS, $PBS_NODEFILE is not inside: hd.setup() would say so itself)
        print(f"hpcui: no rank variables exported: {exc}", file=sys.stderr, flush=True)
    from hpcui.node.track_env import point_trackers

    point_trackers(job_id=distributed.job_id_from_env(os.environ))  # track=: write offline here
    try:
        process_job(folder)
    finally:
        sign_result(folder)
        if os.environ.get(chain.ENV):
            mark_chain_done(folder)
    _Exit.skip_native_teardown = "torch.distributed" in sys.modules


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m hpcui.node.signed JOB_FOLDER")
    run(sys.argv[1])
