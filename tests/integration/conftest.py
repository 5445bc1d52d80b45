"""Fixtures of the integration tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DEVCLUSTER, ROOT, SITES
from tests.integration.clusters import site_cluster
from tests.integration.ranks import VENV_PYTHON

#: how each dev site's jobs get torch: the first site names its venv's python, the second
#: loads its pytorch module (which loads python/3.11), as users of a module-based site do
TORCH = {
    "dev": {"python": VENV_PYTHON},
    "dev24": {"python": "python3", "setup": ["module load pytorch/2.13.0"]},
}


def _torch_cluster(devcluster, site: str) -> Iterator[Any]:
    with site_cluster(devcluster, site, **TORCH[site]) as c:
        yield c


@pytest.fixture(scope="module")
def torch_cluster(devcluster) -> Iterator[Any]:
    """The first dev site with the torch venv as the jobs' Python (one per test module)."""
    yield from _torch_cluster(devcluster, "dev")


@pytest.fixture(scope="module", params=SITES)
def torch_site(devcluster, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Each dev site in turn with torch for its jobs (one per test module and site)."""
    yield from _torch_cluster(devcluster, request.param)


@pytest.fixture
def agent_env(devcluster: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    """An environment whose agent is this test's own; `persist` set per test."""
    import shutil
    import tempfile

    run = Path(tempfile.mkdtemp(prefix="hpa-"))  # short: AF_UNIX paths end at 107 bytes
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "XDG_RUNTIME_DIR": str(run),
        "HPCUI_CONFIG": str(tmp_path / "hpcui.toml"),
        "HPCUI_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": str(ROOT),
        "NO_COLOR": "1",
    }
    base = (DEVCLUSTER / "hpcui.toml").read_text()

    def configure(persist: str | int) -> dict[str, str]:
        value = json.dumps(persist)
        (tmp_path / "hpcui.toml").write_text(f"{base}\n[agent]\npersist = {value}\n")
        return env

    yield configure
    subprocess.run(
        [sys.executable, "-m", "hpcui.cli", "agent", "stop", "--all"],
        env=env, capture_output=True, timeout=60,
    )  # fmt: skip
    shutil.rmtree(run, ignore_errors=True)
