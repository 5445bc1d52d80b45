"""Files and folders of this machine onto the cluster, with the guarantees of
`hpcui.jobs.transfer`: a part file beside each file (its version in its name, so a
changed file never continues an old part), renamed into place when whole; small files in
one tar per batch, big ones in chunks that a later run continues."""

from __future__ import annotations

import hashlib
import io
import os
import stat
from pathlib import Path

from hpcui.backends.shell import quote
from hpcui.common import beneath
from hpcui.errors import UsageError
from hpcui.jobs.beneath_remote import call, hex_name
from hpcui.jobs.transfer import (
    PART_PREFIX,
    Entry,
    Note,
    Progress,
    Transfer,
    _copy_all,
    _raw,
    local_top,
    remote_sums,
    remote_tree,
    same,
)
from hpcui.transport.base import Transport

#: bytes per upload write (one call of the login node's helper, into the part file at its
#: offset): each costs a python3 start there (~15 ms), so it is large; a resume loses less
UP_CHUNK = 16 * 1024 * 1024


def upload(
    transport: Transport,
    local: Path,
    remote: str,
    *,
    into: bool = True,
    progress: Progress | None = None,
    note: Note | None = None,
    checksum: bool = False,
) -> Transfer:
    """Copy `local` (a file or a folder) to the cluster. A folder goes into
    `remote/<its name>` (`into`), or becomes `remote` itself (`sync`); a file goes into
    `remote` when that is a folder (or ends with /), else becomes it. Both sides are read
    and written beneath their top folder (`hpcui.common.beneath`): a link is never
    followed nor written through, on either side, at any depth."""
    if local.is_symlink() or not (local.is_dir() or local.is_file()):
        raise UsageError(f"{local} is not a file or folder here (or is a link): nothing to copy.")
    if local.is_file():
        at = transport.stat_file(remote)
        into_folder = remote.endswith("/") or (at is not None and at.is_dir)
        target = f"{remote.rstrip('/')}/{local.name}" if into_folder else remote
        root, _, name = target.rpartition("/")
        root = root or ("/" if target.startswith("/") else ".")
        st = local.stat()
        e = Entry(name, st.st_size, st.st_mtime, stat.S_IMODE(st.st_mode))
        there = {}  # only what this file's copy needs to know: itself, its part
        for rel in (name, _part_name(e)[0]):
            found = transport.stat_file(f"{root}/{rel}")
            if found is not None and not found.is_dir:
                there[rel] = Entry(rel, found.size, found.mtime)
        result = Transfer(str(local), target)
        with local_top(local.parent, create=False) as here:
            _upload_files(transport, here, root, {name: e}, there, result, progress, checksum)
        return result
    target = f"{remote.rstrip('/')}/{local.name}" if into else remote.rstrip("/") or "/"
    kind, there, _dirs, _ = remote_tree(transport, target)
    if kind == "file":
        raise UsageError(f"{target} is a file on the cluster: give a folder to copy {local} into.")
    files, dirs, links = _local_tree(local)
    result = Transfer(str(local), target, links=links)
    folders = " ".join(f"{hex_name(rel) or '-'} {mode:o}" for rel, mode in dirs.items())
    result.refuse(call(transport, "dirs", target, "0", stdin=folders.encode()).refused)
    with local_top(local, create=False) as here:
        _upload_files(transport, here, target, files, there, result, progress, checksum)
    result.refuse(call(transport, "dirs", target, "1", stdin=folders.encode()).refused)
    return result


def _local_tree(top: Path) -> tuple[dict[str, Entry], dict[str, int], list[str]]:
    """The files, folders (with modes, the top as "") and links under `top`; what is read
    later is read beneath it, so a folder swapped for a link meanwhile is refused."""
    files, links = {}, []
    dirs = {"": stat.S_IMODE(top.lstat().st_mode)}
    for root, subdirs, names in os.walk(top):
        for name in sorted(subdirs + names):
            path = Path(root) / name
            rel = path.relative_to(top).as_posix()
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                links.append(rel)
            elif stat.S_ISDIR(st.st_mode):
                dirs[rel] = stat.S_IMODE(st.st_mode)
            elif stat.S_ISREG(st.st_mode):
                files[rel] = Entry(rel, st.st_size, st.st_mtime, stat.S_IMODE(st.st_mode))
    return files, dirs, links


def _part_name(e: Entry) -> tuple[str, str]:
    """A file's part file (beside it) and the prefix all its versions' parts share: the
    version (size, mtime) is in the name, so a changed file never continues an old part."""
    name = hashlib.sha256(_raw(e.rel)).hexdigest()[:16]
    version = hashlib.sha256(f"{e.size}:{e.mtime:.6f}".encode()).hexdigest()[:16]
    parent = e.rel.rpartition("/")[0]
    prefix = f"{parent + '/' if parent else ''}{PART_PREFIX}{name}-"
    return prefix + version, prefix


def _upload_files(
    transport: Transport,
    here: int | bytes,
    root: str,
    files: dict[str, Entry],
    there: dict[str, Entry],
    result: Transfer,
    progress: Progress | None,
    checksum: bool,
) -> None:
    todo = [e for rel, e in files.items() if rel not in there or not same(e, there[rel])]
    if checksum:
        kept = [rel for rel, e in files.items() if rel in there and same(e, there[rel])]
        sums = remote_sums(transport, root, kept)
        todo += [files[rel] for rel in kept if _sum_beneath(here, rel) != sums.get(rel)]
    result.skipped = len(files) - len(todo)
    _copy_all(
        todo,
        result,
        progress,
        lambda batch: _upload_batch(transport, here, root, batch, result),
        lambda e, shown: _upload_big(transport, here, root, e, there, result, shown),
    )
    result.count(todo)
    if checksum:
        done = [e.rel for e in todo if not result.was_refused(e.rel)]
        sums = remote_sums(transport, root, done)
        bad = [rel for rel in done if _sum_beneath(here, rel) != sums.get(rel)]
        if bad:
            transport.run(
                f"cd {quote(root)} && xargs -0 -r rm -f --",
                stdin=b"".join(_raw(r) + b"\0" for r in bad),
            )
            raise UsageError(
                f"{len(bad)} file(s) differ from yours after the copy ({bad[0]}, ...): they "
                "were removed on the cluster. Upload again (a file still being written here?)."
            )
        result.verified = sum(1 for rel in files if not result.was_refused(rel))


def _sum_beneath(here: int | bytes, rel: str) -> str | None:
    """SHA-256 of a local file read beneath the copy's top (None: refused or gone)."""
    h = hashlib.sha256()
    try:
        beneath.read_range(here, _raw(rel), 0, 1 << 62, h.update)
    except (beneath.Refused, OSError):
        return None
    return h.hexdigest()


def _upload_batch(
    transport: Transport, here: int | bytes, root: str, batch: list[Entry], result: Transfer
) -> int:
    """Small files read beneath the top here, as one tar placed beneath `root` there:
    each written under a private name beside its target and renamed over it (atomic: no
    file is ever half there under its name; one process for the whole batch)."""
    buf = io.BytesIO()
    result.refuse(beneath.pack(here, [_raw(e.rel) for e in batch], buf))
    answer = call(transport, "unpack", root, stdin=buf.getvalue())
    result.refuse(answer.refused)
    return sum(e.size for e in batch if not result.was_refused(e.rel))


def _upload_big(
    transport: Transport,
    here: int | bytes,
    root: str,
    e: Entry,
    there: dict[str, Entry],
    result: Transfer,
    progress: Progress | None,
) -> int:
    """One big file in chunks into its part file beneath `root`, continuing a part of the
    same version left by an interrupted upload (parts of older versions go). Another
    upload of the same version may finish it first (three builds of one environment):
    then the file is there, and this one is done too."""
    part, prefix = _part_name(e)
    stale = [rel for rel in there if rel.startswith(prefix) and rel != part]
    if stale:
        transport.run(
            f"cd {quote(root)} && xargs -0 -r rm -f --",
            stdin=b"".join(_raw(r) + b"\0" for r in stale),
        )
    done = there[part].size if part in there and there[part].size <= e.size else 0
    part_name = hex_name(part.rpartition("/")[2])
    ns = round(e.mtime * 1e9)
    when = f"{ns // 10**9}.{ns % 10**9:09d}"
    moved = 0
    for _attempt in range(3):
        try:
            data_at = done
            while True:
                data = _read_local(here, e, data_at)
                last = data_at + len(data) >= e.size
                args = [hex_name(e.rel), part_name, str(data_at)] + (
                    [f"{e.mode & 0o777:o}", when] if last else []
                )
                answer = call(transport, "write", root, *args, stdin=data)
                if answer.refused:
                    result.refuse(answer.refused)
                    return moved
                if answer.rc == beneath.GONE:
                    break
                if answer.rc == beneath.SHORT:
                    done = 0
                    break
                data_at += len(data)
                moved += len(data)
                if progress:
                    progress(data_at, e.size)
                if last:
                    return moved
        except beneath.Refused as exc:
            result.refuse([(exc.rel, exc.why)])
            return moved
        if answer.rc == beneath.GONE:
            found = transport.stat_file(f"{root}/{e.rel}")
            if found is not None and same(e, Entry(e.rel, found.size, found.mtime)):
                return moved  # another upload of this version put it in place
            done = 0
    raise UsageError(
        f"{root}/{e.rel} is being replaced by other copies over and over: try again later."
    )


def _read_local(here: int | bytes, e: Entry, offset: int) -> bytes:
    out = io.BytesIO()
    beneath.read_range(here, _raw(e.rel), offset, UP_CHUNK, out.write)
    return out.getvalue()
