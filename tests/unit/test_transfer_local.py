"""Folders both ways through the local transport (the `local` cluster: same code, this
machine's files): odd names, a resumed big upload continuing its part at an offset, and
the tree listing's parser on names with tabs and newlines."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from hpcui.backends.files import parse_tree, tree_command
from hpcui.jobs import transfer
from hpcui.jobs import upload as uploads
from hpcui.transport.local import LocalTransport


class Cut(Exception):
    pass


def sums(top: Path) -> dict[str, str]:
    return {
        p.relative_to(top).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in top.rglob("*")
        if p.is_file() and not p.is_symlink() and ".hpcui-part-" not in p.name
    }


def test_odd_names_survive_the_listing_and_the_copy(tmp_path):
    src = tmp_path / "src"
    (src / "a\tb").mkdir(parents=True)
    (src / "a\tb" / "new\nline.txt").write_text("x")
    (src / "-dash").write_text("y")
    (src / "space name").write_text("z")
    t = LocalTransport()
    kinds = {
        rel: kind for kind, rel, *_ in parse_tree(t.run(tree_command(str(src))).stdout_bytes) if rel
    }
    assert kinds == {"a\tb": "d", "a\tb/new\nline.txt": "f", "-dash": "f", "space name": "f"}
    done = transfer.download_tree(t, str(src), tmp_path / "dl", checksum=True)
    assert sums(tmp_path / "dl" / "src") == sums(src) and done.verified == 3
    up = uploads.upload(t, src, str(tmp_path / "up"), checksum=True)
    assert sums(tmp_path / "up" / "src") == sums(src) and up.copied == 3


def test_a_cut_big_upload_continues_its_part_from_the_offset(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "big.bin").write_bytes(os.urandom(3 * 1024 * 1024 + 5))
    monkeypatch.setattr(transfer, "SMALL", 1024)
    monkeypatch.setattr(uploads, "UP_CHUNK", 1024 * 1024)

    def cut(done: int, total: int) -> None:
        if done >= 1024 * 1024:
            raise Cut

    t = LocalTransport()
    with pytest.raises(Cut):
        uploads.upload(t, src, str(tmp_path / "up"), progress=cut)
    assert not (tmp_path / "up" / "src" / "big.bin").exists()
    again = uploads.upload(t, src, str(tmp_path / "up"))
    assert again.moved == 2 * 1024 * 1024 + 5  # from the part's end, not from 0
    assert sums(tmp_path / "up" / "src") == sums(src)
    assert not [p for p in (tmp_path / "up" / "src").iterdir() if p.name.startswith(".hpcui")]
