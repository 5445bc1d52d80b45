"""Jobs: every job of every connected cluster in one table, live, updated in place.

Data comes from two places and no screen polls a scheduler itself:
- each cluster's ``queue_watcher`` (ONE squeue per refresh, shared with every other
  subscriber in the process); its thread posts snapshots here as messages;
- the local registry (hpcui's own jobs, including ended ones the queue forgot), read in a
  worker that re-arms its timer only after it finished.
Both stop while the screen is hidden (subscriptions cancelled, timer not re-armed).

Over 500 lines: one Textual Screen whose compose, bindings, workers and message handlers share its state; rows, folding and the table are apart (rows.py, job_table.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import ContentSwitcher, Input, Static

from hpcui.backends.states import JobState
from hpcui.errors import HpcuiError
from hpcui.sitestate.chains import segments_of
from hpcui.sitestate.same_site import one_per_site, records_to_show, shared_sites
from hpcui.tui.chrome import LEAD_BINDINGS, app_footer, app_header
from hpcui.tui.job_table import JobTable
from hpcui.tui.messages import CancelJobs, ControlJobs, OpenJob, Resubmit, ShowView, StopJobs
from hpcui.tui.metrics_view import CompareMetrics
from hpcui.tui.modals import ConfirmModal
from hpcui.tui.rows import (
    HISTORY_COLUMNS,
    HISTORY_PRIORITY,
    JOB_COLUMNS,
    JOB_OPTIONAL,
    JOB_PRIORITY,
    STATE_FILTERS,
    JobRow,
    collapse_arrays,
    collapse_chains,
    history_row,
    matches,
    merge_rows,
    row_key,
)

if TYPE_CHECKING:
    from hpcui.sitestate import QueueJob, QueueSnapshot, Subscription
    from hpcui.store.registry import JobRecord
    from hpcui.tui.context import AppContext

#: the verbs the Jobs screen's keys send (hpcui.jobs.control.Verb has cancel and requeue too)
HoldOrRelease = Literal["hold", "release"]
REGISTRY_S = 2.0
HISTORY_S = 30.0
USAGE_S = 30.0  # the GPU% column's looks (one command per job: sampled less than the queue)
USAGE_JOBS = 10  # running GPU jobs on screen looked at, per cluster
MAX_COMPARED = 12  # jobs on one comparison plot (an array selection stands for its tasks)
SORTABLE = (None, "state", "cluster", "id", "name", "time")


class QueueUpdate(Message):
    """A queue snapshot from a cluster's watcher thread (post_message is thread-safe)."""

    def __init__(self, cluster: str, snap: QueueSnapshot, exc: BaseException | None) -> None:
        super().__init__()
        self.cluster, self.snap, self.exc = cluster, snap, exc


class JobsScreen(Screen[None]):
    #: what the footer leaves out first when it does not fit (80 columns): chrome.FittingFooter
    FOOTER_SPARE = ("jobs.select", "app.jobs", "jobs.sort", "jobs.state")
    BINDINGS = [
        *LEAD_BINDINGS,
        Binding("enter", "open", "Open", id="jobs.open"),
        Binding("space", "mark", "Select", id="jobs.select"),
        Binding("c", "cancel", "Cancel", id="jobs.cancel"),
        Binding("x", "stop", "Stop", show=False, id="jobs.stop"),
        Binding("H", "control('hold')", "Hold", show=False, id="jobs.hold"),
        Binding("L", "control('release')", "Release", show=False, id="jobs.release"),
        Binding("R", "resubmit", "Resubmit", show=False, id="jobs.resubmit"),
        Binding("y", "copy", "Copy id", show=False, id="jobs.copy"),
        Binding("M", "compare", "Compare metrics", show=False, id="jobs.compare"),
        Binding("slash", "filter", "Filter", id="jobs.filter"),
        Binding("t", "state_filter", "State", id="jobs.state"),
        Binding("s", "sort", "Sort", id="jobs.sort"),
        Binding("S", "sort_reverse", "Reverse", show=False, id="jobs.sort_reverse"),
        Binding("a", "toggle_all", "hpcui/all", id="jobs.all"),
        Binding("h", "history", "History", id="jobs.history"),
        Binding("escape", "clear_filter", "Clear", show=False),
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
    ]

    def __init__(self, ctx: AppContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.hpcui_only = True
        self.state_filter = "all"
        self.text_filter = ""
        self.view = "live"
        self.queues: dict[str, list[QueueJob]] = {}
        self.errors: dict[str, str] = {}
        self.records: list[JobRecord] = []
        self.rows: dict[str, JobRow] = {}
        #: the live table's rows after the filter, arrays folded (what the keys point at)
        self.table_rows: dict[str, JobRow] = {}
        self.expanded: set[str] = set()  # arrays shown element by element (array_key)
        self._row_cache: dict[int, Any] = {}  # merge_rows' reuse between refreshes
        self._array_cache: dict[str, Any] = {}  # collapse_arrays' reuse between refreshes
        self.history_rows: dict[str, JobRow] = {}
        #: per cluster, why the hpcui filter may hide hpcui's jobs (site.unmarked_note)
        self.history_notes: dict[str, str] = {}
        self.subs: dict[str, Subscription] = {}
        self.applied = 0  # table refreshes applied (tests and benchmarks read it)
        #: tables that log in to the same account (each job shown once: same_site)
        self.same_sites = shared_sites(ctx.config.clusters)
        self._registry_timer: Timer | None = None
        self._history_timer: Timer | None = None
        self._tracked: set[str] = set()
        self._active = False
        self.gpu_pct: dict[str, str] = {}  # row key -> the GPU% cell of a running job
        self._eta_rows: set[str] = set()  # rows whose "will it finish" cell says something
        self._usage_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield app_header()
        with Horizontal(id="jobs-bar"):
            yield Input(placeholder="filter: words that must all appear", id="filter")
            yield Static("", id="jobs-info")
        with ContentSwitcher(initial="live", id="jobs-views"):
            yield JobTable(JOB_COLUMNS, JOB_PRIORITY, id="live", optional=JOB_OPTIONAL)
            yield JobTable(HISTORY_COLUMNS, HISTORY_PRIORITY, id="history")
        yield app_footer()

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        for table in self.query(JobTable):  # newest first, a stable order
            table.set_sort("id", reverse=True)
        self.watch(self.app, "conn_version", self._connections_changed, init=False)

    # -- lifecycle: refresh only while visible ------------------------------------------------

    def on_screen_resume(self) -> None:
        self._active = True
        self._subscribe_all()
        self._load_registry()
        if self.view == "history":
            self._load_history()
        self.table.focus()
        self._usage_timer = self.set_interval(USAGE_S, self._look_at_gpus)
        self.set_timer(2.0, self._look_at_gpus)  # the first look soon, not after USAGE_S

    def on_screen_suspend(self) -> None:
        self._active = False
        for sub in self.subs.values():
            sub.cancel()
        self.subs.clear()
        for timer in (self._registry_timer, self._history_timer, self._usage_timer):
            if timer is not None:
                timer.stop()

    def on_unmount(self) -> None:
        self.on_screen_suspend()

    def _connections_changed(self, _version: int) -> None:
        if self._active:
            self._subscribe_all()

    def _subscribe_all(self) -> None:
        for conn in self.ctx.hub.ready():
            if conn.has_queue and conn.name not in self.subs and conn.cluster is not None:
                watcher = conn.cluster.site.queue_watcher
                name = conn.name

                def deliver(snap: QueueSnapshot, name: str = name, watcher: Any = watcher) -> None:
                    exc = watcher.last_exception if snap.error else None
                    self.post_message(QueueUpdate(name, snap, exc))

                self.subs[name] = watcher.subscribe(deliver)

    # -- data in ---------------------------------------------------------------------------------

    def on_queue_update(self, message: QueueUpdate) -> None:
        name, snap = message.cluster, message.snap
        if snap.error is not None:
            self.errors[name] = snap.error
            self.ctx.hub.report(name, message.exc or snap.error)
        else:
            self.errors.pop(name, None)
            self.ctx.hub.report(name, None)
        self.queues[name] = list(snap.jobs)
        self._track_forgotten()
        self.refresh_table()

    @work(thread=True, exclusive=True, group="jobs-registry", exit_on_error=False)
    def _load_registry(self) -> None:
        try:
            records = self.ctx.registry.list(limit=500)
        except HpcuiError as exc:  # locked or broken: say so, try again later
            self.app.call_from_thread(self._registry_failed, str(exc))
            raise  # the app's worker handler shows it too
        self.app.call_from_thread(self._registry_loaded, records)

    def _registry_failed(self, message: str) -> None:
        self.errors["registry"] = message
        self.refresh_table()
        if self._active:
            self._registry_timer = self.set_timer(REGISTRY_S, self._load_registry)

    def _registry_loaded(self, records: list[JobRecord]) -> None:
        self.errors.pop("registry", None)
        # another config's tables share the registry's folder: not shown as if connectable
        self.records = [r for r in records if r.cluster in self.ctx.config.clusters]
        self._track_forgotten()
        self.refresh_table()
        if self._active:  # re-armed only now: a slow read never piles up
            self._registry_timer = self.set_timer(REGISTRY_S, self._load_registry)

    def _track_forgotten(self) -> None:
        """Unfinished registry jobs: the cluster's status service (one batched sacct for
        all of them) finds their end and writes it to the registry, and its end push
        (hpcui.jobs.end_push) hears of it when the result appears; an end refreshes the queue
        at once (Cluster._states_changed). Jobs the queue lists are tracked too, so their
        end shows within a second, not at the queue's next look (2 s to 60 s)."""
        todo: dict[str, list[JobRecord]] = {}
        for rec in self.records:
            key = f"{rec.cluster}:{rec.job_id}"
            if rec.job_id and not rec.state.is_final and key not in self._tracked:
                todo.setdefault(rec.cluster, []).append(rec)
        for name, recs in todo.items():
            cluster = self.ctx.hub.cluster(name)
            if cluster is None:
                continue
            for rec in recs:
                cluster.faces.track([rec.job_id or ""], rec.state)
                self._tracked.add(f"{rec.cluster}:{rec.job_id}")

    @work(thread=True, exclusive=True, group="jobs-history", exit_on_error=False)
    def _load_history(self) -> None:
        rows: dict[str, JobRow] = {}
        errors: dict[str, str] = {}
        notes: dict[str, str] = {}
        found: dict[str, list[Any]] = {}
        for conn in self.ctx.hub.ready():
            if not conn.has_history or conn.cluster is None:
                continue
            try:
                found[conn.name] = conn.cluster.site.history(timedelta(days=1))
            except HpcuiError as exc:
                errors[conn.name] = str(exc)
            else:
                said = conn.cluster.site.unmarked_note(found[conn.name])
                if said:  # why the hpcui filter may hide jobs that are hpcui's
                    notes[conn.name] = said.replace("--all lists", "a shows")
        for name, jobs in one_per_site(found, self.same_sites, self.records).items():
            for job in jobs:
                row = history_row(name, job)
                rows[row.key] = row
        self.app.call_from_thread(self._history_loaded, rows, errors, notes)

    def _history_loaded(
        self, rows: dict[str, JobRow], errors: dict[str, str], notes: dict[str, str]
    ) -> None:
        self.history_rows = rows
        self.history_notes = notes
        for name, text in errors.items():
            self.errors[name] = text
        self.refresh_table()
        if self._active and self.view == "history":
            self._history_timer = self.set_timer(HISTORY_S, self._load_history)

    # -- data out --------------------------------------------------------------------------------

    @property
    def table(self) -> JobTable:
        return self.query_one(f"#{self.view}", JobTable)

    def shows(self, row: JobRow) -> bool:
        """The row passes the filters (not DOMNode.visible, which this used to shadow)."""
        if self.hpcui_only and not row.hpcui:
            return False
        return matches(row, self.text_filter, self.state_filter)

    # -- the GPU% column: running GPU jobs on screen, looked at every USAGE_S -----------------

    def _look_at_gpus(self) -> None:
        if not self._active or self.view != "live":
            return
        table = self.table
        top = int(table.scroll_offset.y)
        on_screen = table.keys[top : top + max(table.size.height, 1)]
        wanted: dict[str, list[str]] = {}
        for key in on_screen:
            row = self.rows.get(key)
            if row is None or row.state is not JobState.RUNNING:
                continue
            if str(row.cells.get("gpus", "-")) in ("-", "0"):
                continue
            wanted.setdefault(row.cluster, []).append(row.job_id)
        picked = {c: ids[:USAGE_JOBS] for c, ids in wanted.items()}
        if picked:
            self._sample_gpus(picked)

    @work(thread=True, exclusive=True, group="jobs-usage", exit_on_error=False)
    def _sample_gpus(self, wanted: dict[str, list[str]]) -> None:
        from hpcui.tui.usage_view import (
            mean_gpu_pct,
        )

        cells: dict[str, str] = {}
        for name, ids in wanted.items():
            cluster = self.ctx.hub.cluster(name)
            if cluster is None:
                continue
            try:
                looks = cluster.usage.look(ids)
            except HpcuiError:
                continue  # the column stays as it was; the Job screen says why
            for jid, sample in looks.items():
                pct = mean_gpu_pct(sample)
                cells[row_key(name, jid)] = "?" if pct is None else f"{pct:.0f}%"
        self.app.call_from_thread(self._gpus_looked, cells)

    def _gpus_looked(self, cells: dict[str, str]) -> None:
        self.gpu_pct.update(cells)
        self.refresh_table(remerge=False)

    def refresh_table(self, *, remerge: bool = True) -> None:
        """Show the data; `remerge=False` when only the filter changed (rows are as they were)."""
        if self.view == "live":
            if remerge or not self.rows:
                queues = one_per_site(self.queues, self.same_sites, self.records)
                records = records_to_show(self.records, self.queues, self.same_sites)
                self.rows = merge_rows(
                    queues, records, hpcui_only=self.hpcui_only, reuse=self._row_cache
                )
            rows = self.rows
            for key, cell in list(self.gpu_pct.items()):
                row = rows.get(key)
                if row is not None and row.state is JobState.RUNNING:
                    row.cells["gpu_pct"] = cell
                else:  # ended (or gone): its cell goes, and so does its entry
                    del self.gpu_pct[key]
                    if row is not None:
                        row.cells["gpu_pct"] = ""
            self._put_finishes(rows)
            chained = collapse_chains(rows, segments_of(self.records))
            self.table_rows = collapse_arrays(
                {k: r for k, r in chained.items() if self.shows(r)},
                self.expanded,
                self._array_cache,
            )
            self.table.apply(self.table_rows)
        else:
            rows = self.history_rows
            self.table.apply(rows, self.shows)
        self.applied += 1
        self._info(len(rows))

    def _put_finishes(self, rows: dict[str, JobRow]) -> None:
        """The will-it-finish column from the app's last look (`ctx.finishes`): running
        rows only; the column shows only while one of them has something to say."""
        finishes = self.ctx.finishes
        if not finishes and not self._eta_rows:
            return  # nothing to say and nothing said: no pass over the rows
        said: set[str] = set()
        for row in rows.values():
            finish = finishes.get((row.cluster, row.job_id))
            cell = finish.cell() if finish is not None and row.state is JobState.RUNNING else ""
            if row.cells.get("eta", "") != cell:
                row.cells["eta"] = cell
            if cell:
                said.add(row.key)
        self._eta_rows = said

    def _info(self, total: int) -> None:
        parts = [
            "history (24 h)" if self.view == "history" else "live",
            "hpcui jobs" if self.hpcui_only else "all my jobs",
            f"state {self.state_filter}",
        ]
        if self.text_filter:
            parts.append(f"filter {self.text_filter!r}")
        table = self.table
        parts.append(f"{table.row_count}/{total} shown")
        if table.marked:
            parts.append(f"{len(table.marked)} selected")
        if table.sort_column:
            parts.append(f"sort {table.sort_column}{' ↓' if table.sort_reverse else ''}")
        for name, err in self.errors.items():
            parts.append(f"[red]{name}: {err.splitlines()[0][:80]}[/]")
        if self.view == "history" and self.hpcui_only:
            parts += [f"[yellow]{said}[/]" for said in self.history_notes.values()]
        self.query_one("#jobs-info", Static).update(" · ".join(parts))

    # -- actions ---------------------------------------------------------------------------------

    def _selected(self) -> list[JobRow]:
        table = self.table
        source = self.table_rows if self.view == "live" else self.history_rows
        keys: Iterable[str]
        if table.marked:  # in the order the table shows them
            keys = list(table.ordered_marked())
        else:
            current = table.current_key()
            keys = [current] if current else []
        picked: list[JobRow] = []
        for row in (source[k] for k in keys if k in source):
            if row.members:  # an array's row stands for its elements
                picked += [self.rows[m] for m in row.members if m in self.rows]
            else:
                picked.append(row)
        return list({r.key: r for r in picked}.values())

    def action_cursor_down(self) -> None:
        self.table.action_cursor_down()

    def action_cursor_up(self) -> None:
        self.table.action_cursor_up()

    def action_open(self) -> None:
        current = self.table.current_key()
        folded = self.table_rows.get(current or "") if self.view == "live" else None
        if folded is not None and folded.chain:  # a chain's row: its segment now
            self.post_message(OpenJob(folded.cluster, folded.job_id))
            return
        if folded is not None and folded.members:  # an array's row: fold or unfold it
            self.expanded ^= {folded.key}
            self.refresh_table(remerge=False)
            return
        rows = self._selected()
        if rows:
            self.post_message(OpenJob(rows[0].cluster, rows[0].job_id))

    def on_job_table_row_selected(self, event: JobTable.RowSelected) -> None:
        self.action_open()

    def action_mark(self) -> None:
        self.table.toggle_mark()
        self._info(len(self.rows))

    def action_compare(self) -> None:
        """One metric of the selected jobs (or the job under the cursor) on one plot."""
        rows = self._selected()
        if not rows:
            self.notify("Nothing to compare: select jobs with space.", severity="warning")
            return
        if len(rows) > MAX_COMPARED:
            self.notify(
                f"Comparing the first {MAX_COMPARED} of {len(rows)} selected jobs.",
                severity="warning",
            )
        jobs = [(r.cluster, r.job_id) for r in rows[:MAX_COMPARED]]
        self.app.push_screen(CompareMetrics(self.ctx.hub.cluster, jobs))

    def action_copy(self) -> None:
        rows = self._selected()
        if rows:
            text = " ".join(r.job_id for r in rows)
            self.app.copy_to_clipboard(text)
            self.notify(f"copied {text}")

    def action_cancel(self) -> None:
        rows = [r for r in self._selected() if not r.state.is_final]
        if not rows:
            self.notify("Nothing to cancel: select unfinished jobs.", severity="warning")
            return
        names = ", ".join(f"{r.cluster}:{r.job_id}" for r in rows[:8])
        more = f" and {len(rows) - 8} more" if len(rows) > 8 else ""

        def answered(yes: bool | None) -> None:
            if yes:
                self.table.marked.clear()
                self.post_message(CancelJobs([(r.cluster, r.job_id) for r in rows]))

        self.app.push_screen(
            ConfirmModal(
                f"Cancel {len(rows)} job{'s' if len(rows) > 1 else ''}?",
                f"{names}{more}\n\nRunning jobs are killed; their results are lost.",
                yes="Cancel jobs",
            ),
            answered,
        )

    def action_stop(self) -> None:
        rows = [r for r in self._selected() if r.hpcui and not r.state.is_final]
        if not rows:
            self.notify("Graceful stop needs an unfinished hpcui job.", severity="warning")
            return
        self.post_message(StopJobs([(r.cluster, r.job_id) for r in rows]))

    def action_control(self, verb: HoldOrRelease) -> None:
        """Hold (pending jobs) or release (held ones) the selection: any job of the user."""
        if verb == "hold":
            rows = [r for r in self._selected() if r.state is JobState.PENDING]
        else:
            rows = [r for r in self._selected() if not r.state.is_final]
        if not rows:
            want = "pending" if verb == "hold" else "unfinished"
            self.notify(f"Nothing to {verb}: select {want} jobs.", severity="warning")
            return
        self.table.marked.clear()
        self.post_message(ControlJobs(verb, [(r.cluster, r.job_id) for r in rows]))

    def action_resubmit(self) -> None:
        rows = self._selected()
        if rows:
            self.post_message(Resubmit(rows[0].cluster, rows[0].job_id))

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.text_filter = event.value
        self.refresh_table(remerge=False)

    @on(Input.Submitted, "#filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self.table.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.display = False
        self.text_filter = ""
        self.table.marked.clear()
        self.refresh_table()
        self.table.focus()

    def action_state_filter(self) -> None:
        i = STATE_FILTERS.index(self.state_filter)
        self.state_filter = STATE_FILTERS[(i + 1) % len(STATE_FILTERS)]
        self.refresh_table(remerge=False)

    def action_sort(self) -> None:
        table = self.table
        columns = [c for c in SORTABLE if c is None or c in dict(table.column_spec)]
        i = columns.index(table.sort_column) if table.sort_column in columns else 0
        table.set_sort(columns[(i + 1) % len(columns)], table.sort_reverse)
        self._info(len(self.rows))

    def action_sort_reverse(self) -> None:
        table = self.table
        table.set_sort(table.sort_column or "id", not table.sort_reverse)
        self._info(len(self.rows))

    def action_toggle_all(self) -> None:
        self.hpcui_only = not self.hpcui_only
        self.refresh_table()

    def action_history(self) -> None:
        self.show_view("live" if self.view == "history" else "history")

    def on_show_view(self, message: ShowView) -> None:
        self.show_view(message.view)

    def show_view(self, view: str) -> None:
        if view == self.view:
            return
        self.view = view
        self.query_one(ContentSwitcher).current = view
        if view == "history":
            self._load_history()
        self.refresh_table()
        self.table.focus()
