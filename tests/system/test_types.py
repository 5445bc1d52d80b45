"""hpcui/ and backends/ type-check clean with mypy (pyproject's [tool.mypy]: `mypy hpcui`,
backends/ reached through the hpcui/backends symlink, the pydantic plugin on, stale
`type: ignore`s are errors too). A whole-package check takes seconds: a system test."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def mypy(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_hpcui_and_backends_type_check_clean():
    done = mypy("hpcui")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Success: no issues found" in done.stdout
    checked = int(done.stdout.split(" in ")[-1].split()[0])
    on_disk = len(list((ROOT / "hpcui").rglob("*.py"))) + len(
        list((ROOT / "backends").rglob("*.py"))
    )
    assert checked >= on_disk  # backends/ is checked, not silently skipped


def test_the_check_can_fail(tmp_path):
    """mypy with the project's settings reports a wrong type and an ignore nothing needs."""
    bad = tmp_path / "bad.py"
    bad.write_text('x: int = "a"\ny: str = "b"  # type: ignore[assignment]\n')
    done = mypy("--config-file", str(ROOT / "pyproject.toml"), str(bad), cwd=tmp_path)
    assert done.returncode == 1
    assert "[assignment]" in done.stdout and "[unused-ignore]" in done.stdout


def test_the_check_sees_into_backends(tmp_path):
    """A type error inside backends/, and a wrong use of a backends type from hpcui/, are
    both reported: the records are types, not `Any` behind ignore_missing_imports."""
    repo = tmp_path / "repo"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "hpcui", repo / "hpcui", symlinks=True, ignore=skip)
    shutil.copytree(ROOT / "backends", repo / "backends", ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    (repo / "backends" / "probe_bad.py").write_text(
        "from hpcui.backends.states import JobState\n\nSTATE: JobState = 'RUNNING'\n"
    )
    (repo / "hpcui" / "probe_use.py").write_text(
        "from hpcui.backends.records import QueueEntry\n\n\n"
        "def jid(e: QueueEntry) -> int:\n    return e.job_id\n"
    )
    done = mypy("hpcui/backends/probe_bad.py", "hpcui/probe_use.py", cwd=repo)
    assert done.returncode == 1, done.stdout
    assert "probe_bad.py:3: error" in done.stdout and "[assignment]" in done.stdout
    assert "probe_use.py:5: error" in done.stdout and "[return-value]" in done.stdout
