"""A job that is not yours: every control verb says so with the same words and exit code.

Slurm's own output, captured on the dev cluster's Slurm 24.11 when hpcpeer acted on
hpcuser's running job (`runuser -u hpcpeer -- scontrol hold 32`, ...). Before: cancel
exited 1 (a raw remote error), hold/release/time 4 with "the controller may be busy",
requeue 2.
"""

from __future__ import annotations

import pytest

from hpcui.cli import exit_code_for
from hpcui.errors import UsageError
from hpcui.schedulers.slurm import _control_checked
from hpcui.transport.base import CommandResult

CAPTURED = {  # verb -> (tool, exit status, stderr) as Slurm 24.11 printed them
    "hold": ("scontrol", 1, "Invalid user id for job 32\nslurm_suspend error: Invalid user id\n"),
    "release": (
        "scontrol",
        1,
        "Invalid user id for job 32\nslurm_suspend error: Invalid user id\n",
    ),
    "update TimeLimit=00:05:00": ("scontrol", 1, "Invalid user id for job 32\n"),
    "requeue": ("scontrol", 1, "Access/permission denied for job 32\n"),
    "cancel": (
        "scancel",
        210,
        "scancel: error: Kill job error on job id 32: Access/permission denied\n",
    ),
}


@pytest.mark.parametrize("verb", sorted(CAPTURED))
def test_not_your_job_is_one_usage_error_for_every_verb(verb):
    tool, status, stderr = CAPTURED[verb]
    res = CommandResult(status, b"", stderr.encode())
    with pytest.raises(UsageError) as err:
        _control_checked(res, verb, ["32"], tool=tool)
    assert "it is not yours" in str(err.value) and "controller may be busy" not in str(err.value)
    assert exit_code_for(err.value) == 2
