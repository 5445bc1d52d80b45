"""A user project with its own top-level `backends` package submits from it.

hpcui's dialects install as ``hpcui.backends``: before, hpcui's top-level ``backends``
took the user's package for its own (pickled by reference) and the runtime bundle's copy
shadowed it on the compute node, so the call failed there.
"""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

pytestmark = pytest.mark.devcluster


@pytest.fixture
def user_backends(tmp_path, monkeypatch):
    pkg = tmp_path / "project" / "backends"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""The user\'s own backends package."""\n')
    (pkg / "models.py").write_text(
        textwrap.dedent("""
            SCALE = 7

            class Linear:
                def __init__(self, w):
                    self.w = w

                def __call__(self, x):
                    return self.w * x * SCALE

            def train(x):
                import sys
                return Linear(2)(x), sorted(m for m in sys.modules if m == "backends")
        """)
    )
    # the repo root (pytest's cwd) holds hpcui's backends/ folder: the user's must win
    monkeypatch.syspath_prepend(str(pkg.parent))
    for name in [m for m in sys.modules if m == "backends" or m.startswith("backends.")]:
        monkeypatch.delitem(sys.modules, name)
    models = importlib.import_module("backends.models")
    assert models.__file__ == str(pkg / "models.py")
    yield models
    for name in [m for m in sys.modules if m == "backends" or m.startswith("backends.")]:
        del sys.modules[name]


def test_submit_from_a_user_package_named_backends(dev, user_backends):
    import hpcui.backends

    assert "hpcui" in hpcui.backends.__name__  # hpcui's own dialects are not `backends`
    job = dev.submit(user_backends.train, 3, time="5m")
    value, imported = job.result(timeout=300)
    assert value == 2 * 3 * 7
    # on the node nothing named `backends` came with hpcui's runtime bundle
    assert imported == []
