"""Files beneath the folder a copy fills, reached without following any link.

Project spaces are group-writable: another member can swap a folder for a link between
a copy's listing and its write, and a path-based write then lands in the victim's own
folder (`~/.ssh`). So both sides of every transfer open the copy's top folder once, walk
down one name at a time with O_NOFOLLOW relative to the folder above (`dir_fd`), write a
file under a private name beside its target and rename it in that same folder. A link
met anywhere is refused and named; it is never followed, never written through.

Standard library only, and importable by the login node's own python3 (3.6 and newer:
no `from __future__`, annotations only in strings): `main` is what the cluster side runs
(`python3 -S -I -c SOURCE op ...`), the same functions this machine's side calls.
Names travel as bytes (hex on a command line): a name need not be UTF-8.

Over 500 lines: the login node runs this file as one program sent as its source, so it
cannot lean on a second module; it is every operation a copy makes there, and no more.
"""

import errno
import os
import stat
import sys
import tarfile
import typing

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
DIRECTORY = getattr(os, "O_DIRECTORY", 0)
#: this platform can walk beneath a folder by descriptors (Linux, macOS; not Windows)
SAFE = bool(NOFOLLOW and DIRECTORY) and os.open in os.supports_dir_fd
BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation
PART = b".hpcui-part-"
_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
BLOCK = 1 << 20
#: exit statuses of `main`, read by hpcui.jobs.safe_remote
NO_TOP, TOP_REFUSED, GONE, SHORT, NO_SPACE = 2, 3, 4, 5, 28


class Refused(Exception):
    """`rel` was not copied: a link, or not what the listing said, stood in its path."""

    def __init__(self, rel: bytes, why: str) -> None:
        super().__init__(rel, why)
        self.rel, self.why = rel, why


class NoSpace(Exception):
    """The disk or quota filled while writing `rel`; what was half-written is gone."""

    def __init__(self, rel: bytes, written: int, free: "int | None") -> None:
        super().__init__(rel, written, free)
        self.rel, self.written, self.free = rel, written, free


# A folder is held open by its descriptor ("at": an int) where the platform walks by
# descriptors; elsewhere (Windows) by its path, each name checked by lstat first: a
# check, not a guarantee, on a platform where another user's links are rare.


def _open(name: bytes, flags: int, at: "int | bytes", mode: int = 0o600) -> int:
    if isinstance(at, int):
        return os.open(name, flags | BINARY, mode, dir_fd=at)
    path = os.path.join(at, name)
    if os.path.islink(path):
        raise OSError(errno.ELOOP, "is a symbolic link")
    return os.open(path, flags | BINARY, mode)


def _call(
    fn: "typing.Callable[..., object]", name: bytes, at: "int | bytes", *args: object
) -> object:
    if isinstance(at, int):
        return fn(name, *args, dir_fd=at)
    return fn(os.path.join(at, name), *args)


def lstat(name: bytes, at: "int | bytes") -> os.stat_result:
    if isinstance(at, int):
        return os.stat(name, dir_fd=at, follow_symlinks=False)
    return os.lstat(os.path.join(at, name))


def _rename(old: bytes, new: bytes, at: "int | bytes") -> None:
    if isinstance(at, int):
        os.rename(old, new, src_dir_fd=at, dst_dir_fd=at)
    else:
        os.replace(os.path.join(at, old), os.path.join(at, new))


def _close(at: "int | bytes") -> None:
    if isinstance(at, int):
        os.close(at)


def _set(fd: int, mode: int, mtime: "float | None") -> None:
    """Mode and mtime of an open file (Windows sets them by path after closing)."""
    if hasattr(os, "fchmod"):
        os.fchmod(fd, mode)
    if mtime is not None and os.utime in os.supports_fd:
        os.utime(fd, (mtime, mtime))


def _set_path(name: bytes, at: "int | bytes", mode: int, mtime: "float | None") -> None:
    if isinstance(at, bytes):  # what _set could not do on this platform
        os.chmod(os.path.join(at, name), mode)
        if mtime is not None:
            os.utime(os.path.join(at, name), (mtime, mtime))


def _open_dir(at: "int | bytes", name: bytes, rel: bytes, create: bool) -> "int | bytes":
    if name in (b"", b".", b"..") or b"/" in name:
        raise Refused(rel, "is not a plain relative path")
    for _ in range(2):
        try:
            if isinstance(at, int):
                return os.open(name, os.O_RDONLY | DIRECTORY | NOFOLLOW, dir_fd=at)
            path = os.path.join(at, name)
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode):
                raise OSError(errno.ENOTDIR, "not a folder")
            return path
        except FileNotFoundError:
            if not create:
                raise
            try:
                _call(os.mkdir, name, at, 0o777)
            except FileExistsError:
                pass  # made meanwhile by another copy: open it
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                raise Refused(rel, "is a symbolic link or not a folder") from None
            raise
    raise Refused(rel, "changed while it was opened")


def open_top(path: bytes, create: bool = False) -> "int | bytes":
    """The folder a copy fills. What is above it is the user's path as typed (sites link
    /home to /gpfs); the folder itself is followed only when it is the user's own link
    (one they made: a link planted by another member of a shared folder is theirs, not
    the user's, and no one can make a link owned by someone else). FileNotFoundError if
    it is missing and not `create`."""
    path = path.rstrip(b"/") or b"/"
    parent, _, last = path.rpartition(b"/")
    if last in (b"", b".", b".."):
        return os.open(path, os.O_RDONLY | DIRECTORY)
    parent = parent or (b"/" if path.startswith(b"/") else b".")
    if create:
        os.makedirs(parent, exist_ok=True)
    if not SAFE:
        if os.path.islink(path) and os.lstat(path).st_uid != _uid():
            raise Refused(path, "is a symbolic link")
        if create:
            os.makedirs(path, exist_ok=True)
        if not os.path.isdir(path):
            raise FileNotFoundError(path)
        return path  # a path stands for the folder here
    at = os.open(parent, os.O_RDONLY | DIRECTORY)
    try:
        try:
            return _open_dir(at, last, path, create)
        except Refused:
            st = os.lstat(last, dir_fd=at)
            if not stat.S_ISLNK(st.st_mode) or st.st_uid != _uid():
                raise
            return os.open(last, os.O_RDONLY | DIRECTORY, dir_fd=at)
    finally:
        os.close(at)


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else -1


class Tree:
    """Folders beneath one top, opened once each (a batch of 2,000 files in a few
    folders opens a few descriptors, not 2,000 paths)."""

    def __init__(self, top: "int | bytes") -> None:
        self.top = top
        self.dirs = {b"": top}

    def parent(self, rel: bytes, create: bool = False) -> "tuple[int | bytes, bytes]":
        """The open folder holding `rel`, and `rel`'s last name."""
        head, _, name = rel.rpartition(b"/")
        if name in (b"", b".", b"..") or rel.startswith(b"/"):
            raise Refused(rel, "is not a plain relative path")
        return self.folder(head, create), name

    def folder(self, rel: bytes, create: bool = False) -> "int | bytes":
        fd = self.dirs.get(rel)
        if fd is None:
            head, _, name = rel.rpartition(b"/")
            fd = _open_dir(self.folder(head, create), name, rel, create)
            self.dirs[rel] = fd
        return fd

    def close(self) -> None:
        for rel, fd in self.dirs.items():
            if rel:
                _close(fd)
        self.dirs = {b"": self.top}


def _free(fd: "int | bytes") -> "int | None":
    try:
        st = os.statvfs(fd)  # POSIX (Windows: AttributeError)
    except (OSError, TypeError, AttributeError):
        return None
    return st.f_bavail * st.f_frsize


def _own_file(name: bytes, at: "int | bytes", flags: int, rel: bytes) -> int:
    """Open a part file without following a link; only this user's regular file will do
    (another member's file of that name in a shared folder is not written into)."""
    try:
        fd = _open(name, flags | NOFOLLOW, at)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise Refused(rel, "has a link or a folder where its part file goes") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != _uid() != -1:
        os.close(fd)
        raise Refused(rel, "has someone else's file where its part file goes")
    return fd


_MASK = []  # type: list[int]


def umask() -> int:
    """This process's umask, read once. Setting it to read it (os.umask has no getter)
    leaves 0 in force for a moment, for every thread (the app copies in workers while
    others write files); Linux says it in /proc/self/status without that."""
    if not _MASK:
        try:
            with open("/proc/self/status") as fh:
                for line in fh:
                    if line.startswith("Umask:"):
                        _MASK.append(int(line.split()[1], 8))
        except (OSError, ValueError, IndexError):
            pass
        if not _MASK:
            mask = os.umask(0o077)  # the safe side while it is away from its value
            os.umask(mask)
            _MASK.append(mask)
    return _MASK[0]


def place(
    tree: Tree,
    rel: bytes,
    source: "typing.IO[bytes]",
    size: int,
    mode: int,
    mtime: float,
    mask: int,
) -> int:
    """Write `size` bytes of `source` (a binary reader) as `rel`: into a private part file
    beside it, then renamed over the name (a link there is replaced, not followed)."""
    at, name = tree.parent(rel, create=True)
    tmp = PART + os.urandom(8).hex().encode()
    fd = _open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, at)
    written = 0
    try:
        try:
            while written < size:
                data = source.read(min(BLOCK, size - written))
                if not data:
                    break
                os.write(fd, data)
                written += len(data)
            _set(fd, mode & 0o777 & ~mask, mtime)
        finally:
            os.close(fd)
        _set_path(tmp, at, mode & 0o777 & ~mask, mtime)
        _rename(tmp, name, at)
    except OSError as exc:
        _unlink(tmp, at)
        if exc.errno in _FULL:
            raise NoSpace(rel, written, _free(at)) from None
        if exc.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
            raise Refused(rel, "is a folder there") from None
        raise
    return written


def _unlink(name: bytes, at: "int | bytes") -> None:
    try:
        _call(os.unlink, name, at)
    except OSError:
        pass


def unpack(
    top: "int | bytes", reader: "typing.IO[bytes]"
) -> "tuple[int, list[bytes], list[tuple[bytes, str]]]":
    """A tar stream's regular files placed beneath `top`: bytes written, names placed,
    names refused with why. A full disk stops it (NoSpace): nothing else would fit."""
    tree, mask = Tree(top), umask()
    moved, got, refused = 0, [], []
    tar = tarfile.open(fileobj=reader, mode="r|", encoding="utf-8", errors="surrogateescape")
    try:
        for member in tar:
            if not member.isfile():
                continue
            rel = member.name.encode("utf-8", "surrogateescape")
            try:
                src = tar.extractfile(member)
                if src is None:
                    continue
                moved += place(tree, rel, src, member.size, member.mode, member.mtime, mask)
                got.append(rel)
            except Refused as exc:
                refused.append((exc.rel, exc.why))
            except OSError as exc:
                if exc.errno in _FULL:
                    raise
                refused.append((rel, exc.strerror or str(exc)))
    finally:
        tar.close()
        tree.close()
    return moved, got, refused


def pack(
    top: "int | bytes", rels: "list[bytes]", out: "typing.IO[bytes]"
) -> "list[tuple[bytes, str]]":
    """Regular files beneath `top` as a tar stream on `out` (each read whole: these are
    the small files of a batch); names refused with why."""
    tree, refused = Tree(top), []
    tar = tarfile.open(
        fileobj=out, mode="w|", format=tarfile.PAX_FORMAT, encoding="utf-8",
        errors="surrogateescape",
    )  # fmt: skip
    try:
        for rel in rels:
            try:
                at, name = tree.parent(rel)
                fd = _open(name, os.O_RDONLY | NOFOLLOW, at)
            except Refused as exc:
                refused.append((exc.rel, exc.why))
                continue
            except OSError as exc:
                why = "is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
                refused.append((rel, why or str(exc)))
                continue
            with os.fdopen(fd, "rb") as fh:
                st = os.fstat(fh.fileno())
                if not stat.S_ISREG(st.st_mode):
                    refused.append((rel, "is not a regular file"))
                    continue
                data = fh.read()
            info = tarfile.TarInfo(rel.decode("utf-8", "surrogateescape"))
            info.size, info.mode, info.mtime = len(data), stat.S_IMODE(st.st_mode), st.st_mtime
            tar.addfile(info, _Bytes(data))
    finally:
        tar.close()
        tree.close()
    return refused


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def read(self, n: int = -1) -> bytes:
        end = len(self.data) if n < 0 else self.at + n
        chunk, self.at = self.data[self.at : end], min(end, len(self.data))
        return chunk


class Gone(Exception):
    """The part file is no longer there: another copy of the same version finished it."""


class Short(Exception):
    """The part file holds less than the client thinks: start it over."""


def write_part(
    top: "int | bytes", rel: bytes, part: bytes, offset: int, source: "typing.IO[bytes]",
    final: "tuple[int, float] | None",
) -> int:  # fmt: skip
    """One range of a big file into its part file `part` beside `rel` (the client names
    it by the file's version, so a later run continues it); with `final` (mode, mtime)
    the part then becomes `rel`. Nothing is truncated before the end: two uploads of
    the same version (three builds of one environment) write the same bytes at the same
    offsets, so whichever finishes first renames a whole file."""
    if not part.startswith(PART) or b"/" in part:
        raise Refused(rel, "has no valid part file name")
    tree = Tree(top)
    try:
        at, name = tree.parent(rel, create=True)
        flags = os.O_WRONLY | (os.O_CREAT if offset == 0 else 0)
        try:
            fd = _own_file(part, at, flags, rel)
        except FileNotFoundError:
            raise Gone() from None
        written = 0
        try:
            if os.fstat(fd).st_size < offset:
                raise Short()
            os.lseek(fd, offset, os.SEEK_SET)
            while True:
                data = source.read(BLOCK)
                if not data:
                    break
                os.write(fd, data)
                written += len(data)
            if final is not None:
                os.ftruncate(fd, offset + written)
                _set(fd, final[0] & 0o777 & ~umask(), final[1])
        except OSError as exc:
            if exc.errno in _FULL:
                free = _free(fd)
                _unlink(part, at)
                raise NoSpace(rel, offset + written, free) from None
            raise
        finally:
            os.close(fd)
        if final is not None:
            _set_path(part, at, final[0] & 0o777 & ~umask(), final[1])
            _rename(part, name, at)
        return written
    finally:
        tree.close()


def read_range(
    top: "int | bytes",
    rel: bytes,
    offset: int,
    length: int,
    write: "typing.Callable[[bytes], object]",
) -> "tuple[int, int]":
    """`length` bytes of `rel` from `offset` to `write`; its size and mtime (ns) as read."""
    tree = Tree(top)
    try:
        at, name = tree.parent(rel)
        try:
            fd = _open(name, os.O_RDONLY | NOFOLLOW, at)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Refused(rel, "is a symbolic link") from None
            raise
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise Refused(rel, "is not a regular file")
            fh.seek(offset)
            left = length
            while left > 0:
                data = fh.read(min(BLOCK, left))
                if not data:
                    break
                write(data)
                left -= len(data)
            return st.st_size, st.st_mtime_ns
    finally:
        tree.close()


def folders(
    top: "int | bytes", entries: "list[tuple[bytes, int]]", modes: bool
) -> "list[tuple[bytes, str]]":
    """Make the folders (rel, mode) beneath `top`; with `modes`, give each its mode (done
    last, as rsync does: a 0500 folder would refuse the files meant for it)."""
    tree, mask, refused = Tree(top), umask(), []
    try:
        for rel, mode in entries:
            try:
                at = tree.folder(rel, create=True)
                if modes and isinstance(at, int):
                    os.fchmod(at, mode & 0o7777 & ~mask)
                elif modes:
                    os.chmod(at, mode & 0o7777 & ~mask)
            except Refused as exc:
                refused.append((exc.rel, exc.why))
            except OSError as exc:
                refused.append((rel, exc.strerror or str(exc)))
    finally:
        tree.close()
    return refused


def _say(kind: str, rel: bytes, *rest: object) -> None:
    words = [kind, rel.hex()] + [str(r) for r in rest]
    sys.stderr.write("hpcui-" + "\t".join(words) + "\n")


def main(argv: "list[str]") -> int:
    """The cluster side: `OP TOP_HEX ...`; files on stdin/stdout, findings on stderr."""
    op, path = argv[0], bytes.fromhex(argv[1])
    try:
        top = open_top(path, create=op in ("unpack", "write", "dirs"))
    except FileNotFoundError:
        return NO_TOP
    except Refused as exc:
        _say("refused", exc.rel, exc.why)
        return TOP_REFUSED
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    try:
        if op == "unpack":
            _moved, _got, refused = unpack(top, stdin)
        elif op == "pack":
            rels = [bytes.fromhex(r) for r in stdin.read().decode().split()]
            refused = pack(top, rels, stdout)
        elif op == "dirs":
            words = stdin.read().decode().split()
            pairs = [
                (b"" if r == "-" else bytes.fromhex(r), int(m, 8))
                for r, m in zip(words[::2], words[1::2])
            ]
            refused = folders(top, pairs, argv[2] == "1")
        elif op == "write":
            final = (int(argv[5], 8), float(argv[6])) if len(argv) > 6 else None
            rel, part = bytes.fromhex(argv[2]), bytes.fromhex(argv[3])
            write_part(top, rel, part, int(argv[4]), stdin, final)
            return 0
        else:  # read
            size, mtime = read_range(
                top, bytes.fromhex(argv[2]), int(argv[3]), int(argv[4]), stdout.write
            )
            sys.stderr.write(f"hpcui-stat\t{size}\t{mtime}\n")
            return 0
    except NoSpace as exc:
        _say("nospace", exc.rel, exc.written, -1 if exc.free is None else exc.free)
        return NO_SPACE
    except Refused as exc:
        _say("refused", exc.rel, exc.why)
        return TOP_REFUSED
    except Gone:
        return GONE
    except Short:
        return SHORT
    finally:
        stdout.flush()
    for rel, why in refused:
        _say("refused", rel, why)
    return 0
