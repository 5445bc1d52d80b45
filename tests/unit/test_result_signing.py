"""Result signing: the machine secret, per-job keys, and the compute-side signer on a real
submitit job folder (run locally, no scheduler)."""

from __future__ import annotations

import os
import pickle
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from hpcui.backends.job_paths import RESULT_KEY, split_signature
from hpcui.errors import ResultIntegrityError
from hpcui.store import signing as result_signing


def test_machine_secret_is_private_and_created_once():
    first = result_signing.machine_secret()
    path = result_signing._secret_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(first) == 32
    assert result_signing.machine_secret() == first
    a, b = result_signing.job_key("tok1"), result_signing.job_key("tok2")
    assert a != b and result_signing.job_key("tok1") == a and len(a) == 32


def test_check_refuses_missing_changed_and_truncated():
    key = result_signing.job_key("t")
    data = pickle.dumps(("success", 42))
    good = result_signing.sign(data, key)
    result_signing.check(data, good + "\n", key, what="x", job_id="1")
    with pytest.raises(ResultIntegrityError, match="no signature"):
        result_signing.check(data, None, key, what="x", job_id="1")
    with pytest.raises(ResultIntegrityError, match="does not match"):
        result_signing.check(pickle.dumps(("success", 666)), good, key, what="x", job_id="1")
    with pytest.raises(ResultIntegrityError, match="does not match"):
        result_signing.check(data[:-3], good, key, what="x", job_id="1")
    with pytest.raises(ResultIntegrityError, match="does not match"):
        result_signing.check(data, good, result_signing.job_key("other"), what="x", job_id="1")


def test_the_runner_signs_the_result_submitit_wrote(tmp_path: Path):
    """`python -m hpcui.node.signed FOLDER` in a submitit job environment, as srun runs
    it: the result file gets a signature under the folder's key."""
    from submitit.core.utils import DelayedSubmission

    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "77_submitted.pkl").write_bytes(pickle.dumps(DelayedSubmission(pow, 2, 5)))
    key = result_signing.job_key("tok")
    (folder / RESULT_KEY).write_text(key.hex())
    env = {
        **os.environ,
        "SUBMITIT_EXECUTOR": "slurm",
        "SLURM_JOB_ID": "77",
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_NTASKS": "1",
        "SLURM_NODEID": "0",
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_JOB_NODELIST": "localhost",
    }
    run = subprocess.run(
        [sys.executable, "-m", "hpcui.node.signed", str(folder)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    data, signature = split_signature((folder / "77_0_result.pkl").read_bytes())
    assert signature is not None  # at the end of the result itself: no second file
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [RESULT_KEY, "77_submitted.pkl", "77_0_result.pkl"]
    )
    result_signing.check(data, signature, key, what="t", job_id="77")
    assert pickle.loads(data) == ("success", 32)
    with pytest.raises(ResultIntegrityError):  # one changed byte of the pickle
        result_signing.check(data[:-1] + b"x", signature, key, what="t", job_id="77")


def test_a_result_that_cannot_be_signed_is_removed_and_the_cause_named(
    tmp_path: Path, monkeypatch, capsys
):
    """Disk full while signing: the unsigned result would only ever be refused as
    'signature removed'; it goes, and stderr names the full disk for the client."""
    import errno

    from hpcui.node import signed

    folder = tmp_path / "job"
    folder.mkdir()
    (folder / RESULT_KEY).write_text(result_signing.job_key("tok").hex())
    result = folder / "77_0_result.pkl"
    result.write_bytes(pickle.dumps(("success", 1)))
    for name, value in {
        "SUBMITIT_EXECUTOR": "slurm", "SLURM_JOB_ID": "77", "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0", "SLURM_NTASKS": "1", "SLURM_NODEID": "0",
        "SLURM_JOB_NUM_NODES": "1", "SLURM_JOB_NODELIST": "localhost",
        "SUBMITIT_FOLDER": str(folder),
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)

    def full(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(signed.os, "replace", full)
    with pytest.raises(OSError):
        signed.sign_result(str(folder))
    assert not result.exists() and list(folder.glob("*.tmp*")) == []
    assert "No space left on device" in capsys.readouterr().err
