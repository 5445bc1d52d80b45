"""Facts shared by the submitting side and the compute side of a distributed job.

One place each: the rendezvous port a job derives from its id, the stop file's name
(written by `Job.stop()`, watched by `hpcui.distributed.stop_requested()`), and the
torchrun command line hpcui's torchrun launcher runs on every node. Pure functions.
"""

from __future__ import annotations

import zlib

#: Derived ports fall in [PORT_BASE, PORT_BASE + PORT_SPAN): unprivileged, below Linux's
#: ephemeral range (32768+), so an outgoing connection never holds the port first.
PORT_BASE = 20000
PORT_SPAN = 10000


def master_port(job_id: str | int) -> int:
    """The rendezvous port of a job: every rank computes the same one from the job id.

    Numeric ids (Slurm) map by modulo, so jobs whose ids differ by less than PORT_SPAN
    (all jobs running at once on a site, in practice) never share a port; other ids
    (PBS `123.server`, `123[4].server`) by CRC32.
    """
    text = str(job_id).strip()
    if not text:
        raise ValueError("job id is empty: cannot derive a port")
    n = int(text) if text.isdigit() else zlib.crc32(text.encode())
    return PORT_BASE + n % PORT_SPAN


def torchrun_argv(
    python: str,
    *,
    nnodes: int,
    nproc_per_node: int,
    endpoint: str,
    run_id: str,
    max_restarts: int,
    module: str,
    args: list[str],
) -> list[str]:
    """`python -m torch.distributed.run ...` with c10d rendezvous on `endpoint` (first node)."""
    return [
        python,
        "-u",
        "-m",
        "torch.distributed.run",
        f"--nnodes={nnodes}",
        f"--nproc-per-node={nproc_per_node}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={endpoint}",
        f"--rdzv-id={run_id}",
        f"--max-restarts={max_restarts}",
        "--module",
        module,
        *args,
    ]
