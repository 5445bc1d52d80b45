"""Downloads that resume only what is still the same file, and never write through a link.

On the dev cluster over SSH: a checkpoint rewritten between an interrupted download and
its resume (as training does with `checkpoints/last.pt`) used to come out as the old
file's first chunk plus the new file's rest, with "OK"; a `.part` symlink planted in a
shared download folder used to receive the bytes at its target; a folder gave
"unexpected OSError: Failure" and left `sub.part` behind.
"""

from __future__ import annotations

import hashlib
import time
import uuid

import pytest

from hpcui.errors import UsageError

pytestmark = pytest.mark.devcluster

SIZE = 10 * 1024 * 1024  # more than two read chunks


class Cut(Exception):
    pass


def _cut_after_first_chunk(done: int, total: int) -> None:
    if done > 0:
        raise Cut


def _remote_file(dev, name: str) -> tuple[str, str]:
    folder = f"{dev.remote_info().base}/dl-{uuid.uuid4().hex[:8]}"
    dev.run(f"mkdir -p {folder} && head -c {SIZE} /dev/urandom > {folder}/{name}").check()
    return folder, f"{folder}/{name}"


def _sum(dev, path: str) -> str:
    return dev.run(["sha256sum", path]).check().stdout.split()[0]


def test_a_file_rewritten_since_the_interrupted_download_starts_over(dev, tmp_path):
    folder, remote = _remote_file(dev, "last.pt")
    try:
        with pytest.raises(Cut):
            dev.download(remote, tmp_path, progress=_cut_after_first_chunk)
        assert (tmp_path / "last.pt.part").stat().st_size == 4 * 1024 * 1024
        time.sleep(1.1)  # the next save, a little later (SFTP mtimes are whole seconds)
        dev.run(f"head -c {SIZE} /dev/urandom > {remote}.new && mv {remote}.new {remote}").check()
        notes: list[str] = []
        moved, local = dev.download(remote, tmp_path, note=notes.append)
        assert hashlib.sha256(local.read_bytes()).hexdigest() == _sum(dev, remote)
        assert moved == SIZE  # all of it again: nothing of the old version kept
        assert notes and "changed since the partial download" in notes[0]
        assert not (tmp_path / "last.pt.part").exists()
        assert not (tmp_path / "last.pt.part.src").exists()
    finally:
        dev.run(f"rm -rf {folder}")


def test_the_same_file_still_resumes(dev, tmp_path):
    folder, remote = _remote_file(dev, "data.bin")
    try:
        with pytest.raises(Cut):
            dev.download(remote, tmp_path, progress=_cut_after_first_chunk)
        notes: list[str] = []
        moved, local = dev.download(remote, tmp_path, note=notes.append)
        assert moved == SIZE - 4 * 1024 * 1024 and notes == []
        assert hashlib.sha256(local.read_bytes()).hexdigest() == _sum(dev, remote)
    finally:
        dev.run(f"rm -rf {folder}")


def test_a_planted_part_link_is_never_written_through(dev, tmp_path):
    folder, remote = _remote_file(dev, "model.pt")
    victim = tmp_path / "bashrc"
    victim.write_text("# my shell setup\n")
    (tmp_path / "model.pt.part").symlink_to(victim)  # planted in a shared download folder
    try:
        with pytest.raises(UsageError, match="symbolic link"):
            dev.download(remote, tmp_path)
        assert victim.read_text() == "# my shell setup\n"
        assert not (tmp_path / "model.pt").exists()
    finally:
        dev.run(f"rm -rf {folder}")


def test_a_folder_is_refused_in_words_and_leaves_nothing(dev, tmp_path):
    folder, _ = _remote_file(dev, "x")
    try:
        dev.run(f"mkdir -p {folder}/sub").check()
        with pytest.raises(UsageError, match="is a folder: download its files"):
            dev.download(f"{folder}/sub", tmp_path)
        assert list(tmp_path.iterdir()) == []
    finally:
        dev.run(f"rm -rf {folder}")
