"""Folders both ways against the dev cluster: hpcui's download/upload beside `rsync -a`
and `scp -r` through the same login (the same sshd, key and cipher), in one run.

    HPCUI_CONFIG=.devcluster/hpcui.toml python -m benchmarks.folder_bench [--quick]

Two shapes: many small files (a TensorBoard run, a config tree) and one large file (a
checkpoint); each copied fresh, then again with nothing changed (what a resumed or
repeated sync costs). Seconds, median of alternating rounds; lower is better.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import sized
from hpcui.jobs.transfer import download_tree
from hpcui.jobs.upload import upload
from hpcui.transport.ssh.session import SshTransport

ROOT = Path(__file__).resolve().parent.parent
SSH_CONFIG = str(ROOT / ".devcluster" / "ssh" / "config")
HOST = "hpcui-dev"
ROUNDS = sized(3, 1)
SMALL_FILES = sized(2000, 40)
SMALL_SIZE = 4096
LARGE_MIB = sized(256, 2)
SSH = f"ssh -F {SSH_CONFIG}"


def seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def make_small(top: Path) -> None:
    for i in range(SMALL_FILES):
        sub = top / f"d{i % 20:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"events.{i:05d}").write_bytes(os.urandom(SMALL_SIZE))


def make_large(top: Path) -> None:
    top.mkdir(parents=True, exist_ok=True)
    with open(top / "last.pt", "wb") as fh:
        for _ in range(LARGE_MIB):
            fh.write(os.urandom(1024 * 1024))


def run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def shape(t: SshTransport, name: str, make: Callable[[Path], None], tmp: Path) -> list[str]:
    src = tmp / name
    make(src)
    remote = f"/tmp/hpcui-folder-bench/{name}"
    t.run(["rm", "-rf", "/tmp/hpcui-folder-bench"]).check()
    t.run(["mkdir", "-p", "/tmp/hpcui-folder-bench"]).check()
    got: dict[str, list[float]] = {}

    def add(key: str, fn: Callable[[], object]) -> None:
        got.setdefault(key, []).append(seconds(fn))

    def fresh_remote() -> None:
        t.run(["rm", "-rf", remote]).check()

    for _ in range(ROUNDS):  # alternating, so each tool sees the same load
        fresh_remote()
        add("up hpcui", lambda: upload(t, src, "/tmp/hpcui-folder-bench"))
        add("up again hpcui", lambda: upload(t, src, "/tmp/hpcui-folder-bench"))
        fresh_remote()
        add(
            "up rsync",
            lambda: run(["rsync", "-a", "-e", SSH, str(src), f"{HOST}:/tmp/hpcui-folder-bench/"]),
        )
        add(
            "up again rsync",
            lambda: run(["rsync", "-a", "-e", SSH, str(src), f"{HOST}:/tmp/hpcui-folder-bench/"]),
        )
        fresh_remote()
        add(
            "up scp",
            lambda: run(
                ["scp", "-q", "-r", "-F", SSH_CONFIG, str(src), f"{HOST}:/tmp/hpcui-folder-bench/"]
            ),
        )
        for tool in ("hpcui", "rsync", "scp"):
            dest = tmp / f"down-{tool}"
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir()
            if tool == "hpcui":
                add("down hpcui", lambda d=dest: download_tree(t, remote, d))
                add("down again hpcui", lambda d=dest: download_tree(t, remote, d))
            elif tool == "rsync":
                cmd = ["rsync", "-a", "-e", SSH, f"{HOST}:{remote}", str(dest)]
                add("down rsync", lambda c=cmd: run(c))
                add("down again rsync", lambda c=cmd: run(c))
            else:
                add(
                    "down scp",
                    lambda d=dest: run(
                        ["scp", "-q", "-r", "-F", SSH_CONFIG, f"{HOST}:{remote}", str(d)]
                    ),
                )
    t.run(["rm", "-rf", "/tmp/hpcui-folder-bench"])
    med = {k: statistics.median(v) for k, v in got.items()}
    lines = []
    for what in ("up", "down", "up again", "down again"):
        cells = [
            f"{med[f'{what} {tool}']:7.2f}" if f"{what} {tool}" in med else "      -"
            for tool in ("hpcui", "rsync", "scp")
        ]
        lines.append(f"  {name:<6} {what:<11} {cells[0]}  {cells[1]}  {cells[2]}")
    return lines


def main() -> None:
    t = SshTransport.from_config(HOST, ssh_config=SSH_CONFIG)
    t.run("true")
    print(
        f"folders through one login, seconds (median of {ROUNDS} alternating rounds): "
        f"small = {SMALL_FILES} files of {SMALL_SIZE} B in 20 folders, large = one "
        f"{LARGE_MIB} MiB file"
    )
    print(f"  {'shape':<6} {'copy':<11} {'hpcui':>7}  {'rsync':>7}  {'scp -r':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for line in shape(t, "small", make_small, Path(tmp)) + shape(
            t, "large", make_large, Path(tmp)
        ):
            print(line)
    print("  (again: nothing changed since the copy before; scp -r copies everything each time)")
    t.close()


if __name__ == "__main__":
    main()
