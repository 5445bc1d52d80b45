"""The login node's side of the end push (hpcui.jobs.end_push.watch_command), run by a real sh.

It must print a line when a result file appears in any watched folder (also one whose
name needs quoting), stay quiet while logs grow, and end with its channel (stdin EOF).
"""

from __future__ import annotations

import os
import select
import subprocess
import time

import pytest

from hpcui.jobs.end_push import watch_command


def _line(proc: subprocess.Popen, within: float) -> bytes | None:
    ready, _, _ = select.select([proc.stdout], [], [], within)
    return proc.stdout.readline() if ready else None


def _no_python_path(tmp_path) -> str:
    """A PATH with the shell tools the fallback loop uses and no python3."""
    import shutil

    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("sh", "ls", "grep", "stat", "sleep", "cat", "kill"):
        found = shutil.which(tool)
        if found:
            (tools / tool).symlink_to(found)
    return str(tools)


@pytest.fixture(params=["python3", "shell"])
def login_path(request, tmp_path):
    """The login node with python3 (the reader that starts no process per tick), and one
    without it (the shell loop)."""
    if request.param == "python3":
        return os.environ["PATH"]
    return _no_python_path(tmp_path)


@pytest.mark.timeout(30)
def test_a_new_result_file_is_one_line_and_a_growing_log_is_none(tmp_path, login_path):
    quiet, odd = tmp_path / "a", tmp_path / "it's a $(job) folder"
    quiet.mkdir()
    odd.mkdir()
    (odd / "12_0_log.out").write_text("")
    (odd / "11_0_result.pkl").write_bytes(b"old")  # there before: not news
    proc = subprocess.Popen(
        watch_command([str(quiet), str(odd)]), shell=True, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, env={**os.environ, "PATH": login_path},
        executable="/bin/sh",
    )  # fmt: skip
    try:
        time.sleep(0.5)  # the reader has its first count
        with open(odd / "12_0_log.out", "a") as fh:
            fh.write("epoch 1\n")
        assert _line(proc, 1.0) is None  # a log that grows says nothing
        tmp = odd / "12_0_result.pkl.tmp1"
        tmp.write_bytes(b"result")
        os.replace(tmp, odd / "12_0_result.pkl")
        assert _line(proc, 5.0) == b"2\n"
        (quiet / "13_0_result.pkl").write_bytes(b"r")
        assert _line(proc, 5.0) == b"3\n"
    finally:
        proc.stdin.close()  # the channel closes: the reader ends, no loop left behind
    assert proc.wait(timeout=5) is not None
