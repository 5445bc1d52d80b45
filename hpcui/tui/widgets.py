"""Widgets: the in-place job table, the log panel with follow/"N new lines", the metric plot."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Label, RichLog, Sparkline, Static

from hpcui.logs import ProgressLines
from hpcui.tui.rows import JobRow, id_sort_key


class JobTable(DataTable[Any]):
    """A DataTable keyed by ``cluster:job_id`` that applies a refresh as cell updates.

    A refresh never rebuilds the table: rows that left are removed, new ones added, and
    of the rest only the cells whose value changed get ``update_cell`` — all inside one
    ``batch_update`` so the screen repaints once. ``shown`` mirrors what is on screen, so
    the comparison costs no ``get_cell`` round trip.
    """

    def __init__(self, columns: Sequence[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.column_spec = tuple(columns)
        self.shown: dict[str, dict[str, str | Text]] = {}
        self.marked: set[str] = set()
        self.sort_column: str | None = None
        self.sort_reverse = False

    def on_mount(self) -> None:
        for key, label in self.column_spec:
            self.add_column(label, key=key)

    def apply(
        self, rows: dict[str, JobRow], visible: Callable[[JobRow], bool] = lambda r: True
    ) -> tuple[int, int, int]:
        """Show ``rows`` (those ``visible``); returns (added, removed, cells updated)."""
        added = removed = updated = 0
        keys = [k for k, _ in self.column_spec]
        resort = False
        with self.app.batch_update():
            for key in [k for k in self.shown if k not in rows or not visible(rows[k])]:
                self.remove_row(key)
                del self.shown[key]
                removed += 1
            for key, row in rows.items():
                if not visible(row):
                    continue
                cells = dict(row.cells)
                if "sel" in cells:
                    cells["sel"] = Text("●", style="bold magenta") if key in self.marked else ""
                old = self.shown.get(key)
                if old is None:
                    self.add_row(*(cells.get(k, "") for k in keys), key=key)
                    added += 1
                    resort = True
                else:
                    for col in keys:
                        value = cells.get(col, "")
                        if old.get(col) != value:
                            # widening a column re-measures all of it: only when needed
                            grow = len(str(value)) > self.columns[col].content_width  # type: ignore[index]
                            self.update_cell(key, col, value, update_width=grow)
                            updated += 1
                            resort = resort or col == self.sort_column
                self.shown[key] = cells
            if resort and self.sort_column is not None:
                self._resort()
        return added, removed, updated

    def set_sort(self, column: str | None, reverse: bool = False) -> None:
        self.sort_column, self.sort_reverse = column, reverse
        if column is not None:
            self._resort()

    def _resort(self) -> None:
        column = self.sort_column
        assert column is not None

        def key(value: Any) -> Any:
            text = str(value)
            return id_sort_key(text) if column == "id" else text.lower()

        self.sort(column, key=key, reverse=self.sort_reverse)

    def current_key(self) -> str | None:
        if self.row_count == 0:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:
            return None

    def toggle_mark(self) -> None:
        key = self.current_key()
        if key is None or "sel" not in dict(self.column_spec):
            return
        self.marked ^= {key}
        mark: str | Text = Text("●", style="bold magenta") if key in self.marked else ""
        self.update_cell(key, "sel", mark)
        self.shown[key]["sel"] = mark

    def forget(self) -> None:
        """Drop every row (a view switch); the next apply adds them back."""
        self.clear()
        self.shown.clear()


# -- logs ------------------------------------------------------------------------------------

MAX_LINES = 20_000  # kept for wrap/search rebuilds; older lines scroll away


class LogPanel(Vertical):
    """Log lines with follow, "N new lines", wrap and search (Toolong-style).

    Follow sticks to the bottom only while the view is at the bottom: a user who scrolled
    up to read is never yanked down; new lines are counted instead and shown in the status
    line until they scroll back to the end.
    """

    class NewLines(Message):
        def __init__(self, count: int) -> None:
            super().__init__()
            self.count = count

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lines: list[str] = []
        self.follow = True
        self.wrap = False
        self.new_lines = 0
        self.search = ""
        self.label = ""
        self._progress = ProgressLines()
        self._line_y: list[int] = []  # first rendered row of each line (wrap changes it)

    def compose(self) -> ComposeResult:
        yield RichLog(id="log-text", wrap=False, markup=False, highlight=False, auto_scroll=False)
        yield Static("", id="log-status")

    @property
    def log_widget(self) -> RichLog:
        return self.query_one("#log-text", RichLog)

    def on_mount(self) -> None:
        self.watch(self.log_widget, "scroll_y", self._scrolled, init=False)
        self._status()

    # -- content -------------------------------------------------------------------------

    def reset(self, label: str = "") -> None:
        self.lines.clear()
        self._line_y.clear()
        self._progress = ProgressLines()
        self.new_lines = 0
        self.label = label
        self.log_widget.clear()
        self._status()

    def feed(self, text: str) -> list[str]:
        """Add raw text (tqdm ``\\r`` redraws collapsed); returns the completed lines."""
        lines = self._progress.feed(text)
        if lines:
            self.add_lines(lines)
        return lines

    def add_lines(self, lines: Iterable[str]) -> None:
        lines = list(lines)
        log = self.log_widget
        stick = self.follow and self.at_bottom()
        for line in lines:
            self._write(line, scroll_end=stick)
        self.lines.extend(lines)
        if len(self.lines) > MAX_LINES:
            drop = len(self.lines) - MAX_LINES
            del self.lines[:drop]
            del self._line_y[:drop]
        if stick:
            log.scroll_end(animate=False, immediate=True)
        else:
            self.new_lines += len(lines)
            self.post_message(self.NewLines(self.new_lines))
        self._status()

    def _write(self, line: str, *, scroll_end: bool) -> None:
        log = self.log_widget
        self._line_y.append(len(log.lines))
        text = Text(line)
        if self.search:
            text.highlight_regex(re.escape(self.search), "black on yellow")
        log.write(text, scroll_end=scroll_end)

    def _rebuild(self) -> None:
        log = self.log_widget
        log.clear()
        log.wrap = self.wrap
        self._line_y.clear()
        for line in self.lines:
            self._write(line, scroll_end=False)

    # -- follow / new lines --------------------------------------------------------------

    def at_bottom(self) -> bool:
        log = self.log_widget
        return log.max_scroll_y == 0 or log.scroll_y >= log.max_scroll_y - 1

    def _scrolled(self, _y: float) -> None:
        if self.new_lines and self.at_bottom():
            self.new_lines = 0
            self._status()

    def set_follow(self, follow: bool) -> None:
        self.follow = follow
        if follow:
            self.to_end()
        self._status()

    def to_end(self) -> None:
        self.log_widget.scroll_end(animate=False, immediate=True)
        self.new_lines = 0
        self._status()

    def set_wrap(self, wrap: bool) -> None:
        self.wrap = wrap
        self._rebuild()
        self._status()

    def set_search(self, term: str) -> int | None:
        """Highlight ``term`` and jump to its first match at or after the view; the line."""
        self.search = term
        self._rebuild()
        return self.next_match(from_top=True)

    def next_match(self, *, from_top: bool = False) -> int | None:
        if not self.search:
            return None
        log = self.log_widget
        start_y = -1 if from_top else log.scroll_y
        needle = self.search.lower()
        hits = [i for i, line in enumerate(self.lines) if needle in line.lower()]
        if not hits:
            self.notify(f"{self.search!r} not found", severity="warning")
            return None
        after = [i for i in hits if self._y(i) > start_y]
        line = after[0] if after else hits[0]
        log.scroll_to(y=self._y(line), animate=False, immediate=True)
        self._status(f"match {hits.index(line) + 1}/{len(hits)} at line {line + 1}")
        return line

    def _y(self, line: int) -> int:
        return self._line_y[line] if line < len(self._line_y) else line

    def _status(self, extra: str = "") -> None:
        parts = [self.label] if self.label else []
        parts.append("follow" if self.follow else "paused")
        if self.wrap:
            parts.append("wrap")
        if self.search:
            parts.append(f"search {self.search!r}")
        if self.new_lines:
            parts.append(f"[b reverse] {self.new_lines} new lines [/] (End: jump)")
        parts.append(f"{len(self.lines)} lines")
        if extra:
            parts.append(extra)
        self.query_one("#log-status", Static).update(" · ".join(parts))


# -- metric plot -------------------------------------------------------------------------------

DEFAULT_METRIC = r"loss[^0-9+\-.\n]{0,6}([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"


class MetricPlot(Vertical):
    """A live sparkline of a number parsed from each log line (default: ``loss <number>``)."""

    MAX_POINTS = 2000

    def __init__(self, pattern: str = DEFAULT_METRIC, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.values: list[float] = []
        self.regex = re.compile(pattern, re.IGNORECASE)

    def compose(self) -> ComposeResult:
        yield Label("", id="metric-label")
        yield Sparkline([], id="metric-spark")

    def set_pattern(self, pattern: str, lines: Iterable[str] = ()) -> None:
        """Change the pattern and re-read ``lines`` (the log so far)."""
        regex = re.compile(pattern, re.IGNORECASE)
        if regex.groups < 1:
            regex = re.compile(f"({pattern})", re.IGNORECASE)
        self.regex = regex
        self.values.clear()
        self.feed(lines)

    def reset(self) -> None:
        self.values.clear()
        self._show()

    def feed(self, lines: Iterable[str]) -> None:
        for line in lines:
            m = self.regex.search(line)
            if m is None:
                continue
            try:
                self.values.append(float(m.group(1)))
            except (ValueError, IndexError):
                continue
        del self.values[: -self.MAX_POINTS]
        self._show()

    def _show(self) -> None:
        spark = self.query_one("#metric-spark", Sparkline)
        spark.data = list(self.values)
        label = self.query_one("#metric-label", Label)
        if self.values:
            v = self.values
            label.update(
                f"metric /{self.regex.pattern[:40]}/ · {len(v)} points · last {v[-1]:.4g} · "
                f"min {min(v):.4g} · max {max(v):.4g}"
            )
        else:
            label.update(f"metric /{self.regex.pattern[:40]}/ · no values in the log yet")
