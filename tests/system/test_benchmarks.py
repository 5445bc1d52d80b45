"""Every benchmark runs in its quick mode (`--quick`: small sizes, seconds), so a rename
breaks a test here and not a figure nobody looks at. The figures are not judged: each run
must end well and print its figure lines. The dev-cluster benchmarks run in
tests/integration/test_benchmarks_quick.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.system

#: benchmark -> a line its output must hold (a figure, with its number)
NO_CLUSTER = {
    "parse_bench": r"squeue 200 lines .* \d+\.\d",
    "pickle_bench": r"hpcui +\d+ bytes/call +\d+\.\d us/call",
    "tui_bench": r"first paint: .* \d+\.\d",
    "watch_cost_bench": r"10 idle job folders +now +\d+\.\d+ % .* before +\d+\.\d+ %",
    "track_bench": r"hpcui relay +\d+\.\dms +\d+\.\d{3}% +1\n",
}


def run_quick(name: str, env: dict[str, str] | None = None, timeout: int = 240) -> str:
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", "--quick"],
        cwd=ROOT,
        env={**os.environ, **(env or {}), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize("name", sorted(NO_CLUSTER))
def test_benchmark_runs_quick(name: str, tmp_path: Path) -> None:
    out = run_quick(name, {"XDG_RUNTIME_DIR": str(tmp_path)})
    assert re.search(NO_CLUSTER[name], out), out


def test_every_benchmark_is_run_by_the_suite() -> None:
    from tests.integration.test_benchmarks_quick import ON_CLUSTER

    on_disk = {p.stem for p in (ROOT / "benchmarks").glob("*_bench.py")}
    assert on_disk == set(NO_CLUSTER) | set(ON_CLUSTER)


def test_every_benchmark_has_a_quick_mode() -> None:
    """`--quick` is read by every one of them (argparse's option or benchmarks.QUICK)."""
    silent = [
        p.name
        for p in (ROOT / "benchmarks").glob("*_bench.py")
        if "--quick" not in p.read_text() and "sized(" not in p.read_text()
    ]
    assert silent == []
