"""submitit's job environment for PBS, and the runner the PBS batch script starts per rank.

submitit finds job environments through entry points, which a zip on PYTHONPATH (the
runtime bundle) cannot provide. So this module runs as the task's entry point,
``python -m hpcui.node.pbs_env FOLDER``: it adds ``PbsJobEnvironment`` to submitit's
(cached) plugin list and calls stock ``process_job``. Inside the task,
``submitit.JobEnvironment()`` is then this class, so user code and hpcui.distributed
see the right ranks.

The batch script (backends/pbs/script.py) exports the variables read here:
HPCUI_JOB_ID (``1234.server`` or ``1234.server_7``), HPCUI_RANK, HPCUI_LOCAL_RANK,
HPCUI_WORLD_SIZE, HPCUI_NUM_NODES, HPCUI_NODE_RANK. Standard library + submitit only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from submitit.core import job_environment, logger, plugins


class PbsJobEnvironment(job_environment.JobEnvironment):
    """Active when SUBMITIT_EXECUTOR=pbs (set by hpcui's PBS batch script)."""

    _env = {  # submitit reads this mapping (a ClassVar in its base class)
        "job_id": "HPCUI_JOB_ID",
        "num_tasks": "HPCUI_WORLD_SIZE",
        "num_nodes": "HPCUI_NUM_NODES",
        "node": "HPCUI_NODE_RANK",
        "global_rank": "HPCUI_RANK",
        "local_rank": "HPCUI_LOCAL_RANK",
    }

    @property
    def hostnames(self) -> Sequence[str]:
        """Distinct hosts of $PBS_NODEFILE in order (the first is rank 0's node)."""
        path = os.environ.get("PBS_NODEFILE")
        if not path or not os.path.exists(path):
            return [self.hostname]
        with open(path, encoding="utf-8") as fh:
            hosts = [line.strip() for line in fh if line.strip()]
        return list(dict.fromkeys(hosts)) or [self.hostname]

    def _requeue(self, countdown: int) -> None:
        # PBS offers no requeue a job can ask for itself (qrerun needs an operator on
        # most sites): submitit then ends the task, and the result file says why.
        logger.get_logger().info(
            f"Job {self.job_id} on PBS is not requeued ({countdown} timeouts left): "
            "resubmit it; a Checkpointable function resumes from its checkpoint."
        )


def install() -> None:
    """Make submitit know the PBS environment (idempotent)."""
    envs = plugins._get_plugins()[1]  # the cached list get_job_environment() reads
    if not any(isinstance(e, PbsJobEnvironment) for e in envs):
        envs.insert(0, PbsJobEnvironment())
        plugins.get_job_environments.cache_clear()


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        raise SystemExit("usage: python -m hpcui.node.pbs_env FOLDER")
    os.environ.setdefault("SUBMITIT_EXECUTOR", "pbs")
    install()
    from hpcui.node.signed import run

    run(args[0])  # stock process_job, then the result signed


if __name__ == "__main__":
    from hpcui.node.pbs_env import main as _main  # the importable module's class, not __main__'s

    _main()
