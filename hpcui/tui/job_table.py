"""The jobs table: a virtual table that paints only the rows on screen.

Textual's DataTable measures every cell it is given and keeps its rows in structures whose
removal is linear per row: 10,000 jobs took 2.8 s to apply and paint, and a filter key on
4,000 rows 4.8 s (quadratic). Here rows are plain dicts in a list; an apply is one pass
(diff, counts, an optional sort), a filter is a list comprehension, column widths grow as
cells arrive, and `render_line` draws the few dozen visible lines (Textual's Line API).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence, Set
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from hpcui.tui.rows import FOLD_MARKS, JobRow, id_sort_key

Cell = str | Text
PAD = 1  # spaces either side of a cell
MARK = Text("●", style="bold magenta")


#: how wide a column may be when the table is too narrow for everything (then cut "…"),
#: and how narrow it may get before a less wanted column gives way instead
MAX_WIDTH = {"name": 24, "why": 28, "where": 18, "efficiency": 40, "cluster": 12}
MIN_WIDTH = {"name": 10, "why": 10, "where": 10, "efficiency": 24, "cluster": 8}


class JobTable(ScrollView, can_focus=True):
    """Rows keyed by ``cluster:job_id``; ``shown`` mirrors what is on screen (key -> cells)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select", "Open", show=False),
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("left", "scroll_left", "Left", show=False),
        Binding("right", "scroll_right", "Right", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "job-table--header",
        "job-table--cursor",
        "job-table--even-row",
    }
    DEFAULT_CSS = """
    JobTable {
        background: $surface;
        color: $foreground;
        &:focus {
            background-tint: $foreground 5%;
            & > .job-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
        }
        & > .job-table--header { text-style: bold; background: $panel; color: $foreground; }
        & > .job-table--even-row { background: $surface-lighten-1 50%; }
        &:dark > .job-table--even-row { background: $surface-darken-1 40%; }
        & > .job-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """

    cursor_row: reactive[int] = reactive(0, always_update=True)

    class RowSelected(Message):
        """Enter (or a click) on a row."""

        def __init__(self, table: JobTable, key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> JobTable:
            return self.table

    def __init__(
        self,
        columns: Sequence[tuple[str, str]],
        priority: Sequence[str] = (),
        optional: Set[str] = frozenset(),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.column_spec = tuple(columns)
        self._all_cols = [k for k, _ in self.column_spec]
        #: columns shown only while a row has something in them
        self.optional = optional
        self._cols = list(self._all_cols)
        #: which columns stay when the table is too narrow for all, most wanted first
        self.priority = [c for c in priority if c in self._cols] or list(self._cols)
        self._labels = dict(self.column_spec)
        self.shown: dict[str, dict[str, Cell]] = {}
        self.keys: list[str] = []  # display order
        self._index: dict[str, int] = {}
        self._widths = self._label_widths()
        self.marked: set[str] = set()
        self.sort_column: str | None = None
        self.sort_reverse = False
        self.squeezed = False  # the last fitted(): too narrow for every column at full width
        self._cut: dict[str, int] = {}  # when squeezed: each shown column's width (fitted())
        self._fitted = self._cols

    # -- data ------------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self.keys)

    def apply(
        self, rows: dict[str, JobRow], visible: Callable[[JobRow], bool] = lambda r: True
    ) -> tuple[int, int, int]:
        """Show ``rows`` (those ``visible``), in their order or sorted; returns (added,
        removed, cells updated). One pass over the rows; only visible lines repaint."""
        current = self.current_key()
        shown, widths = self.shown, self._widths
        keys = [k for k, row in rows.items() if visible(row)]
        wanted = set(keys)
        removed = 0
        for key in [k for k in shown if k not in wanted]:
            del shown[key]
            removed += 1
        added = updated = 0
        for key in keys:
            cells = rows[key].cells
            old = shown.get(key)
            if old is None:
                added += 1
            elif old == cells:  # dict equality checks identity first: shared Texts are cheap
                continue
            else:
                changed = sum(1 for c in self._all_cols if old.get(c, "") != cells.get(c, ""))
                updated += changed
                if not changed:
                    continue
            shown[key] = dict(cells)
            for col in self._all_cols:
                value = cells.get(col)
                if value:
                    size = cell_len(value.plain if isinstance(value, Text) else value)
                    if size > widths[col]:
                        widths[col] = size
        self.keys = keys
        if self.sort_column is not None:
            self._sort()
        self._reindex(current)
        return added, removed, updated

    def _sort(self) -> None:
        column = self.sort_column
        shown = self.shown

        first = 10**12 if self.sort_reverse else -1  # an array's row heads its elements

        def key(k: str) -> Any:
            text = str(shown[k].get(column or "", ""))
            if column != "id":
                return text.lower()
            if text[:1] in FOLD_MARKS:
                return (*id_sort_key(text)[:1], first)
            return id_sort_key(text)

        self.keys.sort(key=key, reverse=self.sort_reverse)

    def _present(self) -> list[str]:
        """The columns to show: an optional one only while a shown row fills it."""
        if not self.optional:
            return self._all_cols
        filled = {c for c in self.optional if any(cells.get(c) for cells in self.shown.values())}
        return [c for c in self._all_cols if c not in self.optional or c in filled]

    def _reindex(self, keep: str | None) -> None:
        self._cols = self._present()
        self._index = {k: i for i, k in enumerate(self.keys)}
        self.marked &= self._index.keys()
        self._fitted = self.fitted()  # once per change of rows or size, not per line painted
        widths = self._cut if self.squeezed else self._widths  # no scroll bar for a cut row
        width = sum(widths[c] + 2 * PAD for c in self._fitted)
        self.virtual_size = Size(width, len(self.keys) + 1)
        row = self._index.get(keep, self.cursor_row) if keep is not None else self.cursor_row
        self.cursor_row = max(0, min(row, len(self.keys) - 1))
        self.refresh()

    def set_sort(self, column: str | None, reverse: bool = False) -> None:
        self.sort_column, self.sort_reverse = column, reverse
        if column is not None:
            current = self.current_key()
            self._sort()
            self._reindex(current)
        self.refresh()  # the header's arrow moves, or goes with sorting off

    def forget(self) -> None:
        """Drop every row (a view switch); the next apply adds them back."""
        self.shown.clear()
        self.keys = []
        self._widths = self._label_widths()
        self._reindex(None)

    def fitted(self) -> list[str]:
        """The columns shown: all when they fit the table's width, else the most wanted
        that fit (in their own order), long ones cut to make room for more columns.

        Each wanted column is taken at its narrowest (MIN_WIDTH) while the row has room,
        then the room left widens them: in priority order up to MAX_WIDTH, then the most
        cut first up to their whole width. At 80 columns that is id, name, state, the reason
        and the elapsed time. With several clusters in the table the
        cluster column comes right after the id (an id alone is ambiguous), and at 80
        columns the elapsed time is then the one that gives way."""
        room = self.scrollable_content_region.width or self.size.width
        self.squeezed = False
        if not room or sum(self._widths[c] + 2 * PAD for c in self._cols) <= room:
            return self._cols
        self.squeezed = True
        full = self._widths
        least = {c: min(full[c], MIN_WIDTH.get(c, full[c])) for c in self._cols}
        keep: list[str] = []
        used = 0
        for c in self._priority_now():
            if used + least[c] + 2 * PAD > room and len(keep) >= 3:
                break  # no less wanted (narrower) column jumps the queue: the room widens these
            keep.append(c)
            used += least[c] + 2 * PAD
        width = {c: least[c] for c in keep}
        spare = room - used
        for c in keep:  # most wanted first, up to the usual cut
            more = max(0, min(spare, min(full[c], MAX_WIDTH.get(c, full[c])) - width[c]))
            width[c] += more
            spare -= more
        # what is left goes back to the cut ones, the most cut first (History cut its
        # efficiency line at 40 with 30 columns free)
        for c in sorted(keep, key=lambda c: width[c] - full[c]):
            more = max(0, min(spare, full[c] - width[c]))
            width[c] += more
            spare -= more
        self._cut = width
        return [c for c in self._cols if c in width]

    def _priority_now(self) -> list[str]:
        priority = [c for c in self.priority if c in self._cols]  # an empty optional one goes
        if "cluster" not in priority:
            return priority
        clusters = {str(cells.get("cluster", "")) for cells in self.shown.values()}
        if len(clusters) < 2:
            return priority
        rest = [c for c in priority if c != "cluster"]
        at = rest.index("id") + 1 if "id" in rest else 0
        return [*rest[:at], "cluster", *rest[at:]]

    def on_resize(self) -> None:
        self._reindex(self.current_key())

    def _label_widths(self) -> dict[str, int]:
        """Each column at least as wide as its label and the sort arrow beside it."""
        return {k: cell_len(label) + (2 if label.strip() else 0) for k, label in self.column_spec}

    def header_label(self, col: str) -> str:
        """The label, with ▼/▲ on the column the rows are sorted by (descending/ascending)."""
        label = self._labels[col]
        if col != self.sort_column:
            return label
        return f"{label} {'▼' if self.sort_reverse else '▲'}"

    # -- DataTable-like access (tests, screens) -------------------------------------------------

    def get_row_index(self, key: str) -> int:
        return self._index[key]

    def get_row(self, key: str) -> list[Cell]:
        cells = self.shown[key]
        return [cells.get(c, "") for c in self._cols]

    def get_cell(self, key: str, column: str) -> Cell:
        return self.shown[key].get(column, "")

    def move_cursor(self, *, row: int) -> None:
        self.cursor_row = max(0, min(row, len(self.keys) - 1))

    def current_key(self) -> str | None:
        if not self.keys or not 0 <= self.cursor_row < len(self.keys):
            return None
        return self.keys[self.cursor_row]

    def toggle_mark(self) -> None:
        key = self.current_key()
        if key is None or "sel" not in self._labels:
            return
        self.marked ^= {key}
        self.refresh()

    def ordered_marked(self) -> Iterator[str]:
        return (k for k in self.keys if k in self.marked)

    # -- cursor and scrolling -------------------------------------------------------------------

    def watch_cursor_row(self, old: int, new: int) -> None:
        page = max(1, self.scrollable_content_region.height - 1)
        top = round(self.scroll_y)
        if new < top:
            self.scroll_to(y=new, animate=False, immediate=True)
        elif new >= top + page:
            self.scroll_to(y=new - page + 1, animate=False, immediate=True)
        self.refresh()

    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def action_cursor_up(self) -> None:
        self.move_cursor(row=self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(row=self.cursor_row + 1)

    def action_page_up(self) -> None:
        self.move_cursor(row=self.cursor_row - self._page())

    def action_page_down(self) -> None:
        self.move_cursor(row=self.cursor_row + self._page())

    def action_first(self) -> None:
        self.move_cursor(row=0)

    def action_last(self) -> None:
        self.move_cursor(row=len(self.keys) - 1)

    def action_select(self) -> None:
        key = self.current_key()
        if key is not None:
            self.post_message(self.RowSelected(self, key))

    def on_click(self, event: events.Click) -> None:
        row = event.y - 1 + round(self.scroll_y)
        if event.y >= 1 and 0 <= row < len(self.keys):
            self.move_cursor(row=row)
            self.post_message(self.RowSelected(self, self.keys[row]))

    # -- painting -------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        scroll_x = round(self.scroll_x)
        if y == 0:
            style = self.get_component_rich_style("job-table--header")
            cols = self._fitted
            cells: Sequence[Cell] = [self.header_label(c) for c in cols]
        else:
            row = round(self.scroll_y) + y - 1
            if row >= len(self.keys):
                return Strip.blank(width, self.rich_style)
            key = self.keys[row]
            if row == self.cursor_row:
                style = self.rich_style + self.get_component_rich_style("job-table--cursor")
            elif row % 2:
                style = self.rich_style + self.get_component_rich_style("job-table--even-row")
            else:
                style = self.rich_style
            values = self.shown[key]
            cols = self._fitted
            cells = [
                (MARK if key in self.marked else "") if c == "sel" else values.get(c, "")
                for c in cols
            ]
        segments = list(self._segments(cols, cells, style))
        strip = Strip(segments).crop(scroll_x, scroll_x + width)
        return strip.extend_cell_length(width, style)

    def _segments(
        self, cols: Sequence[str], cells: Sequence[Cell], style: Style
    ) -> Iterator[Segment]:
        console = self.app.console
        pad = " " * PAD
        for col, value in zip(cols, cells, strict=True):
            text = value.copy() if isinstance(value, Text) else Text(str(value))
            if text.style:  # Text.render leaves the base style to console.render: a span
                text.stylize(text.style)  # keeps it (the states drew uncoloured)
            width = self._widths[col]
            if self.squeezed:
                width = self._cut.get(col, width)
            text.truncate(width, overflow="ellipsis", pad=True)
            yield Segment(pad, style)
            for seg in text.render(console):
                yield Segment(seg.text, style + seg.style if seg.style else style)
            yield Segment(pad, style)
