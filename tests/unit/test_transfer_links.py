"""Transfers that cannot be steered through links or raced (issue 65, findings 1-3 and 8),
through the local transport: the same helper both sides run (`hpcui.common.beneath`),
this machine's files. The attacker is another local user (hpcpeer, the dev cluster's
second user, or nobody): the links it plants are its own, as a real member's would be.
The dev cluster's own version of these, with hpcpeer on a shared project folder, is
tests/integration/test_transfer_links_dev.py."""

from __future__ import annotations

import os
import pwd
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from hpcui.errors import UsageError
from hpcui.jobs import file_download, transfer
from hpcui.jobs import upload as uploads
from hpcui.transport.local import LocalTransport


def _peer_uid() -> int:
    for name in ("hpcpeer", "nobody"):
        try:
            return pwd.getpwnam(name).pw_uid
        except KeyError:
            continue
    pytest.fail("no second local user (hpcpeer or nobody) to plant links as")


def plant(link: Path, target: Path) -> None:
    """A link made by another user (root gives it away: lchown is what makes it theirs)."""
    link.symlink_to(target)
    os.lchown(link, _peer_uid(), -1)


def at_once(n: int, copy: Callable[[], object]) -> list[BaseException]:
    """`copy` run by `n` threads at the same time; what each raised."""
    errors: list[BaseException] = []

    def one() -> None:
        try:
            copy()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    return errors


@pytest.fixture
def victim(tmp_path) -> Path:
    """The user's own private folder the attacker points at (their ~/.ssh)."""
    v = tmp_path / "victim"
    v.mkdir(mode=0o700)
    (v / "authorized_keys").write_text("the user's own key\n")
    return v


def dataset(root: Path) -> Path:
    data = root / "data"
    (data / "sub").mkdir(parents=True)
    (data / "top.txt").write_text("top\n")
    (data / "sub" / "authorized_keys").write_text("the attacker's key\n")
    (data / "sub" / "new.txt").write_text("new\n")
    return data


def test_an_upload_never_writes_through_a_planted_link(tmp_path, victim):
    data = dataset(tmp_path / "here")
    shared = tmp_path / "shared"
    (shared / "data").mkdir(parents=True)
    plant(shared / "data" / "sub", victim)
    done = uploads.upload(LocalTransport(), data, str(shared))
    assert (victim / "authorized_keys").read_text() == "the user's own key\n"
    assert sorted(p.name for p in victim.iterdir()) == ["authorized_keys"]
    assert (shared / "data" / "top.txt").read_text() == "top\n"  # the rest was copied
    assert done.was_refused("sub/authorized_keys") and "sub" in done.summary()
    assert done.copied == 1, done


def test_a_link_at_the_top_is_refused_unless_it_is_your_own(tmp_path, victim):
    data = dataset(tmp_path / "here")
    shared = tmp_path / "shared"
    shared.mkdir()
    plant(shared / "data", victim)
    with pytest.raises(UsageError, match="symbolic link that is not yours"):
        uploads.upload(LocalTransport(), data, str(shared))
    assert sorted(p.name for p in victim.iterdir()) == ["authorized_keys"]
    # your own link (`~/scratch` -> /gpfs/scratch/you) is the path you typed: followed
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "mine").symlink_to(real)
    uploads.upload(LocalTransport(), data, str(tmp_path / "mine"), into=False)
    assert (real / "sub" / "new.txt").read_text() == "new\n"


def test_a_download_never_writes_through_a_planted_link(tmp_path, victim):
    data = dataset(tmp_path / "there")
    here = tmp_path / "here"
    (here / "data").mkdir(parents=True)
    plant(here / "data" / "sub", victim)
    done = transfer.download_tree(LocalTransport(), str(data), here)
    assert (victim / "authorized_keys").read_text() == "the user's own key\n"
    assert (here / "data" / "top.txt").read_text() == "top\n"
    assert done.was_refused("sub/new.txt")


def test_a_folder_swapped_for_a_link_after_the_listing_is_not_read(tmp_path, victim, monkeypatch):
    """The mirror race: the listing saw a folder, the copy would have read a link."""
    (victim / "secret").write_text("private\n")
    data = dataset(tmp_path / "there")
    listed = transfer.remote_tree

    def swap_after_listing(transport, path):
        seen = listed(transport, path)
        for name in os.listdir(data / "sub"):
            (data / "sub" / name).unlink()
        (data / "sub").rmdir()
        plant(data / "sub", victim)
        (victim / "new.txt").write_text("private too\n")
        return seen

    monkeypatch.setattr(transfer, "remote_tree", swap_after_listing)
    done = transfer.download_tree(LocalTransport(), str(data), tmp_path / "here")
    got = tmp_path / "here" / "data"
    assert not (got / "sub" / "new.txt").exists() and not (got / "sub" / "secret").exists()
    assert done.was_refused("sub/new.txt") and done.copied == 1


def test_an_upload_does_not_read_a_local_folder_swapped_for_a_link(tmp_path, victim, monkeypatch):
    data = dataset(tmp_path / "here")
    (victim / "new.txt").write_text("private\n")
    listed = uploads._local_tree

    def swap_after_listing(top):
        seen = listed(top)
        for name in os.listdir(data / "sub"):
            (data / "sub" / name).unlink()
        (data / "sub").rmdir()
        plant(data / "sub", victim)
        return seen

    monkeypatch.setattr(uploads, "_local_tree", swap_after_listing)
    done = uploads.upload(LocalTransport(), data, str(tmp_path / "there"))
    assert not (tmp_path / "there" / "data" / "sub" / "new.txt").exists()
    assert done.was_refused("sub/new.txt")


def test_names_that_are_not_utf8_move_both_ways_and_stop_nothing(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    odd = os.fsdecode(b"caf\xe9.txt")  # Latin-1 bytes: a valid name, not UTF-8
    (src / odd).write_bytes(b"latin\n")
    (src / "big.bin").write_bytes(os.urandom(transfer.SMALL + 10))
    t = LocalTransport()
    done = uploads.upload(t, src, str(tmp_path / "up"))
    assert (tmp_path / "up" / "src" / odd).read_bytes() == b"latin\n" and done.copied == 2
    back = transfer.download_tree(t, str(tmp_path / "up" / "src"), tmp_path / "down")
    assert (tmp_path / "down" / "src" / odd).read_bytes() == b"latin\n" and back.copied == 2
    assert (tmp_path / "down" / "src" / "big.bin").read_bytes() == (src / "big.bin").read_bytes()


def test_folder_modes_are_kept_both_ways_as_rsync_a_keeps_them(tmp_path):
    src = tmp_path / "src"
    (src / "private").mkdir(parents=True)
    (src / "private" / "f").write_text("x")
    (src / "private").chmod(0o700)
    (src / "ro").mkdir()
    (src / "ro" / "g").write_text("y")
    (src / "ro").chmod(0o555)  # set last by the copy: files still go in first
    src.chmod(0o750)
    t = LocalTransport()
    uploads.upload(t, src, str(tmp_path / "up"))
    transfer.download_tree(t, str(tmp_path / "up" / "src"), tmp_path / "down")
    for top in (tmp_path / "up" / "src", tmp_path / "down" / "src"):
        modes = {p: (top / p).stat().st_mode & 0o777 for p in ("", "private", "ro")}
        assert modes == {"": 0o750, "private": 0o700, "ro": 0o555}, (top, modes)
        assert (top / "ro" / "g").read_text() == "y"


def test_two_downloads_of_one_file_at_once_never_mix(tmp_path):
    there = tmp_path / "there"
    there.mkdir()
    body = os.urandom(3 * file_download.CHUNK + 5)
    (there / "ckpt.pt").write_bytes(body)
    here = tmp_path / "here"
    here.mkdir()
    t = LocalTransport()
    notes: list[str] = []
    errors = at_once(
        2, lambda: file_download.download(t, str(there / "ckpt.pt"), here, note=notes.append)
    )
    assert not errors, errors
    assert (here / "ckpt.pt").read_bytes() == body
    assert sorted(p.name for p in here.iterdir()) == ["ckpt.pt"]


def test_three_uploads_of_one_big_file_at_once_all_succeed(tmp_path):
    """Three builds of one environment upload the same wheel into the same folder."""
    wheel = tmp_path / "wheels" / "torch-2.13.0-cp311.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(os.urandom(2 * uploads.UP_CHUNK + 7))
    t = LocalTransport()
    errors = at_once(
        3, lambda: uploads.upload(t, wheel.parent, str(tmp_path / "there"), into=False)
    )
    assert not errors, errors
    assert (tmp_path / "there" / wheel.name).read_bytes() == wheel.read_bytes()
    assert [p.name for p in (tmp_path / "there").iterdir()] == [wheel.name]
