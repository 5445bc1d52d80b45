"""Folders both ways on both dev sites over real SSH: `download` of a job's folder,
`upload`, and `sync` one way, each only what differs, resumable, nothing half-written ever
under its final name, mtimes kept, and a checksum on request (issue 49, what the user
missed). Each side is checked against the other by SHA-256 computed where it lives."""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from pathlib import Path

import pytest

from hpcui.jobs.file_download import CHUNK
from hpcui.jobs.upload import UP_CHUNK
from tests.integration.test_any_job import sbatch_script
from tests.integration.test_usage_dev import cli

pytestmark = pytest.mark.devcluster

BIG = CHUNK + 2 * UP_CHUNK + 1024  # more than one read chunk, two upload chunks


class Cut(Exception):
    """A dropped link, as the copy sees it."""


@pytest.fixture
def remote_dir(site):
    path = f"{site.remote_info().base}/xfer-{uuid.uuid4().hex[:8]}"
    site.run(["mkdir", "-p", path]).check()
    yield path
    site.run(["rm", "-rf", path])


def make_remote_tree(site, path: str) -> None:
    """A TensorBoard-like run: 300 small files in nested folders, a big checkpoint, a link."""
    site.run(
        f"cd {path} && mkdir -p runs/a runs/b/c && "
        "for i in $(seq 1 150); do echo event $i > runs/a/ev.$i; echo x$i > runs/b/c/s.$i; done"
        f" && head -c {BIG} /dev/urandom > last.pt && ln -s last.pt latest.pt"
        " && printf 'odd' > 'name with space.txt' && chmod 640 runs/a/ev.1"
    ).check()


def remote_sums(site, path: str) -> dict[str, str]:
    out = site.run(f"cd {path} && find . -type f -printf '%P\\0' | xargs -0 sha256sum").check()
    return {line[66:]: line[:64] for line in out.stdout.splitlines()}


def local_sums(top: Path) -> dict[str, str]:
    return {
        p.relative_to(top).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in top.rglob("*")
        if p.is_file() and not p.is_symlink()
    }


def test_a_folder_comes_down_whole_then_only_what_changed(site, remote_dir, tmp_path):
    make_remote_tree(site, remote_dir)
    seen: list[tuple[int, int]] = []
    first = site.files.fetch(remote_dir, tmp_path, progress=lambda d, t: seen.append((d, t)))
    top = tmp_path / Path(remote_dir).name
    assert first.target == str(top)
    assert local_sums(top) == remote_sums(site, remote_dir)  # 302 files, byte for byte
    assert first.copied == 302 and first.skipped == 0 and first.links == ["latest.pt"]
    assert (
        seen[-1] == (first.total, first.total)
        and first.total
        == BIG + sum(len(f"event {i}\n") + len(f"x{i}\n") for i in range(1, 151)) + 3
    )
    # mtimes and permission bits kept: the next run compares them
    mtime = float(site.run(f"stat -c %Y {remote_dir}/last.pt").check().stdout)
    assert abs((top / "last.pt").stat().st_mtime - mtime) < 1
    assert oct((top / "runs/a/ev.1").stat().st_mode & 0o777) == "0o640"
    assert not list(top.rglob("*.part"))

    again = site.files.fetch(remote_dir, tmp_path)
    assert (again.copied, again.skipped, again.moved) == (0, 302, 0)
    time.sleep(1.1)  # a new save, a second later
    site.run(f"cd {remote_dir} && echo changed >> runs/a/ev.7 && echo new > runs/b/new").check()
    third = site.files.fetch(remote_dir, tmp_path)
    assert (third.copied, third.skipped) == (2, 301)
    assert local_sums(top) == remote_sums(site, remote_dir)


def test_a_cut_folder_download_resumes_and_checksums_on_request(site, remote_dir, tmp_path):
    make_remote_tree(site, remote_dir)

    def cut_in_the_big_file(done: int, total: int) -> None:
        if done > total - BIG + CHUNK // 2:  # the small files and one chunk are in
            raise Cut

    with pytest.raises(Cut):
        site.files.fetch(remote_dir, tmp_path, progress=cut_in_the_big_file)
    top = tmp_path / Path(remote_dir).name
    assert not (top / "last.pt").exists()  # never a half file under its name
    assert (top / "last.pt.part").stat().st_size >= CHUNK
    resumed = site.files.fetch(remote_dir, tmp_path, checksum=True)
    assert resumed.copied == 1 and resumed.skipped == 301
    assert resumed.moved < BIG  # the big file continued, not started over
    assert resumed.verified == 302
    assert local_sums(top) == remote_sums(site, remote_dir)
    # same size and mtime, other bytes: only a checksum sees it
    data = (top / "runs/a/ev.2").read_bytes()
    st = (top / "runs/a/ev.2").stat()
    (top / "runs/a/ev.2").write_bytes(data.upper())
    os.utime(top / "runs/a/ev.2", (st.st_atime, st.st_mtime))
    assert site.files.fetch(remote_dir, tmp_path).copied == 0
    assert site.files.fetch(remote_dir, tmp_path, checksum=True).copied == 1
    assert (top / "runs/a/ev.2").read_bytes() == data


def test_an_upload_is_never_half_in_place_and_resumes(site, remote_dir, tmp_path):
    src = tmp_path / "dataset"
    (src / "shards").mkdir(parents=True)
    for i in range(200):
        (src / "shards" / f"{i:04d}.txt").write_text(f"row {i}\n" * (i + 1))
    (src / "big.bin").write_bytes(os.urandom(BIG))
    (src / "link").symlink_to("big.bin")

    def cut_after_a_chunk(done: int, total: int) -> None:
        if done > total - BIG + UP_CHUNK:
            raise Cut

    with pytest.raises(Cut):
        site.files.upload(src, remote_dir, progress=cut_after_a_chunk)
    target = f"{remote_dir}/dataset"
    listing = site.run(f"ls -A {target}").check().stdout.split()
    assert "big.bin" not in listing  # only its part file, under another name
    assert [n for n in listing if n.startswith(".hpcui-part-")]
    done = site.files.upload(src, remote_dir, checksum=True)
    assert done.copied == 1 and done.skipped == 200 and done.moved < BIG
    assert done.links == ["link"] and done.verified == 201
    assert remote_sums(site, target) == local_sums(src)
    assert site.run(f"ls -A {target} | grep -c hpcui-part || true").stdout.strip() == "0"
    mtime = float(site.run(f"stat -c %Y {target}/big.bin").check().stdout)
    assert abs((src / "big.bin").stat().st_mtime - mtime) < 1

    # cut again, then the local file changes: the old part is not continued, and goes
    with pytest.raises(Cut):
        (src / "big.bin").write_bytes(os.urandom(BIG))
        site.files.upload(src, remote_dir, progress=cut_after_a_chunk)
    time.sleep(1.1)
    (src / "big.bin").write_bytes(os.urandom(BIG))
    again = site.files.upload(src, remote_dir)
    assert again.copied == 1 and again.moved == BIG
    assert remote_sums(site, target) == local_sums(src)
    assert site.run(f"ls -A {target} | grep -c hpcui-part || true").stdout.strip() == "0"


def test_cli_download_upload_and_sync(site, remote_dir, tmp_path):
    job_id = sbatch_script(site, "#!/bin/bash\ntrue\n", "--hold")
    try:
        folder = site.files.folder(job_id)
        sub = f"ckpt-{job_id}"
        site.run(f"mkdir -p {folder}/{sub}/e && echo a > {folder}/{sub}/e/x").check()
        res = cli("-c", site.name, "download", job_id, sub, str(tmp_path / "dl") + "/")
        assert res.returncode == 0, res.stderr
        assert (tmp_path / "dl" / sub / "e" / "x").read_text() == "a\n"
        assert "1 file(s) copied, 0 already there" in res.stdout
        site.run(f"rm -rf {folder}/{sub}")
    finally:
        site.control.cancel([job_id])

    local = tmp_path / "cfg"
    local.mkdir()
    (local / "train.yaml").write_text("lr: 0.1\n")
    rel = remote_dir.removeprefix(site.run("printf %s $HOME").check().stdout + "/")
    res = cli("upload", site.name, str(local / "train.yaml"), f"~/{rel}/", "--json")
    assert res.returncode == 0, res.stderr
    said = json.loads(res.stdout)
    assert said["copied"] == 1 and said["target"] == f"{rel}/train.yaml"
    assert site.run(f"cat {remote_dir}/train.yaml").check().stdout == "lr: 0.1\n"

    res = cli("sync", str(local), f"{site.name}:{rel}/mirror")
    assert res.returncode == 0, res.stderr
    assert site.run(f"cat {remote_dir}/mirror/train.yaml").check().stdout == "lr: 0.1\n"
    res = cli("sync", f"{site.name}:{rel}/mirror", str(tmp_path / "back"), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["copied"] == 1
    assert (tmp_path / "back" / "train.yaml").read_text() == "lr: 0.1\n"  # contents, no nesting
    res = cli("sync", f"{site.name}:{rel}/mirror", str(tmp_path / "back"), "--json")
    assert json.loads(res.stdout)["skipped"] == 1 and json.loads(res.stdout)["copied"] == 0

    res = cli("sync", str(local), str(tmp_path / "x"))
    assert res.returncode == 2 and "exactly one side" in res.stderr
    res = cli("sync", str(local), f"nosuch:{rel}")
    assert res.returncode == 2 and "not a cluster of yours" in res.stderr


def test_a_link_planted_in_the_destination_is_not_followed(site, remote_dir, tmp_path):
    site.run(f"mkdir -p {remote_dir}/sub && echo s > {remote_dir}/sub/f").check()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    top = tmp_path / "dl" / Path(remote_dir).name
    top.mkdir(parents=True)
    (top / "sub").symlink_to(elsewhere)
    site.run(f"echo t > {remote_dir}/top.txt").check()
    done = site.files.fetch(remote_dir, tmp_path / "dl")  # refused alone, the rest copied
    assert list(elsewhere.iterdir()) == []
    assert done.was_refused("sub/f") and "symbolic link" in done.summary()
    assert (top / "top.txt").read_text() == "t\n" and done.copied == 1
