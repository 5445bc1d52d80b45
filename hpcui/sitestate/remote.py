"""Several remote commands in ONE round trip, their outputs told apart by marker lines.

A login node is far away (tens of ms per round trip, seconds behind 2FA jump hosts),
so the site-state calls send one shell snippet that runs every command and frames
each output with ``@@hpcui-part NAME STATUS`` lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import ConfigDict

from hpcui.backends.model import Model
from hpcui.transport.base import Command
from hpcui.transport.quoting import quote_bytes, to_command

MARK = "@@hpcui-part"
_HEADER = re.compile(rf"^{re.escape(MARK)} (?P<name>\d+) (?P<status>-?\d+|missing)$", re.MULTILINE)
#: Output kept per command: a misbehaving tool cannot flood the connection. Lmod's
#: spider JSON of a big site (LUMI, JSC) runs to megabytes, quota tables to a few kB.
MAX_BYTES = 16 * 1024 * 1024
MAX_PROBE_BYTES = 256 * 1024


class Part(Model):
    """One command's outcome: exit status (None: the program does not exist) and stdout."""

    model_config = ConfigDict(frozen=True)

    name: str
    exit_status: int | None
    output: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


def _sh(cmd: Command) -> str:
    return to_command(cmd).decode("utf-8", "surrogateescape")


def all_command(parts: Sequence[tuple[str, Command]], max_bytes: int = MAX_BYTES) -> str:
    """Run every command (each in a subshell, stdout captured, stderr left alone), under
    LC_ALL=C: what is parsed must not change with the user's locale (decimal commas,
    translated headers)."""
    lines = []
    for i, (_name, cmd) in enumerate(parts):
        lines.append(
            f"__o=$( ( export LC_ALL=C; {_sh(cmd)} ) ); __r=$?; "
            f"printf '\\n{MARK} %s %d\\n' {i} \"$__r\"; "
            f"printf '%s\\n' \"$__o\" | head -c {max_bytes}"
        )
    return "\n".join(lines)


def first_command(
    parts: Sequence[tuple[str, str, Command]], max_bytes: int = MAX_PROBE_BYTES
) -> str:
    """Try (name, program, command) in order; stop after the first that exists, exits 0
    and prints something. Each one tried reports its status (``missing`` when
    ``command -v program`` fails) and its stdout+stderr, so the client sees why the
    earlier ones were skipped. ``cd`` first: tools like ``df .`` mean the home directory.
    Under LC_ALL=C, as `all_command`.
    """
    lines = ["cd 2>/dev/null; __done="]
    for i, (_name, program, cmd) in enumerate(parts):
        lines.append(
            f'if [ -z "$__done" ]; then '
            f"if command -v {quote_bytes(program).decode()} >/dev/null 2>&1; then "
            f"__o=$( ( export LC_ALL=C; {_sh(cmd)} ) 2>&1 ); __r=$?; "
            f"printf '\\n{MARK} %s %d\\n' {i} \"$__r\"; "
            f"printf '%s\\n' \"$__o\" | head -c {max_bytes}; "
            f'[ "$__r" -eq 0 ] && [ -n "$__o" ] && __done=1; '
            f"else printf '\\n{MARK} %s missing\\n' {i}; fi; fi"
        )
    return "\n".join(lines)


def parse_parts(stdout: str, names: Sequence[str]) -> list[Part]:
    """The framed outputs, in order, named like the commands given to the builder (the
    wire carries their index); text before the first marker (login banners) is dropped."""
    headers = list(_HEADER.finditer(stdout))
    out = []
    for m, nxt in zip(headers, [*headers[1:], None]):
        body = stdout[m.end() + 1 : nxt.start() if nxt else len(stdout)]
        if nxt is not None:
            body = body.removesuffix("\n")  # the newline printed before the next marker
        status = m["status"]
        out.append(
            Part(
                name=names[int(m["name"])],
                exit_status=None if status == "missing" else int(status),
                output=body.removesuffix("\n"),
            )
        )
    return out
