"""Sweep: one sweep's configurations beside their state, result and metrics, live.

The rows are hpcui.sweeps.table's, the same as `hpcui sweep show` prints (one place per
fact), read in a thread worker that re-arms its timer only after it finished: every LIVE_S
while an element is queued or running, on `r` once all ended. The sweeps are those kept on
this machine ([ and ] pick one); a sweep of a cluster not connected yet connects it.
Enter opens the element under the cursor on the Job screen; s sorts by the column under
the cursor (S the other way); / filters (table.filter_rows' words); p plots one metric of
every element shown on one pair of axes (the metric under the cursor, if it is one).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Input, Static

from hpcui.backends.states import JobState
from hpcui.common.formatting import STATE_PALETTE
from hpcui.errors import HpcuiError
from hpcui.sweeps import store, table
from hpcui.tui.chrome import LEAD_BINDINGS, app_footer, app_header
from hpcui.tui.markup import escape
from hpcui.tui.messages import OpenJob
from hpcui.tui.metrics_view import CompareMetrics

if TYPE_CHECKING:
    from hpcui.tui.context import AppContext

LIVE_S = 10.0  # a sweep's table is one squeue plus a log read per live element
MAX_PLOTTED = 12  # lines on one plot (as the Jobs screen's comparison)
#: the columns a row has that are not worth a column on screen
HIDDEN = ("key",)
NOT_SUBMITTED = "NOT_SUBMITTED"


def is_live(state: str) -> bool:
    """An element queued or running (its row still changes)."""
    if state == NOT_SUBMITTED:
        return False
    try:
        return not JobState(state).is_final
    except ValueError:
        return False


def config_label(row: dict[str, Any], names: list[str]) -> str:
    """`lr=0.01 bs=32`: an element as a plot's legend names it."""
    return " ".join(f"{n}={table.cell_text(n, row.get(n), width=12)}" for n in names)


class SweepScreen(Screen[None]):
    FOOTER_SPARE = ("sweep.refresh", "sweep.next", "sweep.sort")
    BINDINGS = [
        *LEAD_BINDINGS,
        Binding("enter", "open", "Open", id="sweep.open"),
        Binding("s", "sort", "Sort", id="sweep.sort"),
        Binding("S", "sort_reverse", "Reverse", show=False, id="sweep.sort_reverse"),
        Binding("slash", "filter", "Filter", id="sweep.filter"),
        Binding("p", "plot", "Plot", id="sweep.plot"),
        Binding("right_square_bracket", "pick(1)", "Next sweep", id="sweep.next"),
        Binding(
            "left_square_bracket", "pick(-1)", "Previous sweep", show=False, id="sweep.previous"
        ),
        Binding("r", "reload", "Refresh", id="sweep.refresh"),
        Binding("escape", "clear_filter", "Clear", show=False),
    ]

    def __init__(self, ctx: AppContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.kept: list[tuple[str, str]] = []  # (cluster, name) of every sweep here
        self.current: tuple[str, str] | None = None
        self.rows: list[dict[str, Any]] = []  # the table as read, in the sweep's order
        self.shown: list[dict[str, Any]] = []  # after the filter and the sort
        self.columns: list[str] = []
        self.config_names: list[str] = []
        self.sort_column: str | None = None
        self.sort_reverse = False
        self.text_filter = ""
        self.problem = ""
        self.read_at: float | None = None
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield app_header()
        yield Static("", id="sweep-info")
        box = Input(placeholder="filter: state=FAILED  lr<0.01  any text", id="sweep-filter")
        box.display = False
        yield box
        yield DataTable(id="sweep-table", cursor_type="cell", zebra_stripes=True)
        yield app_footer()

    @property
    def grid(self) -> DataTable[Any]:
        return self.query_one("#sweep-table", DataTable)

    # -- reading ---------------------------------------------------------------------------

    def on_screen_resume(self) -> None:
        self.kept = store.names()
        if self.current not in self.kept:
            self.current = self.kept[0] if self.kept else None
            self.rows = []
        self._redraw()
        self.action_reload()
        self.grid.focus()

    def on_screen_suspend(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def _connections_changed(self) -> None:
        """A cluster just connected: the sweep waiting for it can be read now."""
        if self.current and not self.rows and self.is_current:
            self.action_reload()

    def on_mount(self) -> None:
        self.watch(self.app, "conn_version", lambda _v: self._connections_changed(), init=False)

    def action_reload(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if self.current is None:
            return
        cluster_name, _name = self.current
        if self.ctx.hub.cluster(cluster_name) is None:
            conn = self.ctx.hub.conns.get(cluster_name)
            if conn is None:
                self.problem = f"{cluster_name} is not in the config: its sweeps cannot be read."
            else:
                self.problem = f"connecting to {cluster_name}…"
                if conn.status not in ("connecting",):
                    self.ctx.hub.connect(cluster_name)
            self._render_info()
            return
        self._read(self.current)

    @work(thread=True, exclusive=True, group="sweep-read", exit_on_error=False)
    def _read(self, which: tuple[str, str]) -> None:
        from hpcui.sweeps.sweep import get

        cluster = self.ctx.hub.cluster(which[0])
        if cluster is None:
            return
        try:
            sweep = get(cluster, which[1])
            rows = sweep.results()
            names = list(sweep.spec.elements[0].config) if sweep.spec.elements else []
        except HpcuiError as exc:
            self.app.call_from_thread(self._failed, which, str(exc))
            return
        self.app.call_from_thread(self._got, which, rows, names)

    def _failed(self, which: tuple[str, str], message: str) -> None:
        if which == self.current:
            self.problem = message
            self._render_info()
            self._arm()

    def _got(self, which: tuple[str, str], rows: list[dict[str, Any]], names: list[str]) -> None:
        if which != self.current:  # another sweep was picked meanwhile
            return
        self.rows, self.config_names, self.problem = rows, names, ""
        self.read_at = time.time()
        self._redraw()
        if any(is_live(r["state"]) for r in rows):
            self._arm()

    def _arm(self) -> None:
        if self.is_current and self._timer is None:
            self._timer = self.set_timer(LIVE_S, self.action_reload)

    # -- drawing ---------------------------------------------------------------------------

    def _redraw(self) -> None:
        grid = self.grid
        at_key = self._cursor_row_key()
        at_col = self._cursor_column()
        try:
            shown = table.filter_rows(self.rows, self.text_filter)
        except HpcuiError as exc:  # a half-typed `lr<` says what it needs, the rows stay
            self.problem = str(exc)
            shown = list(self.rows)
        if self.sort_column and self.sort_column in table.columns(shown):
            shown = table.sort_rows(shown, ("-" if self.sort_reverse else "") + self.sort_column)
        self.shown = shown
        self.columns = [c for c in table.columns(self.rows) if c not in HIDDEN]
        grid.clear(columns=True)
        for col in self.columns:
            grid.add_column(self._header(col), key=col)
        for row in shown:
            grid.add_row(*(self._cell(col, row.get(col)) for col in self.columns), key=row["key"])
        if at_key is not None and any(r["key"] == at_key for r in shown):
            r = grid.get_row_index(at_key)
            c = self.columns.index(at_col) if at_col in self.columns else 0
            grid.move_cursor(row=r, column=c, animate=False)
        self._render_info()

    def _header(self, col: str) -> str:
        if col != self.sort_column:
            return col
        return f"{col} {'▼' if self.sort_reverse else '▲'}"

    def _cell(self, col: str, value: Any) -> Text:
        text = table.cell_text(col, value)
        if col == "state":
            return Text(text, style=STATE_PALETTE.get(text, ("", ""))[0])
        if isinstance(value, int | float) and not isinstance(value, bool):
            return Text(text, justify="right")
        return Text(text)

    def _render_info(self) -> None:
        info = self.query_one("#sweep-info", Static)
        if self.current is None:
            info.update(
                "No sweeps on this machine yet. Start one from Python (hpcui.sweep(fn, "
                "grid={...}, name='lr-scan')) or the shell (hpcui sweep MODULE:FN --grid "
                "lr=1e-3,1e-4 --name lr-scan); it shows here, live."
            )
            return
        cluster_name, name = self.current
        parts = [f"[b]{escape(name)}[/] on {escape(cluster_name)}"]
        if self.rows:
            parts.append(f"{len(self.rows)} configurations")
            counts = table.state_counts(self.rows)
            parts += [
                f"[{STATE_PALETTE.get(s, ('', ''))[0] or 'default'}]{s}[/] {n}"
                for s, n in counts.items()
            ]
        if self.sort_column:
            parts.append(f"by {escape(self.sort_column)}{' ▼' if self.sort_reverse else ' ▲'}")
        if self.text_filter:
            parts.append(f"filter {escape(self.text_filter)!r}: {len(self.shown)} shown")
        if len(self.kept) > 1:
            i = self.kept.index(self.current) + 1
            parts.append(f"sweep {i} of {len(self.kept)} ([ ])")
        if self.read_at is not None and self.rows:
            live = any(is_live(r["state"]) for r in self.rows)
            stamp = time.strftime("%H:%M:%S", time.localtime(self.read_at))
            parts.append(f"read {stamp}" + (f", again every {LIVE_S:.0f} s" if live else ""))
        line = " · ".join(parts)
        if self.problem:
            line += f"\n[yellow]{escape(self.problem)}[/]"
        info.update(line)

    # -- keys ------------------------------------------------------------------------------

    def _cursor_row_key(self) -> str | None:
        grid = self.grid
        if not grid.row_count:
            return None
        key = grid.coordinate_to_cell_key(grid.cursor_coordinate).row_key
        return None if key.value is None else str(key.value)

    def _cursor_column(self) -> str | None:
        grid = self.grid
        if not self.columns or grid.cursor_column >= len(self.columns):
            return None
        return self.columns[grid.cursor_column]

    def _cursor_row(self) -> dict[str, Any] | None:
        key = self._cursor_row_key()
        return next((r for r in self.shown if r["key"] == key), None)

    def action_open(self) -> None:
        row = self._cursor_row()
        if row is None or self.current is None:
            return
        if not row.get("job_id"):
            self.notify("This configuration was never submitted: nothing to open yet.")
            return
        self.post_message(OpenJob(self.current[0], str(row["job_id"])))

    @on(DataTable.CellSelected, "#sweep-table")
    def _selected(self, event: DataTable.CellSelected) -> None:
        self.action_open()

    def action_sort(self) -> None:
        col = self._cursor_column()
        if col is None:
            return
        if col == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column, self.sort_reverse = col, False
        self._redraw()

    def action_sort_reverse(self) -> None:
        if self.sort_column is None:
            self.sort_column = self._cursor_column()
        self.sort_reverse = not self.sort_reverse
        self._redraw()

    def sort_by(self, column: str, *, reverse: bool = False) -> None:
        """Sort by `column` (the command palette's and the tests' way in)."""
        self.sort_column, self.sort_reverse = column, reverse
        self._redraw()

    def action_filter(self) -> None:
        box = self.query_one("#sweep-filter", Input)
        box.display = True
        box.focus()

    @on(Input.Changed, "#sweep-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.text_filter = event.value
        self.problem = ""
        self._redraw()

    @on(Input.Submitted, "#sweep-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self.grid.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#sweep-filter", Input)
        box.value = ""
        box.display = False
        self.grid.focus()

    def action_pick(self, step: int) -> None:
        self.kept = store.names()
        if not self.kept:
            self.current = None
            self._redraw()
            return
        i = self.kept.index(self.current) if self.current in self.kept else -step
        self.current = self.kept[(i + step) % len(self.kept)]
        self.rows, self.sort_column, self.read_at, self.problem = [], None, None, ""
        self._redraw()
        self.action_reload()

    def action_plot(self) -> None:
        """One metric of every element shown (at most MAX_PLOTTED), legend by configuration."""
        if self.current is None:
            return
        with_jobs = [r for r in self.shown if r.get("job_id")]
        if not with_jobs:
            self.notify("No element has run yet: nothing to plot.", severity="warning")
            return
        if len(with_jobs) > MAX_PLOTTED:
            self.notify(f"Plotting the first {MAX_PLOTTED} of {len(with_jobs)} rows shown "
                        "(filter or sort to choose).", severity="warning")  # fmt: skip
        col = self._cursor_column() or ""
        first = col.removeprefix("metric.") if col.startswith("metric.") else ""
        picked = with_jobs[:MAX_PLOTTED]
        jobs = [(self.current[0], str(r["job_id"])) for r in picked]
        labels = {f"{c}:{j}": config_label(r, self.config_names)
                  for (c, j), r in zip(jobs, picked, strict=True)}  # fmt: skip
        self.app.push_screen(CompareMetrics(self.ctx.hub.cluster, jobs, first=first, labels=labels))
