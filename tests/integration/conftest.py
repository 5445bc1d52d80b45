"""Fixtures of the integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.ranks import VENV_PYTHON


@pytest.fixture(scope="module")
def torch_cluster(devcluster) -> Iterator[Any]:
    """The dev cluster with the torch venv as the jobs' Python (one per test module)."""
    from hpcui.cluster import Cluster
    from hpcui.config import load_config

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HPCUI_CONFIG", str(devcluster))
        cfg = load_config().cluster("dev").model_copy(update={"python": VENV_PYTHON})
        with Cluster(cfg) as c:
            yield c
