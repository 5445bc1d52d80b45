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

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Header
from textual.widgets._footer import FooterKey

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
    return FittingFooter(compact=True, show_command_palette=False)


class FittingFooter(Footer):
    """Textual's footer cuts what does not fit at its right end ("h Histor" at 80
    columns); this one leaves whole keys out instead: first those a screen names in
    `FOOTER_SPARE` (binding ids, least needed first), then from the right end. Help and
    Quit always stay, and the help (?) lists every key."""

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        items: dict[str, tuple[Binding, bool, str]] = {}  # one key per action, as Footer
        for _node, binding, enabled, tooltip in self.screen.active_bindings.values():
            if binding.show:
                items.setdefault(binding.action, (binding, enabled, tooltip))
        kept = list(items.values())
        room = self.size.width or self.app.size.width
        spare = list(getattr(self.screen, "FOOTER_SPARE", ()))
        lead = {b.id for b in LEAD_BINDINGS}

        def width(keys: list[tuple[Binding, bool, str]]) -> int:
            display = self.app.get_key_display
            return sum(cell_len(display(b)) + cell_len(b.description) + 2 for b, _, _ in keys)

        while width(kept) > room:
            ids = [b.id for b, _, _ in kept]
            drop = next((i for i in spare if i in ids), None)
            if drop is None:
                drop = next((i for i in reversed(ids) if i not in lead), None)
            if drop is None:
                break
            kept = [k for k in kept if k[0].id != drop]
        for binding, enabled, tooltip in kept:
            yield FooterKey(
                binding.key,
                self.app.get_key_display(binding),
                binding.description,
                binding.action,
                disabled=not enabled,
                tooltip=tooltip,
            ).data_bind(compact=Footer.compact)

    def on_resize(self) -> None:
        self.refresh(recompose=True)
