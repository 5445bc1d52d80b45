"""System tests: whole-app walks, a headless browser, a wheel build, real torchrun and
processes. They need no dev cluster but take seconds each, so they live apart from the
fast unit suite (`pytest tests/unit`) under the `system` marker; CI runs them all."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/system/" in str(item.path):
            item.add_marker(pytest.mark.system)
