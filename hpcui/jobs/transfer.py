"""Folders both ways between this machine and a cluster, as rsync users expect: only what
differs (size and mtime, or a checksum on request) moves; nothing half-written is ever in
place under its name (each file lands as a part file, renamed when whole); an interrupted
copy resumes where it stopped (whole files are skipped, a big file's part continues);
mtimes and permission bits are kept, so the next run compares them.

Many small files (TensorBoard runs, configs) travel as one tar per batch: a file costs
no round trip of its own. Big files go in resumable chunks."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import stat
import tarfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from hpcui.backends.files import parse_tree, tree_command
from hpcui.backends.shell import quote
from hpcui.common import beneath
from hpcui.errors import UsageError
from hpcui.jobs.beneath_remote import call, full_disk, hex_name, link_at_top, text_name
from hpcui.jobs.file_download import Origin, download, resume_into
from hpcui.transport.base import Transport

#: files up to this size travel in a batch (one tar), bigger ones alone, resumably
SMALL = 1024 * 1024
#: a batch holds at most this many bytes and files
BATCH_BYTES = 32 * 1024 * 1024
BATCH_FILES = 2000
#: a file whose mtime differs by less than this is the same version (SFTP and some
#: filesystems keep whole seconds; rsync's --modify-window)
MTIME_WINDOW_S = 1.0
PART_PREFIX = beneath.PART.decode()

Progress = Callable[[int, int], None]
Note = Callable[[str], None]


@dataclass
class Entry:
    """A file of one side: relative path, size, mtime, permission bits."""

    rel: str
    size: int
    mtime: float
    mode: int = 0o644


@dataclass
class Transfer:
    """What one copy did: files copied now, skipped as already there, bytes moved now, and
    the bytes of everything it had to copy."""

    source: str
    target: str
    copied: int = 0
    skipped: int = 0
    moved: int = 0
    total: int = 0
    links: list[str] = field(default_factory=list)
    verified: int = 0
    #: relative path -> why it was not copied (a link met on its way, a name the other
    #: side cannot take, ...): each refused alone, the rest copied
    refused: dict[str, str] = field(default_factory=dict)

    def refuse(self, found: Iterable[tuple[str | bytes, str]]) -> None:
        for rel, why in found:
            name = rel if isinstance(rel, str) else rel.decode("utf-8", "surrogateescape")
            self.refused.setdefault(name, why)

    def was_refused(self, rel: str) -> bool:
        """Whether `rel` was not copied: refused itself, or a folder on its way was."""
        return rel in self.refused or any(rel.startswith(r + "/") for r in self.refused)

    def count(self, todo: list[Entry]) -> None:
        self.copied = sum(1 for e in todo if not self.was_refused(e.rel))

    def summary(self) -> str:
        said = f"{self.copied} file(s) copied, {self.skipped} already there"
        if self.verified:
            said += f", {self.verified} checked by SHA-256"
        if self.links:
            said += f"; {len(self.links)} symbolic link(s) not copied ({self.links[0]}, ...)"
        if self.refused:
            rel, why = next(iter(self.refused.items()))
            said += f"; {len(self.refused)} refused ({ascii_name(rel)} {why}, ...)"
        return said


def ascii_name(rel: str) -> str:
    """A name as it can be printed: bytes that are not UTF-8 shown as \\xNN."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def same(a: Entry, b: Entry) -> bool:
    return a.size == b.size and abs(a.mtime - b.mtime) < MTIME_WINDOW_S


class _Meter:
    """One progress line over many files: each file's (done, total) as part of the whole."""

    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total, self.base, self.progress = total, 0, progress

    def file(self, size: int) -> Progress | None:
        base = self.base
        self.base += size
        show = self.progress
        if show is None:
            return None
        return lambda done, _t: show(base + done, self.total)

    def show(self) -> None:
        if self.progress:
            self.progress(self.base, self.total)


# --- the remote side ----------------------------------------------------------------------


def remote_tree(
    transport: Transport, path: str
) -> tuple[str, dict[str, Entry], dict[str, int], list[str]]:
    """What is at `path`: ("dir", files, folders with their modes (the top as ""), links),
    ("file", ...) or ("none", ...)."""
    res = transport.run(tree_command(path))
    if res.exit_status == 3:
        return "file", {}, {}, []
    if res.exit_status == 2:
        return "none", {}, {}, []
    res.check(f"listing {path}")
    files: dict[str, Entry] = {}
    dirs: dict[str, int] = {}
    links: list[str] = []
    for kind, rel, size, mtime, mode in parse_tree(res.stdout_bytes):
        if kind == "d":
            dirs[rel] = mode
        elif kind == "f":
            files[rel] = Entry(rel, size, mtime, mode)
        elif rel:
            links.append(rel)
    return "dir", files, dirs, links


def remote_sums(transport: Transport, root: str, rels: list[str]) -> dict[str, str]:
    """SHA-256 of files under `root`, computed there (names on stdin: no length limit)."""
    if not rels:
        return {}
    res = transport.run(
        f"cd {quote(root)} && xargs -0 -r sha256sum -z --",
        stdin=b"\0".join(_raw(r) for r in rels) + b"\0",
    ).check(f"checksumming files under {root}")
    sums = {}
    for line in res.stdout_bytes.split(b"\0"):
        digest, sep, name = line.partition(b"  ")
        if sep:
            sums[name.decode("utf-8", "surrogateescape")] = digest.decode()
    return sums


def local_sum(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --- downloads ----------------------------------------------------------------------------


def download_tree(
    transport: Transport,
    remote: str,
    local: Path,
    *,
    into: bool = True,
    progress: Progress | None = None,
    note: Note | None = None,
    checksum: bool = False,
) -> Transfer:
    """Copy the remote folder `remote` here: into `local/<its name>` (`into`, as `scp -r`
    does into a folder), else into `local` itself (`sync`, as `rsync -a SRC/ DEST/`).
    Both sides are read and written beneath their top folder (`hpcui.common.beneath`):
    a folder swapped for a link meanwhile is refused and named, never followed."""
    kind, files, dirs, links = remote_tree(transport, remote)
    if kind == "none":
        raise UsageError(f"There is no file or folder {remote} on the cluster.")
    if kind == "file":
        moved, where = download(transport, remote, local, progress=progress, note=note)
        return Transfer(remote, str(where), copied=1, moved=moved, total=moved)
    top = local / PurePosixPath(remote.rstrip("/")).name if into else local
    result = Transfer(remote, str(top), links=links)
    with local_top(top) as at:
        folders = [(_raw(rel), mode) for rel, mode in sorted(dirs.items())]
        result.refuse(beneath.folders(at, folders, modes=False))
        have = _local_files(top)
        todo = [e for rel, e in files.items() if rel not in have or not same(e, have[rel])]
        sums: dict[str, str] = {}
        if checksum:  # same size and mtime is not enough: compare contents too
            sums = remote_sums(transport, remote, sorted(files))
            todo += [
                e
                for rel, e in files.items()
                if rel in have and same(e, have[rel]) and local_sum(top / rel) != sums.get(rel)
            ]
        result.skipped = len(files) - len(todo)
        _copy_all(
            todo, result, progress,
            lambda batch: _download_batch(transport, remote, at, top, batch, result),
            lambda e, shown: _download_big(transport, remote, at, top, e, result, shown, note),
        )  # fmt: skip
        result.refuse(beneath.folders(at, folders, modes=True))  # last: a 0500 folder
    result.count(todo)
    if checksum:
        done = [e.rel for e in todo if not result.was_refused(e.rel)]
        bad = [rel for rel in done if local_sum(top / rel) != sums.get(rel)]
        if bad:
            for rel in bad:
                (top / rel).unlink(missing_ok=True)
            raise UsageError(
                f"{len(bad)} file(s) differ from the cluster's after the copy ({bad[0]}, ...): "
                "they were removed here. Download again (a file still being written?)."
            )
        result.verified = sum(1 for rel in files if not result.was_refused(rel))
    return result


def _copy_all(
    todo: list[Entry],
    result: Transfer,
    progress: Progress | None,
    small: Callable[[list[Entry]], int],
    big: Callable[[Entry, Progress | None], int],
) -> None:
    """Small files in batches first (seconds for thousands), then big ones one by one,
    with one progress line over all: both directions copy this way."""
    result.total = sum(e.size for e in todo)
    meter = _Meter(result.total, progress)
    meter.show()
    for batch in _batches([e for e in todo if e.size <= SMALL]):
        result.moved += small(batch)
        result.copied += len(batch)
        meter.base += sum(e.size for e in batch)
        meter.show()
    for e in todo:
        if e.size > SMALL:
            result.moved += big(e, meter.file(e.size))
            result.copied += 1


def _batches(entries: list[Entry]) -> Iterator[list[Entry]]:
    batch: list[Entry] = []
    size = 0
    for e in entries:
        if batch and (size + e.size > BATCH_BYTES or len(batch) >= BATCH_FILES):
            yield batch
            batch, size = [], 0
        batch.append(e)
        size += e.size
    if batch:
        yield batch


def _download_batch(
    transport: Transport, remote: str, at: int | bytes, top: Path, batch: list[Entry],
    result: Transfer,
) -> int:  # fmt: skip
    """Small files as one tar read beneath `remote` there, placed beneath `top` here."""
    answer = call(
        transport, "pack", remote, stdin=" ".join(hex_name(e.rel) for e in batch).encode()
    )
    result.refuse(answer.refused)
    try:
        moved, got, refused = beneath.unpack(at, io.BytesIO(answer.out))
    except beneath.NoSpace as exc:
        raise full_disk(str(top / text_name(exc.rel)), "here", exc.written, exc.free) from None
    except tarfile.TarError as exc:
        raise UsageError(
            f"Reading {len(batch)} file(s) under {remote} failed ({exc}). Run the copy "
            "again: what arrived is kept."
        ) from None
    result.refuse(refused)
    placed = {text_name(r) for r in got}
    gone = [e.rel for e in batch if e.rel not in placed and e.rel not in result.refused]
    result.refuse([(rel, "was removed on the cluster before it was copied") for rel in gone])
    return moved


def _download_big(
    transport: Transport, remote: str, at: int | bytes, top: Path, e: Entry,
    result: Transfer, shown: Progress | None, note: Note | None,
) -> int:  # fmt: skip
    """One big file read beneath `remote` in chunks, resumably, into its part here."""
    tree = beneath.Tree(at)
    try:
        folder, name = tree.parent(_raw(e.rel), create=True)

        def read(offset: int, n: int) -> bytes:
            answer = call(transport, "read", remote, hex_name(e.rel), str(offset), str(n))
            if answer.refused:
                raise beneath.Refused(_raw(e.rel), answer.refused[0][1])
            size, mtime_ns = answer.stat or (-1, 0)
            if size != e.size or abs(mtime_ns / 1e9 - e.mtime) > 1e-3:
                raise UsageError(
                    f"{remote}/{e.rel} changed while it was downloading (a job still writing "
                    "it?): the copy was thrown away. Download it again once it is written."
                )
            return answer.out

        origin = Origin(f"{remote.rstrip('/')}/{e.rel}", e.size, e.mtime, e.mode)
        return resume_into(
            folder, name, str(top / e.rel), origin, read, lambda: None, progress=shown, note=note
        )
    except beneath.Refused as exc:
        result.refuse([(text_name(exc.rel), exc.why)])
        return 0
    finally:
        tree.close()


@contextlib.contextmanager
def local_top(top: Path, *, create: bool = True) -> Iterator[int | bytes]:
    """This machine's top folder of a copy, open (see beneath.open_top)."""
    try:
        at = beneath.open_top(os.fsencode(top), create=create)
    except beneath.Refused:
        raise link_at_top(str(top), "here") from None
    except FileNotFoundError:
        raise UsageError(f"There is no folder {top} here.") from None
    try:
        yield at
    finally:
        beneath._close(at)


def _raw(rel: str) -> bytes:
    return rel.encode("utf-8", "surrogateescape")


def _local_files(top: Path) -> dict[str, Entry]:
    """The regular files under `top` (links not followed), by relative path."""
    out: dict[str, Entry] = {}
    if not top.is_dir():
        return out
    for root, _dirs, names in os.walk(top):
        for name in names:
            path = Path(root) / name
            st = path.lstat()
            if stat.S_ISREG(st.st_mode):
                rel = path.relative_to(top).as_posix()
                out[rel] = Entry(rel, st.st_size, st.st_mtime, stat.S_IMODE(st.st_mode))
    return out
