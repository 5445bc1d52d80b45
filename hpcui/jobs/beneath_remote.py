"""The cluster side of `hpcui.common.beneath`: the same module, run by the login node's
python3 (`-S -I`: nothing of the user's site-packages or working folder imported), so
both sides of a copy walk beneath its top folder by the same rules. Each call is one
exec channel: the files travel on its stdin or stdout, its findings on stderr."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from hpcui.common import beneath
from hpcui.errors import HpcuiError, RemoteWriteError, UsageError
from hpcui.transport.base import Transport

#: the first python3 on the login node's PATH (any 3.6 or newer will do)
_LAUNCH = (
    'for p in python3 python; do command -v "$p" >/dev/null 2>&1 && '
    'exec "$p" -S -I -c "$0" "$@"; done; '
    'echo "hpcui: no python3 on the login node" >&2; exit 127'
)


@functools.cache
def program() -> str:
    return Path(beneath.__file__).read_text(encoding="utf-8") + "\nsys.exit(main(sys.argv[1:]))\n"


def hex_name(name: str) -> str:
    return name.encode("utf-8", "surrogateescape").hex()


def text_name(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


@dataclass
class Answer:
    """One call's outcome: its exit status, its stdout, what it refused and why."""

    rc: int
    out: bytes
    refused: list[tuple[str, str]] = field(default_factory=list)
    nospace: tuple[str, int, int | None] | None = None
    stat: tuple[int, int] | None = None


def call(transport: Transport, op: str, top: str, *args: str, stdin: bytes = b"") -> Answer:
    """Run `op` beneath `top` on the cluster (see beneath.main)."""
    res = transport.run(["sh", "-c", _LAUNCH, program(), op, hex_name(top), *args], stdin=stdin)
    if res.exit_status == 127:
        raise UsageError(
            f"The login node has no python3 on PATH: hpcui's copies need one (any 3.6 or "
            f"newer). Load a Python module in your shell startup there. ({res.stderr.strip()[:200]})"
        )
    answer = Answer(res.exit_status, res.stdout_bytes)
    for line in res.stderr.splitlines():
        kind, _, rest = line.partition("\t")
        words = rest.split("\t")
        if kind == "hpcui-refused" and len(words) == 2:
            answer.refused.append((text_name(bytes.fromhex(words[0])), words[1]))
        elif kind == "hpcui-nospace" and len(words) == 3:
            free = int(words[2])
            answer.nospace = (
                text_name(bytes.fromhex(words[0])),
                int(words[1]),
                free if free >= 0 else None,
            )
        elif kind == "hpcui-stat" and len(words) == 2:
            answer.stat = (int(words[0]), int(words[1]))
    if answer.nospace is not None:
        raise full_disk(
            f"{top.rstrip('/')}/{answer.nospace[0]}", "on the cluster", *answer.nospace[1:]
        )
    if res.exit_status == beneath.NO_TOP:
        raise UsageError(f"There is no folder {top} on the cluster.")
    if res.exit_status == beneath.TOP_REFUSED and any(
        r == top.rstrip("/") for r, _ in answer.refused
    ):
        raise link_at_top(top, "on the cluster")
    if res.exit_status not in (0, beneath.TOP_REFUSED, beneath.GONE, beneath.SHORT):
        raise UsageError(
            f"Copying under {top} on the cluster failed: {res.stderr.strip()[-300:] or 'no message'}. "
            "Run the copy again: what arrived is kept."
        )
    return answer


def link_at_top(top: str, where: str) -> UsageError:
    return UsageError(
        f"{top} {where} is a symbolic link that is not yours: hpcui never copies through "
        "someone else's link (in a shared folder another member may have put it there). "
        "Remove it, or name the real folder, and copy again."
    )


def full_disk(path: str, where: str, written: int, free: int | None) -> HpcuiError:
    """One sentence for a write that met a full disk or quota: where, how much (this
    machine's disk is the user's to free: a usage error; the cluster's, a write error)."""
    left = "" if free is None else f"; {free:,} bytes free there"
    kind = UsageError if where == "here" else RemoteWriteError
    return kind(
        f"The disk or quota filled while writing {path} {where} ({written:,} bytes written"
        f"{left}): the half-written file was removed. Free space (`hpcui quota` shows usage "
        "on a cluster) or copy to a filesystem with room, then run the copy again."
    )
