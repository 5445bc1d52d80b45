"""A folder on the cluster mirrored here by what grew: one command for many folders.

The trackers' files only grow (W&B's transaction log, MLflow's metric files, TensorBoard's
event files, a CSV), a few are rewritten (MLflow's meta.yaml). The local copy is the state:
for each file the client sends its size, its mtime (set to the remote one after a whole
copy) and a hash of its last bytes; the login node's script answers, per file, only the
bytes past that size when its own file still ends with those bytes, else the whole file.
Nothing is fetched twice and a cut relay resumes from what reached the disk here (an
interrupted write is at worst fetched again: appends land at the local file's size).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: the bytes at the end of a file that say it is the same file, grown
TAIL = 64
#: at most this many bytes per file per pass, and per pass in all (the next takes the rest)
FILE_CHUNK = 8 << 20
PASS_BYTES = 64 << 20

#: run by the login node's python3 (-S -I: no site packages, a few ms): the request on
#: stdin, framed chunks on stdout: `F root kind offset length mtime_ns size path\n` + bytes
REMOTE = r"""
import hashlib, json, os, stat, sys
req = json.loads(sys.stdin.buffer.read())
out = sys.stdout.buffer
budget = req["pass"]
for i, root in enumerate(req["roots"]):
    known = req["known"][i]
    files = 0
    for top, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(top, name)
            rel = os.path.relpath(path, root)
            try:
                st = os.lstat(path)
                if not stat.S_ISREG(st.st_mode):
                    continue  # a link is not followed out of the folder
                files += 1
                have = known.get(rel)
                if have and have[0] == st.st_size and have[1] == st.st_mtime_ns:
                    continue
                offset = 0
                with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as fh:
                    if have and 0 < have[0] <= st.st_size:
                        fh.seek(max(0, have[0] - @TAIL@))
                        if hashlib.sha1(fh.read(min(have[0], @TAIL@))).hexdigest() == have[2]:
                            offset = have[0]
                    if offset == st.st_size and have and have[0] == st.st_size:
                        offset = 0  # same size and end, another mtime: rewritten in place
                    n = max(0, min(st.st_size - offset, @CHUNK@, budget))
                    if n == 0 and st.st_size > 0:
                        continue  # this pass's budget is spent: the next takes it
                    fh.seek(offset)
                    data = fh.read(n)
            except OSError:
                continue
            budget -= len(data)
            head = ["F", str(i), "A" if offset else "W", str(offset), str(len(data)),
                    str(st.st_mtime_ns), str(st.st_size), json.dumps(rel)]
            out.write((" ".join(head) + "\n").encode())
            out.write(data)
    out.write(("L " + str(i) + " " + str(files) + "\n").encode())
""".replace("@TAIL@", str(TAIL)).replace("@CHUNK@", str(FILE_CHUNK))


def _tail_hash(path: Path, size: int) -> str:
    with path.open("rb") as fh:
        fh.seek(max(0, size - TAIL))
        return hashlib.sha1(fh.read(min(size, TAIL))).hexdigest()


def known_files(local: Path) -> dict[str, list[object]]:
    """What this mirror holds: {relative path: [size, mtime_ns, tail hash]}."""
    out: dict[str, list[object]] = {}
    if not local.is_dir():
        return out
    for path in local.rglob("*"):
        if path.is_file() and not path.name.startswith(".hpcui-"):
            st = path.stat()
            out[path.relative_to(local).as_posix()] = [
                st.st_size,
                st.st_mtime_ns,
                _tail_hash(path, st.st_size),
            ]
    return out


def request(roots: Sequence[str], locals_: Sequence[Path]) -> bytes:
    """The login node's input for one pass over these folders."""
    known = [known_files(p) for p in locals_]
    return json.dumps({"roots": list(roots), "known": known, "pass": PASS_BYTES}).encode()


@dataclass
class Applied:
    """One pass, as written here."""

    files: int = 0  # files changed here
    bytes: int = 0
    listed: list[int] | None = None  # files each remote folder holds


def _safe(local: Path, rel: str) -> Path | None:
    target = (local / rel).resolve()
    root = local.resolve()
    return target if target.is_relative_to(root) and target != root else None


def apply(answer: bytes, locals_: Sequence[Path]) -> Applied:
    """Write one pass's chunks into the mirrors: appends at the local size, whole files
    replaced; each file's mtime set to the remote one once it is whole."""
    done = Applied(listed=[0] * len(locals_))
    pos = 0
    while pos < len(answer):
        end = answer.index(b"\n", pos)
        head = answer[pos:end].decode().split(" ", 7)
        pos = end + 1
        if head[0] == "L":
            done.listed[int(head[1])] = int(head[2])  # type: ignore[index]  # set above
            continue
        root, kind, offset, length, mtime, size = (
            int(head[1]), head[2], int(head[3]), int(head[4]), int(head[5]), int(head[6])
        )  # fmt: skip
        data = answer[pos : pos + length]
        pos += length
        target = _safe(locals_[root], json.loads(head[7]))
        if target is None:  # a name that leaves the mirror: never written
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == "A":
            if not target.exists() or target.stat().st_size != offset:
                continue  # changed here since the request: the next pass sees it
            with target.open("ab") as fh:
                fh.write(data)
        else:  # from its first byte
            tmp = target.with_name(f".hpcui-part-{target.name}")
            with tmp.open("wb") as fh:
                fh.write(data)
            os.replace(tmp, target)
        whole = target.stat().st_size == size
        os.utime(target, ns=(mtime, mtime) if whole else (0, 0))  # not whole: grow next pass
        done.files += 1
        done.bytes += length
    return done
