"""A job's output made safe to show on a terminal.

A log is the job's bytes, and a terminal obeys escape sequences in them: OSC 52 writes
the clipboard, OSC 0 the window title, `ESC[2J` clears the screen (and inside the app,
overwrites its rows). What is shown keeps the text, tabs, newlines, carriage returns
(progress bars) and colours (SGR: `ESC[...m`, which only style); every other escape or
control character is dropped. A sequence cut between two reads is dropped in pieces:
none of it reaches the terminal as an escape.
"""

from __future__ import annotations

import re

__all__ = ["safe_text"]

_SEQUENCE = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC ... BEL or ST (unterminated: all of it)
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC ... ST
    r"|\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b[ -/]*[0-~]"  # the other escapes (ESC c resets the terminal)
    r"|\x1b"  # a lone ESC (the rest came in another read)
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x9c|\x1b\\)?"  # 8-bit DCS, SOS, OSC, PM, APC
)
_C1 = re.compile(r"[\x90\x98\x9b\x9d\x9e\x9f]")
_SGR = re.compile(r"\x1b\[[0-9;:]*m")
#: C0 controls but tab, newline and carriage return; DEL; C1 (8-bit CSI, OSC, ...)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9f]")


def safe_text(text: str, *, colours: bool = True) -> str:
    """`text` without what a terminal would obey (colours kept unless told not to)."""
    if "\x1b" in text or _C1.search(text):
        text = _SEQUENCE.sub(
            lambda m: m.group() if colours and _SGR.fullmatch(m.group()) else "", text
        )
    return _CONTROL.sub("", text)
