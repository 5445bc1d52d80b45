"""Widgets: the job table (hpcui.tui.job_table), the log panel with follow/"N new lines", the metric plot."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import RichLog, Static

from hpcui.common.terminal_text import safe_text
from hpcui.logs.follow import ProgressLines, is_runtime_line

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
        self.quiet = False  # the runtime's own INFO lines hidden (kept in `lines`)
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
        if self.quiet and is_runtime_line(line):
            return
        # the job's escapes never reach the terminal (colours are styles, kept as such)
        line = safe_text(line)
        text = Text.from_ansi(line) if "\x1b" in line else Text(line)
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

    def set_quiet(self, quiet: bool) -> None:
        """Hide (or show again) the runtime's own INFO lines; nothing is lost."""
        self.quiet = quiet
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
        hits = [
            i
            for i, line in enumerate(self.lines)
            if needle in line.lower() and not (self.quiet and is_runtime_line(line))
        ]
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
        if self.quiet:
            parts.append("runtime lines hidden")
        if self.search:
            parts.append(f"search {self.search!r}")
        if self.new_lines:
            parts.append(f"[b reverse] {self.new_lines} new lines [/] (End: jump)")
        parts.append(f"{len(self.lines)} lines")
        if extra:
            parts.append(extra)
        self.query_one("#log-status", Static).update(" · ".join(parts))
