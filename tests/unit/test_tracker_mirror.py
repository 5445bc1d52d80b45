"""The tracker relay's mirror (hpcui.trackers.mirror): the login node's script run here by
a real `python3 -S -I`, its answer applied to a real folder. What grew comes as its new
bytes only; a file rewritten in place, or a copy cut before its mtime was set, comes
whole; a link is never followed; nothing is fetched twice."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hpcui.trackers import mirror


def _pass(remote: Path, local: Path) -> mirror.Applied:
    res = subprocess.run(
        [sys.executable, "-S", "-I", "-c", mirror.REMOTE],
        input=mirror.request([str(remote)], [local]), capture_output=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return mirror.apply(res.stdout, [local])


def _same(remote: Path, local: Path) -> None:
    there = {p.relative_to(remote): p.read_bytes() for p in remote.rglob("*") if p.is_file()}
    here = {p.relative_to(local): p.read_bytes() for p in local.rglob("*") if p.is_file()}
    assert here == there


def test_growth_comes_as_new_bytes_and_a_rewrite_comes_whole(tmp_path: Path) -> None:
    remote, local = tmp_path / "remote", tmp_path / "local"
    (remote / "mlruns" / "1" / "r" / "metrics").mkdir(parents=True)
    metric = remote / "mlruns" / "1" / "r" / "metrics" / "loss"
    meta = remote / "mlruns" / "1" / "r" / "meta.yaml"
    metric.write_text("1 0.5 0\n")
    meta.write_text("status: 1\n")
    first = _pass(remote, local)
    assert (first.files, first.listed) == (2, [2])
    _same(remote, local)
    assert _pass(remote, local).files == 0  # nothing changed: nothing sent
    with metric.open("a") as fh:
        fh.write("2 0.25 1\n")
    grown = _pass(remote, local)
    assert (grown.files, grown.bytes) == (1, len("2 0.25 1\n"))  # only the new line
    meta.write_text("status: 3\n")  # same size, rewritten
    os.utime(meta, ns=(meta.stat().st_atime_ns, meta.stat().st_mtime_ns + 1_000_000))
    assert _pass(remote, local).bytes == len("status: 3\n")
    _same(remote, local)


def test_a_copy_cut_before_its_mtime_is_fetched_again_and_a_link_is_not_followed(
    tmp_path: Path,
) -> None:
    remote, local = tmp_path / "remote", tmp_path / "local"
    remote.mkdir()
    (remote / "events").write_bytes(b"x" * 1000)
    (tmp_path / "secret").write_text("not the job's")
    (remote / "link").symlink_to(tmp_path / "secret")
    _pass(remote, local)
    assert (local / "events").read_bytes() == b"x" * 1000 and not (local / "link").exists()
    os.utime(local / "events", ns=(0, 0))  # a relay killed between the write and the mtime
    again = _pass(remote, local)
    assert again.bytes == 1000 and (local / "events").read_bytes() == b"x" * 1000
    (local / "events").write_bytes(b"y" * 1000)  # a local copy that is not the remote's start
    with (remote / "events").open("ab") as fh:
        fh.write(b"z" * 10)
    assert _pass(remote, local).bytes == 1010  # not appended to: fetched whole
    assert (local / "events").read_bytes() == b"x" * 1000 + b"z" * 10


def test_a_pass_is_bounded_and_the_next_takes_the_rest(tmp_path: Path, monkeypatch) -> None:
    remote, local = tmp_path / "remote", tmp_path / "local"
    remote.mkdir()
    (remote / "big").write_bytes(os.urandom(3000))
    monkeypatch.setattr(mirror, "REMOTE", mirror.REMOTE.replace(str(mirror.FILE_CHUNK), "1024"))
    sizes = [_pass(remote, local).bytes for _ in range(4)]
    assert sizes == [1024, 1024, 952, 0]
    _same(remote, local)


def test_a_name_that_leaves_the_mirror_is_never_written(tmp_path: Path) -> None:
    local = tmp_path / "local"
    local.mkdir()
    answer = b"F 0 W 0 3 1 3 10\n../escapedabcL 0 1\n"
    assert mirror.apply(answer, [local]).files == 0
    assert not (tmp_path / "escaped").exists()


def test_a_relay_killed_mid_write_goes_on_from_what_reached_the_disk(tmp_path: Path) -> None:
    remote, local = tmp_path / "remote", tmp_path / "local"
    remote.mkdir()
    (remote / "run.wandb").write_bytes(b"a" * 500)
    _pass(remote, local)
    with (remote / "run.wandb").open("ab") as fh:
        fh.write(b"b" * 500)
    with (local / "run.wandb").open("ab") as fh:  # killed after half its append, no mtime
        fh.write(b"b" * 200)
    os.utime(local / "run.wandb", ns=(0, 0))
    resumed = _pass(remote, local)
    assert resumed.bytes == 300  # only what did not reach the disk here
    _same(remote, local)
