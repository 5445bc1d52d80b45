"""What every screen has around its content: the header and the footer, alike in a
terminal and in the browser (`hpcui serve`).

- The header's icon is a glyph every monospace font has: Textual's default (⭘, U+2B58)
  is missing from the fonts browsers fall back to, so it drew as an empty box.
- Help (?) and Quit (q) lead every screen's footer: the footer drops what does not fit at
  its right end, and at 80 columns that was them. The command palette's key is not in it
  (see app_footer). The app keeps its own ? and q (modals
  and unfocused moments), hidden from the footer; both carry the same ids, so a remapped
  key moves both.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Footer, Header

ICON = "≡"

LEAD_BINDINGS = [
    Binding("question_mark", "app.help", "Help", id="app.help"),
    Binding("q", "app.quit", "Quit", id="app.quit"),
]


def app_header() -> Header:
    return Header(icon=ICON)


def app_footer() -> Footer:
    # no palette key docked at its right: when a screen's keys overflow the line, Textual
    # drew the next key's first letter beside it ("^p palettet"); ^p still opens
    # the palette (the header's ≡ too) and the help (?) lists it
    return Footer(compact=True, show_command_palette=False)
