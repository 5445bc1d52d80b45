"""What a job or a service leaves on this machine is its user's alone: the local cluster's
job folders are 0700 and its logs 0600 (a service's token may be in them) while the
user's own code keeps the user's umask; a browser opened on a token URL gets a private
redirect page, never the token in its argv (which `ps` shows every local user)."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest


def writes_files(where: str) -> str:
    import sys

    print("token=not-for-others", file=sys.stderr)
    Path(where, "checkpoint.bin").write_bytes(b"x")
    return "ok"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_local_job_folders_and_logs_are_private(local_box, tmp_path: Path):
    from hpcui.clusters.api import connect

    old = os.umask(0o022)  # the user's usual umask
    try:
        cluster = connect("local")
        job = cluster.submit(writes_files, str(tmp_path))
        assert job.result(timeout=120) == "ok"
    finally:
        os.umask(old)
    folder = Path(job.folder)
    assert mode(folder) == 0o700
    logs = sorted(folder.glob("*_log.*"))
    assert len(logs) >= 2 and all(mode(f) == 0o600 for f in logs), [
        (f.name, oct(mode(f))) for f in logs
    ]
    assert "token=not-for-others" in "".join(f.read_text() for f in logs)
    assert mode(tmp_path / "checkpoint.bin") == 0o644  # the user's code: the user's umask


@pytest.fixture
def recording_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$BROWSER as a command that records the argv it was started with (webbrowser runs
    it as it would run firefox)."""
    argv_file = tmp_path / "argv"
    script = tmp_path / "browser"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {argv_file}\n')
    script.chmod(0o755)
    monkeypatch.setenv("BROWSER", str(script))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir(mode=0o700)
    import webbrowser

    monkeypatch.setattr(webbrowser, "_tryorder", None)  # read $BROWSER afresh
    return argv_file


def test_a_token_url_never_reaches_the_browsers_argv(recording_browser: Path):
    from hpcui.services.browser import open_url

    url = "http://127.0.0.1:8123/lab?token=s3cret-token-value"
    open_url(url)
    for _ in range(50):
        if recording_browser.exists() and recording_browser.read_text():
            break
        time.sleep(0.1)
    argv = recording_browser.read_text()
    assert "s3cret" not in argv and argv.startswith("file://"), argv
    page = Path(argv.strip().removeprefix("file://"))
    assert mode(page) == 0o600 and mode(page.parent) == 0o700
    assert url in page.read_text()  # the page sends the browser on
    plain = "http://127.0.0.1:8124/"
    open_url(plain)  # nothing secret: opened as it is
    for _ in range(50):
        if recording_browser.read_text().strip() == plain:
            break
        time.sleep(0.1)
    assert recording_browser.read_text().strip() == plain
