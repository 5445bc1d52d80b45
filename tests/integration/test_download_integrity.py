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
from hpcui.jobs.file_download import CHUNK

pytestmark = pytest.mark.devcluster

SIZE = CHUNK + CHUNK // 4  # more than one read chunk


class Cut(Exception):
    pass


def _cut_after_first_chunk(done: int, total: int) -> None:
    if done > 0:
        raise Cut


@pytest.fixture
def folder(dev):
    """A folder of this test's on the cluster, removed afterwards."""
    path = f"{dev.remote_info().base}/dl-{uuid.uuid4().hex[:8]}"
    dev.run(["mkdir", "-p", path]).check()
    yield path
    dev.run(["rm", "-rf", path])


def _remote_file(dev, folder: str, name: str) -> str:
    dev.run(f"head -c {SIZE} /dev/urandom > {folder}/{name}").check()
    return f"{folder}/{name}"


def _interrupted(dev, remote: str, tmp_path) -> None:
    """A download cut after its first chunk (a dropped link): one chunk kept in `.part`."""
    with pytest.raises(Cut):
        dev.files.download(remote, tmp_path, progress=_cut_after_first_chunk)


def _sum(dev, path: str) -> str:
    return dev.run(["sha256sum", path]).check().stdout.split()[0]


def test_a_file_rewritten_since_the_interrupted_download_starts_over(dev, folder, tmp_path):
    remote = _remote_file(dev, folder, "last.pt")
    _interrupted(dev, remote, tmp_path)
    assert (tmp_path / "last.pt.part").stat().st_size == CHUNK
    time.sleep(1.1)  # the next save, a little later (SFTP mtimes are whole seconds)
    dev.run(f"head -c {SIZE} /dev/urandom > {remote}.new && mv {remote}.new {remote}").check()
    notes: list[str] = []
    moved, local = dev.files.download(remote, tmp_path, note=notes.append)
    assert hashlib.sha256(local.read_bytes()).hexdigest() == _sum(dev, remote)
    assert moved == SIZE  # all of it again: nothing of the old version kept
    assert notes and "changed since the partial download" in notes[0]
    assert not (tmp_path / "last.pt.part").exists()
    assert not (tmp_path / "last.pt.part.src").exists()


def test_the_same_file_still_resumes(dev, folder, tmp_path):
    remote = _remote_file(dev, folder, "data.bin")
    _interrupted(dev, remote, tmp_path)
    notes: list[str] = []
    moved, local = dev.files.download(remote, tmp_path, note=notes.append)
    assert moved == SIZE - CHUNK and notes == []
    assert hashlib.sha256(local.read_bytes()).hexdigest() == _sum(dev, remote)


def test_a_planted_part_link_is_never_written_through(dev, folder, tmp_path):
    remote = _remote_file(dev, folder, "model.pt")
    victim = tmp_path / "bashrc"
    victim.write_text("# my shell setup\n")
    (tmp_path / "model.pt.part").symlink_to(victim)  # planted in a shared download folder
    with pytest.raises(UsageError, match="symbolic link"):
        dev.files.download(remote, tmp_path)
    assert victim.read_text() == "# my shell setup\n"
    assert not (tmp_path / "model.pt").exists()


def test_a_folder_is_refused_in_words_and_leaves_nothing(dev, folder, tmp_path):
    dev.run(["mkdir", "-p", f"{folder}/sub"]).check()
    with pytest.raises(UsageError, match="is a folder: copy it with"):
        dev.files.download(f"{folder}/sub", tmp_path)
    assert list(tmp_path.iterdir()) == []
