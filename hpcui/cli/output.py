"""Printing for people (aligned tables, colour only on a terminal) and programs (JSON).

Plain ANSI rather than rich: a table of a few hundred rows needs no layout engine, and
importing rich costs ~60 ms on every command.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from hpcui.common.formatting import STATE_PALETTE, hms, printable
from hpcui.common.formatting import size as _size
from hpcui.common.formatting import when as _when

_CODES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "bright_blue": "94",
    "grey": "90",
    "magenta": "35",
    "cyan": "36",
}
#: the one palette's ANSI half (hpcui.common.formatting.STATE_PALETTE)
STATE_COLOURS = {state: ansi for state, (_, ansi) in STATE_PALETTE.items()}


def colour_enabled(stream: TextIO | None = None) -> bool:
    """Colour only for a terminal, and never with NO_COLOR set (https://no-color.org)."""
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR") or getattr(stream, "no_color", False):  # agent: the client's
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def style(text: str, *styles: str, stream: TextIO | None = None) -> str:
    if not styles or not colour_enabled(stream):
        return text
    codes = ";".join(_CODES[s] for s in styles if s in _CODES)
    return f"\x1b[{codes}m{text}\x1b[0m"


def state(value: str, stream: TextIO | None = None) -> str:
    colour = STATE_COLOURS.get(value)
    return style(value, colour, stream=stream) if colour else value


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    colours: dict[int, Any] | None = None,
    right: Iterable[int] = (),
    out: TextIO | None = None,
) -> None:
    """An aligned table; `colours[i]` maps a cell of column i to a style (None: plain)."""
    out = out or sys.stdout
    text_rows = [["" if c is None else printable(str(c)) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in text_rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    right = set(right)

    def fmt(cells: Sequence[str], styled: Sequence[str]) -> str:
        parts = []
        for i, (cell, shown) in enumerate(zip(cells, styled)):
            pad = " " * (widths[i] - len(cell))
            parts.append(pad + shown if i in right else shown + pad)
        return "  ".join(parts).rstrip()

    out.write(fmt(headers, [style(h, "bold", stream=out) for h in headers]) + "\n")
    for row in text_rows:
        styled = list(row)
        for i, fn in (colours or {}).items():
            s = fn(row[i]) if callable(fn) else fn
            if s:
                styled[i] = style(row[i], s, stream=out)
        out.write(fmt(row, styled) + "\n")


def key_values(pairs: Iterable[tuple[str, Any]], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    pairs = [(k, v) for k, v in pairs if v not in (None, "")]
    width = max((len(k) for k, _ in pairs), default=0)
    for k, v in pairs:
        out.write(f"{style(k.ljust(width), 'bold', stream=out)}  {v}\n")


#: squeue's [D-]HH:MM:SS and 1024-based sizes: hpcui.common.formatting, shared with the app
duration = hms
size = _size


when = _when


def emit_json(kind: Any, value: Any, out: TextIO | None = None) -> None:
    """`value` validated as the command's documented type, then printed as JSON."""
    from pydantic import TypeAdapter

    adapter = TypeAdapter(kind)
    data = adapter.dump_python(value, mode="json")
    (out or sys.stdout).write(json.dumps(data, indent=2) + "\n")


def action_done(as_json: bool, cluster: str, job_id: str, message: str) -> None:
    """One job action's outcome: an `ActionOutput` with --json, else `JOB on CLUSTER: ...`."""
    if as_json:
        from hpcui.cli.models import ActionOutput

        done = ActionOutput(cluster=cluster, job_id=job_id, ok=True, message=message)
        emit_json(ActionOutput, done)
    else:
        print(f"{job_id} on {cluster}: {message}")


def emit_json_line(kind: Any, value: Any, out: TextIO | None = None) -> None:
    """One JSON document per line (streams such as `logs --json`)."""
    from pydantic import TypeAdapter

    stream = out or sys.stdout
    stream.write(TypeAdapter(kind).dump_json(value).decode() + "\n")
    stream.flush()


def warn(text: str) -> None:
    print(style(text, "yellow", stream=sys.stderr), file=sys.stderr)


def note(text: str) -> None:
    print(style(text, "dim", stream=sys.stderr), file=sys.stderr)
