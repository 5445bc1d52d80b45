"""A Python per submit (issue 49, defect 4): `submit(fn, python=...)` runs the job with
that interpreter instead of the cluster table's, so a second environment on one site
needs no second table. Both Slurm sites: dev's torch venv beside its system Python,
dev24's module Python by its path."""

from __future__ import annotations

import pytest

from hpcui.errors import RemotePythonError
from tests.integration.ranks import VENV_PYTHON

pytestmark = pytest.mark.devcluster


@pytest.fixture
def other_python(site):
    """A Python on the site that is not its table's: dev's torch venv; on dev24 a venv
    made here from its module's Python 3.11 (no pip: made in a second)."""
    if site.name == "dev":
        yield VENV_PYTHON
        return
    venv = f"{site.remote_info().base}/py-test-venv"
    site.run(f"module load python/3.11 && python3 -m venv --without-pip {venv}").check()
    yield f"{venv}/bin/python"
    site.run(["rm", "-rf", venv])


def interpreter() -> str:
    import sys

    return sys.executable


def test_a_submit_runs_the_python_it_names(site, other_python):
    small = {"cpus_per_task": 1, "mem": "200M", "time": "5m"}
    chosen = site.submit(interpreter, python=other_python, name="py-own", **small)
    usual = site.submit(interpreter, name="py-table", **small)
    assert chosen.result(timeout=120) == other_python
    assert usual.result(timeout=120) != other_python  # the table's python, unchanged


def test_a_python_that_is_not_there_is_named_before_anything_is_submitted(site):
    before = {r.token for r in site.records()}
    with pytest.raises(RemotePythonError, match=r"/no/such/python.*python="):
        site.submit(interpreter, python="/no/such/python", cpus_per_task=1, mem="200M")
    assert {r.token for r in site.records()} == before
