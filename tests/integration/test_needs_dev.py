"""What a call imports, checked on the dev cluster before anything is queued (issue 45,
part 1): the login node's Python is asked in the probe's round trip (or one more, for a
name no earlier submit asked about), a missing package is refused in words, and a warm
submit asks nothing more."""

from __future__ import annotations

import importlib
import textwrap

import pytest

from hpcui.errors import RemotePythonError
from tests.integration.test_usage_dev import cli

pytestmark = pytest.mark.devcluster

#: installed here (hpcui's own dependency), not on the dev sites' /usr/bin/python3
RICH = importlib.metadata.version("rich")


def _local_module(tmp_path, monkeypatch, name: str, source: str):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(name)


def _counting(cluster, monkeypatch) -> list[str]:
    """Every command the cluster's transport runs, as text."""
    seen: list[str] = []
    real = cluster.transport.run

    def run(cmd, *args, **kwargs):
        seen.append(cmd.decode() if isinstance(cmd, bytes) else str(cmd))
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(cluster.transport, "run", run)
    return seen


def test_a_package_the_cluster_lacks_is_refused_before_anything_is_queued(
    dev, tmp_path, monkeypatch
):
    mod = _local_module(tmp_path, monkeypatch, "mytrain_rich", """
        import rich

        def train(n):
            return rich.get_console().width * n
    """)  # fmt: skip
    before = {r.token for r in dev.records()}
    with pytest.raises(RemotePythonError) as err:
        dev.submit(mod.train, 2, time="1m")
    said = str(err.value)
    assert said.startswith(
        f"`rich` (rich {RICH} here) is not importable by dev's Python (/usr/bin/python3)"
    ), said
    assert f"/usr/bin/python3 -m pip install --user rich=={RICH}" in said, said
    assert "Nothing was submitted" in said
    assert {r.token for r in dev.records()} == before  # no record, no folder, no job


def test_a_scripts_imports_are_checked_by_hpcui_run(dev, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import rich\nprint(rich.__name__)\n")
    res = cli("-c", "dev", "run", "--time", "1m", str(script))
    assert res.returncode != 0
    assert "`rich` (rich" in res.stderr and "is not importable by dev's Python" in res.stderr, (
        res.stderr
    )


def uses_torch(n: int) -> str:
    import torch

    return str(torch.zeros(n).sum().item())


def test_a_warm_submit_asks_the_cluster_nothing_more(torch_cluster, monkeypatch):
    """The torch venv has torch: the first submit asks about it (in the probe, or in one
    command when the probe ran before), the second asks nothing."""
    seen = _counting(torch_cluster, monkeypatch)
    first = torch_cluster.submit(uses_torch, 3, time="2m", cpus_per_task=1, mem="1G")
    asked_first = [c for c in seen if "importlib.util" in c]
    seen.clear()
    second = torch_cluster.submit(uses_torch, 4, time="2m", cpus_per_task=1, mem="1G")
    asked_second = [c for c in seen if "importlib.util" in c]
    assert len(asked_first) <= 1 and asked_second == [], (asked_first, asked_second)
    assert first.result(timeout=180) == "0.0" and second.result(timeout=180) == "0.0"


def test_the_submit_form_says_it_before_the_submit(dev_env, tmp_path):
    """Pilot: with the form filled in, the preview's lines say what the call imports and
    that dev's Python lacks it (off the typing, with the start estimate)."""
    import asyncio

    from hpcui.tui.app import HpcuiApp
    from tests.support.pilot import wait_for

    script = tmp_path / "formtrain.py"
    script.write_text("import rich\n\n\ndef train(n=1):\n    return rich.get_console().width * n\n")

    async def go() -> str:
        app = HpcuiApp("dev", connect=["dev"])
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: app.hub.conns["dev"].status == "connected", 60)
            await pilot.press("3")
            form = app.screen
            form.query_one("#target").value = f"{script}:train"
            form.query_one("#res-time").value = "5m"
            await wait_for(pilot, lambda: form.imports_text.startswith("imports:"), 60)
            return form.imports_text

    said = asyncio.run(go())
    assert f"`rich` (rich {RICH} here) is not importable by dev's Python" in said, said
    assert "env=auto" in said, said
