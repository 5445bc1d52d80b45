"""A result holding an object of a module this machine lacks (issue 49, defect 2): said
as what it is, with what to do, never "the file is damaged"; `hpcui result` exits 1,
not 5 (the job COMPLETED); the result is kept and reads once the module is here. Real
Slurm, real sshd: the job makes its own module on the cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcui.backends.states import JobState
from hpcui.errors import ResultNeedsModuleError
from tests.conftest import ROOT

pytestmark = pytest.mark.devcluster

MODULE = "onlythere_{tag}"


def foreign_object(folder: str, name: str) -> object:
    """Returns an instance of a class from a module that exists only on the cluster."""
    import importlib
    import sys as _sys
    from pathlib import Path as _P

    _P(folder).mkdir(parents=True, exist_ok=True)
    _P(folder, f"{name}.py").write_text(
        "class Thing:\n    def __init__(self):\n        self.v = 42\n"
    )
    _sys.path.insert(0, folder)
    return importlib.import_module(name).Thing()


def test_a_result_of_a_module_missing_here_is_said_and_kept(dev, tmp_path: Path):
    import uuid

    name = MODULE.format(tag=uuid.uuid4().hex[:8])
    folder = f"{dev.transport.home()}/mods-{name}"
    job = dev.submit(foreign_object, folder, name, time="5m")
    with pytest.raises(ResultNeedsModuleError) as err:
        job.result(timeout=120)
    said = str(err.value)
    assert f"module {name!r}" in said and f"pip install {name}" in said, said
    assert "damaged" not in said and err.value.module == name
    assert job.state is JobState.COMPLETED
    assert dev.run(["test", "-s", job.paths.result(0)]).ok  # the result stays there

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        [sys.executable, "-m", "hpcui.cli", "result", f"dev:{job.job_id}", "--json"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 1, (res.returncode, res.stdout, res.stderr)
    assert f"module {name!r}" in json.loads(res.stdout)["error"]["message"]

    local = tmp_path / "here"  # the module installed here: the kept result reads
    local.mkdir()
    (local / f"{name}.py").write_text(
        "class Thing:\n    def __init__(self):\n        self.v = 42\n"
    )
    sys.path.insert(0, str(local))
    try:
        assert job.result(timeout=60).v == 42
    finally:
        sys.path.remove(str(local))
        sys.modules.pop(name, None)
        dev.run(["rm", "-rf", folder])
