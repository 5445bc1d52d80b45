"""Clusters of the dev sites made from the dev cluster's client config, for tests that need
one of their own (a module's, or a process's view: its own connection and memos)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


@contextmanager
def site_cluster(
    devcluster: Path, site: str, *, more_setup: Sequence[str] = (), **update: Any
) -> Iterator[Any]:
    """A Cluster of dev site `site` from the dev cluster's client config (a process's own:
    its own connection and memos), the config `update`d and `more_setup` run after its
    setup lines."""
    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HPCUI_CONFIG", str(devcluster))
        cfg = load_config().cluster(site).model_copy(update=update)
        if more_setup:
            cfg = cfg.model_copy(update={"setup": [*(cfg.setup or []), *more_setup]})
        with Cluster(cfg) as c:
            yield c
