"""A folder on the cluster mirrored here by what grew: one command for many folders.

The trackers' files only grow (W&B's transaction log, MLflow's metric files, TensorBoard's
event files, a CSV), a few are rewritten (MLflow's meta.yaml). The local copy is the state:
for each file the client sends its size, its mtime (set to the remote one after a whole
copy) and its last bytes; the login node's script answers, per file, only the
bytes past that size when its own file still ends with those bytes, else the whole file.
Nothing is fetched twice and a cut relay resumes from what reached the disk here (an
interrupted write is at worst fetched again: appends land at the local file's size).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: the bytes at the end of a file that say it is the same file, grown
TAIL = 64
#: at most this many bytes per file per pass, and per pass in all (the next takes the rest)
FILE_CHUNK = 8 << 20
PASS_BYTES = 64 << 20

#: run by the login node's python3 -S -I with nothing imported beyond os and stat (a pass
#: costs that interpreter's start and one walk; json or hashlib would double it). Its
#: stdin: NUL-separated `budget, roots, then per root: path, n, then per file: relative
#: path, size, mtime_ns, its last bytes in hex`; its stdout per chunk:
#: `F root kind offset length mtime_ns size pathlen\n` + path + bytes, and `L root files\n`
REMOTE = r"""
import os, stat, sys
f = sys.stdin.buffer.read().split(b"\0")
budget, nroots, k = int(f[0]), int(f[1]), 2
out = sys.stdout.buffer
for i in range(nroots):
    root, n = f[k], int(f[k + 1])
    k += 2
    known = {}
    for _ in range(n):
        known[f[k]] = (int(f[k + 1]), int(f[k + 2]), bytes.fromhex(f[k + 3].decode()))
        k += 4
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
                        fh.seek(max(0, have[0] - len(have[2])))
                        if fh.read(len(have[2])) == have[2]:
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
            head = "F %d %s %d %d %d %d %d\n" % (i, "A" if offset else "W", offset, len(data),
                                                st.st_mtime_ns, st.st_size, len(rel))
            out.write(head.encode() + rel + data)
    out.write(b"L %d %d\n" % (i, files))
""".replace("@CHUNK@", str(FILE_CHUNK))


def _tail(path: Path, size: int) -> bytes:
    with path.open("rb") as fh:
        fh.seek(max(0, size - TAIL))
        return fh.read(min(size, TAIL))


def mirrored(local: Path) -> list[Path]:
    """The files this mirror holds (hpcui's own `.hpcui-*` notes beside them left out)."""
    if not local.is_dir():
        return []
    return [p for p in local.rglob("*") if p.is_file() and not p.name.startswith(".hpcui-")]


def known_files(local: Path) -> list[tuple[bytes, int, int, bytes]]:
    """What this mirror holds: (relative path, size, mtime_ns, its last bytes) per file."""
    out: list[tuple[bytes, int, int, bytes]] = []
    for path in mirrored(local):
        st = path.stat()
        rel = os.fsencode(path.relative_to(local).as_posix())
        out.append((rel, st.st_size, st.st_mtime_ns, _tail(path, st.st_size)))
    return out


def request(roots: Sequence[str], locals_: Sequence[Path]) -> bytes:
    """The login node's input for one pass over these folders."""
    fields: list[bytes] = [str(PASS_BYTES).encode(), str(len(roots)).encode()]
    for root, local in zip(roots, locals_):
        known = known_files(local)
        fields += [os.fsencode(root), str(len(known)).encode()]
        for rel, size, mtime, tail in known:
            fields += [rel, str(size).encode(), str(mtime).encode(), tail.hex().encode()]
    return b"\0".join(fields)


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
        head = answer[pos:end].decode().split(" ")
        pos = end + 1
        if head[0] == "L":
            done.listed[int(head[1])] = int(head[2])  # type: ignore[index]  # set above
            continue
        root, kind, offset, length, mtime, size, plen = (
            int(head[1]), head[2], int(head[3]), int(head[4]), int(head[5]), int(head[6]),
            int(head[7]),
        )  # fmt: skip
        rel = os.fsdecode(answer[pos : pos + plen])
        data = answer[pos + plen : pos + plen + length]
        pos += plen + length
        target = _safe(locals_[root], rel)
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
