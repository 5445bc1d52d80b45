"""A remote folder listed as files (GNU find's -printf, one round trip). Pure."""

from __future__ import annotations

from datetime import UTC, datetime

from hpcui.backends.records import RemoteFile
from hpcui.backends.shell import quote

#: type, size, mtime (epoch), name, each entry ended by a NUL: the one byte a file name
#: cannot hold (a name may hold a newline or a tab, and -printf escapes nothing)
_FORMAT = r"%y\t%s\t%T@\t%f\0"


def list_command(path: str) -> str:
    """Shell code: the entries of `path` (not recursive), or an error line if it is a file."""
    q = quote(path)
    return (
        f"if [ -d {q} ]; then find {q} -mindepth 1 -maxdepth 1 -printf '{_FORMAT}'; "
        f"elif [ -e {q} ]; then echo 'hpcui: not a folder' >&2; exit 3; "
        f"else echo 'hpcui: no such folder' >&2; exit 2; fi"
    )


def parse_listing(text: str, folder: str) -> list[RemoteFile]:
    out = []
    for line in text.split("\0"):
        parts = line.split("\t", 3)
        if len(parts) != 4 or not parts[1].isdigit():
            continue
        kind, size, mtime, name = parts
        try:
            when = datetime.fromtimestamp(float(mtime), tz=UTC)
        except ValueError:
            when = None
        out.append(
            RemoteFile(
                name=name,
                path=f"{folder.rstrip('/')}/{name}",
                is_dir=kind == "d",
                size=int(size),
                modified=when,
            )
        )
    return sorted(out, key=lambda f: (not f.is_dir, f.name))


#: type, size, mtime, permission bits (octal), path relative to the top folder; NUL-ended
_TREE_FORMAT = r"%y\t%s\t%T@\t%m\t%P\0"


def tree_command(path: str) -> str:
    """Shell code: the top folder itself (its name empty) and every entry under `path`
    (recursive, links not followed; the top followed only as the path the user typed),
    or exit 3 for a file and 2 for nothing there. One round trip for a whole folder."""
    q = quote(path)
    return (
        f"if [ -d {q} ]; then find -H {q} -printf '{_TREE_FORMAT}'; "
        f"elif [ -e {q} ]; then exit 3; "
        f"else echo 'hpcui: no such folder' >&2; exit 2; fi"
    )


def parse_tree(raw: bytes) -> list[tuple[str, str, int, float, int]]:
    """`tree_command`'s output as (kind, relative path, size, mtime, mode); kind is find's
    %y letter (d folder, f file, l link, ...), folders before what they hold; the top
    folder is the entry with the empty path. Names are bytes (surrogate-escaped here):
    a file system allows any name without NUL or slash, UTF-8 or not."""
    out = []
    for entry in raw.split(b"\0"):
        parts = entry.split(b"\t", 4)
        if len(parts) != 5 or not parts[1].isdigit():
            continue
        kind, size, mtime, mode, rel = (p.decode("utf-8", "surrogateescape") for p in parts)
        try:
            when = float(mtime)
        except ValueError:
            when = 0.0
        out.append((kind, rel, int(size), when, int(mode, 8) if mode.isdigit() else 0o644))
    return sorted(out, key=lambda e: e[1].split("/"))
