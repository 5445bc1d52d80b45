"""hpcui/ and backends/ type-check clean with mypy (pyproject's [tool.mypy]: stale
`type: ignore`s are errors too). A whole-package check takes seconds: a system test."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_hpcui_and_backends_type_check_clean():
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "hpcui", "backends"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Success: no issues found" in done.stdout


def test_the_check_can_fail(tmp_path):
    """mypy with the project's settings reports a wrong type and an ignore nothing needs."""
    bad = tmp_path / "bad.py"
    bad.write_text('x: int = "a"\ny: str = "b"  # type: ignore[assignment]\n')
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), str(bad)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 1
    assert "[assignment]" in done.stdout and "[unused-ignore]" in done.stdout
