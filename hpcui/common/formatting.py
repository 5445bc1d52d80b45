"""How hpcui writes durations, sizes and job states for people, in one place for every face.

Standard library only: the CLI's fast path imports it. (Scheduler syntax such as
``--time=01:30:00`` is the dialects' business: ``hpcui.backends.batch``.)
"""

from __future__ import annotations

from datetime import datetime


def hms(seconds: float | None, *, pad_hours: bool = True) -> str:
    """Slurm's own ``[D-]HH:MM:SS`` (squeue prints it; users compare at a glance), ``-``
    when unknown. ``pad_hours=False`` gives ``0:05:00``, as the app's tables show it."""
    if seconds is None:
        return "-"
    s = max(0, round(seconds))
    days, s = divmod(s, 86400)
    hours = f"{s // 3600:02d}" if pad_hours else str(s // 3600)
    text = f"{hours}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{days}-{text}" if days else text


def clock_duration(seconds: float) -> str:
    """squeue's time-limit style: ``3:00``, ``1:30:00``, ``2-00:00:00`` (no leading zeros),
    the way users see their limit in the queue."""
    s = max(0, round(seconds))
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    mins, secs = divmod(s, 60)
    if days:
        return f"{days}-{hours:02d}:{mins:02d}:{secs:02d}"
    return f"{hours}:{mins:02d}:{secs:02d}" if hours else f"{mins}:{secs:02d}"


def filled(fraction: float, width: int) -> int:
    """Cells of a `width`-cell bar that `fraction` fills (clamped to 0..1): quota and GPU
    bars in the app and the CLI."""
    return round(max(0.0, min(fraction, 1.0)) * width)


def usage_bar(pct: float | None, width: int, full: str, empty: str) -> tuple[str, str]:
    """A utilisation bar for every face: its cells (`full` glyphs for the used part,
    `empty` for the rest, `?` when the driver cannot say) and its colour (green from
    50 %, yellow from 5 %, red below: an idle GPU stands out; "dim" when unknown)."""
    if pct is None:
        return "?" * width, "dim"
    used = filled(pct / 100, width)
    colour = "green" if pct >= 50 else "yellow" if pct >= 5 else "red"
    return full * used + empty * (width - used), colour


def figure(value: float | None, unit: str = "") -> str:
    """A whole-number figure with its unit (``694 W``, ``8%``), ``-`` when unknown."""
    return "-" if value is None else f"{value:.0f}{unit}"


def short_duration(seconds: int) -> str:
    """``2h``, ``90m``, ``1d12h``: short, for messages and plans."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    mins, secs = divmod(rest, 60)
    parts = [f"{v}{u}" for v, u in ((days, "d"), (hours, "h"), (mins, "m"), (secs, "s")) if v]
    return "".join(parts) or "0s"


#: characters that reorder or hide text on a terminal (bidi overrides, C0/C1 controls)
_UNSAFE = {c: f"\\u{c:04x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]}
_UNSAFE.update(
    {c: f"\\u{c:04x}" for c in (0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))}
)
_UNSAFE.pop(0x09)  # a tab is shown as spaces by every table


def printable(text: str) -> str:
    """`text` with control and bidi-override characters shown as `\\uXXXX`: a job name from
    the scheduler (anyone's) cannot reorder or hide what a table prints."""
    return text.translate(_UNSAFE)


def size(n: float | None, *, iec: bool = False) -> str:
    """1024-based with one decimal: ``1.5G`` (as ls -h and squeue), or with ``iec``
    ``1.5 GiB`` (as seff and the quota tools print it); ``-`` when unknown."""
    if n is None:
        return "-"
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB") if iec else ("B", "K", "M", "G", "T", "P")
    sep = " " if iec else ""
    for unit in units:
        if abs(n) < 1024 or unit == units[-1]:
            return f"{n:.0f}{sep}{unit}" if unit == "B" else f"{n:.1f}{sep}{unit}"
        n /= 1024
    raise AssertionError("unreachable")


#: One colour per job state for every face: the app's explicit colour (a contrast of at
#: least 4.5:1 on its dark background; a browser terminal draws ANSI blue as dark blue on
#: near-black) and the CLI's ANSI colour of the same hue (any terminal, 16 colours).
STATE_PALETTE: dict[str, tuple[str, str]] = {
    "SUBMITTING": ("#36c5c5", "cyan"),
    "PENDING": ("#e5b400", "yellow"),
    "RUNNING": ("bold #45d16a", "green"),
    "COMPLETING": ("#45d16a", "green"),
    "SUSPENDED": ("#d08bf0", "magenta"),
    "COMPLETED": ("#6cb2ff", "bright_blue"),
    "FAILED": ("bold #ff6b6b", "red"),
    "CANCELLED": ("#a0a0a0", "grey"),
    "TIMEOUT": ("#ff8f70", "red"),
    "PREEMPTED": ("#d08bf0", "magenta"),
    "NODE_FAIL": ("bold #ff6b6b", "red"),
    "OUT_OF_MEMORY": ("bold #ff6b6b", "red"),
    "REQUEUED": ("#e5b400", "yellow"),
    "UNKNOWN": ("#a0a0a0", "grey"),
}


def when(value: datetime | float | None) -> str:
    """A moment as ``YYYY-MM-DD HH:MM:SS`` in this machine's local time; ``-`` when unknown."""
    if value is None:
        return "-"
    if isinstance(value, (int, float)):
        value = datetime.fromtimestamp(value)
    return value.strftime("%Y-%m-%d %H:%M:%S")
