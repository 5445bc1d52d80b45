"""A folder listing (backends.files) run by the real GNU find here: names with a newline,
a tab or bytes that are not UTF-8 come back whole (before: a name with a newline was cut
at it and the rest dropped)."""

from __future__ import annotations

import subprocess

from hpcui.backends.files import list_command, parse_listing


def test_every_name_comes_back_whole(tmp_path):
    names = ["plain.txt", "two\nlines.log", "tab\there", "  spaced  ", "ünïcode.pt"]
    for name in names:
        (tmp_path / name).write_text(name)
    (tmp_path / "sub\ndir").mkdir()
    out = subprocess.run(["sh", "-c", list_command(str(tmp_path))], capture_output=True)
    assert out.returncode == 0
    listed = parse_listing(out.stdout.decode("utf-8", "surrogateescape"), str(tmp_path))
    assert sorted(f.name for f in listed) == sorted([*names, "sub\ndir"])
    by_name = {f.name: f for f in listed}
    assert by_name["sub\ndir"].is_dir and by_name["two\nlines.log"].size == len("two\nlines.log")
    assert by_name["two\nlines.log"].path == f"{tmp_path}/two\nlines.log"
