"""Job: details, the exact batch script, live logs per stream and rank, result, metric plot.

Logs come from ``Cluster.logs(follow=True)`` in a thread worker, exactly as for
``hpcui logs -f``: one stat plus a ranged read of only the new bytes per poll, backing off
while the file is quiet, and a local spool. The worker is cancelled while the screen is
hidden; coming back replays the spool from local disk and reads on from its offset.

Over 500 lines: one Textual Screen with six tabs (log, metrics, usage, details, script, result) whose workers share its state; what it shows of a job is the core's JobView, its log panel and plots are widgets of their own.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import tempfile
import time
from typing import TYPE_CHECKING, Any, cast

from rich.syntax import Syntax
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Input, Static, TabbedContent, TabPane
from textual.worker import get_current_worker

from hpcui.backends.states import JobState
from hpcui.clusters.job_view import assemble
from hpcui.errors import HpcuiError, JobError, JobFailedError, UsageError
from hpcui.logs.follow import Stream
from hpcui.metrics import MetricReader
from hpcui.tui.chrome import LEAD_BINDINGS, app_footer, app_header
from hpcui.tui.job_control import CONTROL_BINDINGS, JobControlScreen
from hpcui.tui.messages import CancelJobs, ShowJob, StopJobs
from hpcui.tui.metrics_view import MetricsPlot, summary
from hpcui.tui.modals import ConfirmModal
from hpcui.tui.rows import state_text
from hpcui.tui.widgets import LogPanel

if TYPE_CHECKING:
    from hpcui.backends.records import JobDetails
    from hpcui.clusters.cluster import Cluster
    from hpcui.jobs.handle import JobHandle
    from hpcui.jobs.job import Job
    from hpcui.sitestate import QueueJob
    from hpcui.store.registry import JobRecord
    from hpcui.tui.context import AppContext

TAIL_BYTES = 4 << 20  # open a huge log near its end
#: a pending job that is not hpcui's: nothing is read before it starts (hpcui.jobs.other)
PENDING_NOTE = "[pending: the log begins when the job starts]"
USAGE_S = 5.0  # a usage look (one command on the cluster) this often while the screen shows
SLOW_S = 2.0  # pause before following again after a failed read
DETAILS_S = 3.0  # the Details follow the queue's (shared, cached) snapshot this often
FINISH_S = 30.0  # a running job's will-it-finish is looked at this often (a log read)


def queue_entry(cluster: Cluster, job_id: str, *, max_age_s: float) -> QueueJob | None:
    """The job's row of the cluster's queue (its watcher's snapshot when recent enough)."""
    queue = cluster.site.queue(include_finished=True, max_age_s=max_age_s)
    return next((j for j in queue if j.job_id == job_id), None)


class JobScreen(JobControlScreen):
    #: what the footer leaves out first when it does not fit (80 columns): chrome.FittingFooter
    FOOTER_SPARE = ("app.jobs", "job.wrap", "job.search", "job.follow", "job.stop", "job.files")
    BINDINGS = [
        *LEAD_BINDINGS,
        Binding("o", "stream('stdout')", "stdout", id="job.stdout"),
        Binding("e", "stream('stderr')", "stderr", id="job.stderr"),
        Binding("left_square_bracket", "rank(-1)", "Rank-", show=False, id="job.rank_prev"),
        Binding("right_square_bracket", "rank(1)", "Rank+", show=False, id="job.rank_next"),
        Binding("f", "follow", "Follow", id="job.follow"),
        Binding("w", "wrap", "Wrap", id="job.wrap"),
        Binding("i", "quiet", "Runtime lines", show=False, id="job.quiet"),
        Binding("slash", "search", "Search", id="job.search"),
        Binding("n", "next_match", "Next", show=False, id="job.next"),
        Binding("end,G", "to_end", "End", show=False, id="job.end"),
        Binding("p", "pager", "Pager", show=False, id="job.pager"),
        Binding("u", "usage", "Usage", id="job.usage"),
        Binding("l", "tab('logs')", "Logs", show=False, id="job.logs"),
        Binding("d", "tab('details')", "Details", show=False, id="job.details"),
        Binding("s", "tab('script')", "Script", show=False, id="job.script"),
        Binding("r", "tab('result')", "Result", show=False, id="job.result"),
        Binding("m", "metric", "Metrics", id="job.metric"),
        Binding("A", "compare_ranks", "All ranks", show=False, id="job.ranks"),
        Binding("c", "cancel", "Cancel", id="job.cancel"),
        Binding("x", "stop", "Stop", id="job.stop"),
        Binding("escape", "back", "Back", id="job.back"),
        *CONTROL_BINDINGS,
    ]

    def __init__(self, ctx: AppContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.key: tuple[str, str] | None = None  # (cluster, job id) shown
        #: the job shown: hpcui's `Job` or any other job of the user (hpcui.jobs.handle)
        self.handle: JobHandle | None = None
        self.record: JobRecord | None = None
        self.entry: QueueJob | None = None
        self.accounting: Any = None  # sacct's row once the job has ended (exit code, ...)
        self.stream = "stdout"
        self.rank = 0
        self.num_tasks = 1
        self.finish_line = ""  # the running job's will-it-finish (hpcui.jobs.finish)
        self._finish_next = 0.0
        self.metric = ""  # the user's regex for a form the reader does not know (m, m)
        self.reader = MetricReader()
        self._metrics_dirty = False
        self._active = False
        self._first_state = True
        self._generation = 0
        self.script_text = ""

    def compose(self) -> ComposeResult:
        yield app_header()
        with Vertical(id="job-body"):
            yield Static(
                "No job open: pick one on the Jobs screen (1) and press Enter.", id="job-head"
            )
            with TabbedContent(initial="tab-logs", id="job-tabs"):
                with TabPane("Logs", id="tab-logs"):
                    with Horizontal(id="log-bar"):
                        yield Input(placeholder="search the log", id="log-search")
                    yield LogPanel(id="log")
                with TabPane("Metrics", id="tab-metrics"):
                    yield Static("", id="metrics-label")
                    yield Input(
                        placeholder="a regex for another form: its first group is the value "
                        "(a named group names it); Enter",
                        id="metric-re",
                    )
                    yield MetricsPlot(id="metrics-plot")
                with TabPane("Usage", id="tab-usage"):
                    with VerticalScroll():
                        yield Static("", id="usage")
                with TabPane("Details", id="tab-details"):
                    with VerticalScroll():
                        yield Static("", id="details")
                with TabPane("Script", id="tab-script"):
                    with VerticalScroll():
                        yield Static("", id="script")
                with TabPane("Result", id="tab-result"):
                    with VerticalScroll():
                        yield Static("", id="result")
        yield app_footer()

    def on_mount(self) -> None:
        # the log gets the rows: the search box only when asked for (/), the metrics in
        # their own tab (at 80x24 the log had 10 lines)
        self.query_one("#log-search", Input).display = False
        self.query_one("#metric-re", Input).display = False
        self.query_one("#log-bar").display = False
        self.set_interval(1.0, self._replot)  # at most once a second, only when new values

    @property
    def foreign(self) -> JobDetails | None:
        """What the scheduler says of a job hpcui did not submit (its handle's details)."""
        return self.handle.details if self.handle is not None else None

    @property
    def job(self) -> Job | None:
        """hpcui's own job (results, ranks, usage looks); None for any other job."""
        handle = self.handle
        return cast("Job", handle) if handle is not None and handle.hpcui_job else None

    @property
    def panel(self) -> LogPanel:
        return self.query_one("#log", LogPanel)

    # -- lifecycle ---------------------------------------------------------------------------

    def on_screen_resume(self) -> None:
        self._active = True
        wanted = self.ctx.current_job
        if wanted is None:
            return
        if wanted != self.key:
            self.show_job(*wanted)
        elif self.handle is not None:  # its follower was stopped
            self._follow()
        if self.key is not None and wanted == self.key:
            self._watch_usage(*self.key)
            self._watch_details(*self.key)

    def on_screen_suspend(self) -> None:
        self._active = False
        self.workers.cancel_group(self, "job-log")
        self.workers.cancel_group(self, "job-usage")
        self.workers.cancel_group(self, "job-details")

    def on_show_job(self, message: ShowJob) -> None:
        self.show_job(message.cluster, message.job_id)

    def show_job(self, cluster: str, job_id: str) -> None:
        """Switch to another job: forget the old logs, load the new one in a worker."""
        self.workers.cancel_group(self, "job-log")
        self.workers.cancel_group(self, "job-usage")
        self.workers.cancel_group(self, "job-details")
        self.key = (cluster, job_id)
        self.handle = self.record = self.entry = self.accounting = None
        self._first_state = True  # a job that has failed when opened opens on its traceback
        self.stream, self.rank, self.num_tasks = "stdout", 0, 1
        self.finish_line, self._finish_next = "", 0.0
        self.panel.reset(f"{job_id} stdout rank 0")
        self._reset_metrics()
        # a new job opens on its log, with no search or tab of the last one
        self.panel.set_search("")
        self.query_one("#log-search", Input).value = ""
        self._close_bar()
        self.query_one(TabbedContent).active = "tab-logs"
        self.query_one("#job-head", Static).update(f"{cluster}:{job_id} · loading…")
        for wid in ("details", "script", "result", "usage"):
            self.query_one(f"#{wid}", Static).update("")
        self._load(cluster, job_id)

    @work(thread=True, exclusive=True, group="job-load", exit_on_error=False)
    def _load(self, cluster_name: str, job_id: str) -> None:
        cluster = self.ctx.hub.cluster(cluster_name)
        record = self.ctx.registry.get(cluster_name, job_id)
        entry = None
        handle: JobHandle | None = None
        script = (record.meta.get("script") or "") if record else ""
        problem = ""
        if cluster is None:
            problem = f"{cluster_name} is not connected (Cluster screen: 4)."
        else:
            try:
                if record is not None or cluster.capabilities.control:
                    handle = cluster.job(job_id)  # hpcui's, or the scheduler's word (once)
                    if not script:
                        with contextlib.suppress(HpcuiError):
                            script = handle.batch_script()
                if self.ctx.hub.conns[cluster_name].has_queue:
                    entry = queue_entry(cluster, job_id, max_age_s=30)
            except HpcuiError as exc:
                problem = str(exc)
        self.app.call_from_thread(
            self._loaded,
            (cluster_name, job_id),
            handle,
            record,
            entry,
            problem,
            script,
        )

    def _loaded(
        self,
        key: tuple[str, str],
        handle: JobHandle | None,
        record: JobRecord | None,
        entry: QueueJob | None,
        problem: str,
        script: str = "",
    ) -> None:
        if key != self.key:
            return  # the user opened another job meanwhile
        self.handle, self.record, self.entry = handle, record, entry
        self.num_tasks = record.num_tasks if record else 1
        self._details(problem)
        self.script_text = script
        self.query_one("#script", Static).update(
            Syntax(script, "bash", line_numbers=True, word_wrap=False)
            if script
            else "No script recorded: only jobs submitted by hpcui keep their batch script."
        )
        self._watch_usage(*key)
        self._watch_details(*key)
        if handle is None:
            self.panel.reset("no logs")
            self.panel.add_lines(
                [problem or "Not an hpcui job: hpcui knows its state but not where its logs are."]
            )
            return
        self._follow()

    def _details(self, problem: str = "") -> None:
        cluster, job_id = self.key or ("?", "?")
        rec = self.record
        view = assemble(
            cluster, job_id, record=rec, queue=self.entry, accounting=self.accounting,
            details=self.foreign,
        )  # fmt: skip
        if self.finish_line and view.state is JobState.RUNNING:
            view = view.model_copy(update={"finish": self.finish_line})
        head = f"[b]{cluster}:{job_id}[/b]"
        if view.name:
            head += f" {_escape(view.name)}"
        if view.state is not JobState.UNKNOWN:
            head += f" · {state_text(view.state).markup}"
        head += f" · {self.stream}"
        if self.num_tasks > 1:  # "rank 0/0" for a one-task job says nothing
            head += f" rank {self.rank} of 0-{self.num_tasks - 1}"
        if problem:
            head += f" · [red]{_escape(problem)}[/]"
        self.query_one("#job-head", Static).update(head)
        # the same fields as `hpcui show` (hpcui.clusters.job_view); the job line is the head
        lines = [f"{label:<11} {_escape(text)}" for label, text in view.fields() if label != "job"]
        if not view.hpcui_job and view.details is not None:
            lines.insert(0, "not submitted by hpcui: logs from the paths its script names")
        lines += self._service_lines(cluster, job_id, rec.name if rec is not None else "")
        self.query_one("#details", Static).update("\n".join(lines) or _escape(problem) or "-")

    def _forwarded(self) -> None:
        self._details()  # the new forward is listed

    @staticmethod
    def _service_lines(cluster: str, job_id: str, name: str) -> list[str]:
        """The job's services: the one hpcui started (B opens it) and the ports forwarded
        from this app (P forwards another)."""
        from hpcui.jobs import forwarding
        from hpcui.services import web as services

        lines = []
        kind = services.KINDS.get(name)
        if kind is not None:
            lines.append(f"service     {kind.title}: B opens it in the browser (URL copied)")
        for f in forwarding.active():
            if (f.cluster, f.job_id) == (cluster, job_id):
                lines.append(f"forwarded   {f.address} -> {f.node}:{f.remote_port}")
        if lines:
            lines.insert(0, "")
        return lines

    # -- details: follow the job until it ends, then its accounting -----------------------------

    @work(thread=True, exclusive=True, group="job-details", exit_on_error=False)
    def _watch_details(self, cluster_name: str, job_id: str) -> None:
        """The queue row and the registry record while the job lives (the watcher's cached
        snapshot: no extra call most of the time), sacct's row once it has ended."""
        worker = get_current_worker()
        key = (cluster_name, job_id)
        while not worker.is_cancelled and self._active and self.key == key:
            cluster = self.ctx.hub.cluster(cluster_name)
            if cluster is None:
                return
            try:
                entry = self.entry
                if self.ctx.hub.conns[cluster_name].has_queue:
                    entry = queue_entry(cluster, job_id, max_age_s=DETAILS_S) or entry
                record = self.ctx.registry.get(cluster_name, job_id)
                state = entry.state if entry else record.state if record else None
                acct = None
                if state is not None and state.is_final and cluster.capabilities.history:
                    acct = next(iter(cluster.site.history(None, job_ids=[job_id])), None)
                finish = None
                if state is JobState.RUNNING and time.monotonic() >= self._finish_next:
                    self._finish_next = time.monotonic() + FINISH_S
                    finish = cluster.will_finish(job_id)  # its log's progress vs its limit
            except HpcuiError:
                time.sleep(DETAILS_S)
                continue
            if finish is not None:
                self.app.call_from_thread(self._finish_now, key, finish)
            self.app.call_from_thread(self._details_now, key, entry, record, acct)
            if acct is not None and acct.state.is_final:
                return  # what sacct says of an ended job does not change
            time.sleep(DETAILS_S)

    def _finish_now(self, key: tuple[str, str], finish: Any) -> None:
        """The will-it-finish line for the details; told once per job when it will not."""
        if key != self.key:
            return
        self.finish_line = finish.line(key[1])
        told = self.ctx.finish_told
        if finish.will_finish is False and key not in told:
            told.add(key)
            self.notify(
                f"{key[0]}:{key[1]} will not finish before its limit: {self.finish_line}",
                severity="warning",
                timeout=30,
            )

    def _details_now(self, key: tuple[str, str], entry: Any, record: Any, acct: Any) -> None:
        if key != self.key:
            return
        self.entry, self.record = entry or self.entry, record or self.record
        self.accounting = acct
        self._details()

    # -- usage: looks only while this screen shows the job ------------------------------------

    @work(thread=True, exclusive=True, group="job-usage", exit_on_error=False)
    def _watch_usage(self, cluster_name: str, job_id: str) -> None:
        from hpcui.tui.usage_view import (
            usage_text,
        )

        worker = get_current_worker()
        while not worker.is_cancelled and self._active:
            cluster = self.ctx.hub.cluster(cluster_name)
            if cluster is None:
                return
            job, entry = self.job, self.entry
            state = job.state if job is not None else entry.state if entry else None
            running = state is JobState.RUNNING
            try:
                if running:
                    cluster.usage.look([job_id])
                samples = cluster.usage.store(job_id).load()
            except HpcuiError as exc:
                text = f"[yellow]usage: {_escape(str(exc))}[/]"
            else:
                text = usage_text(samples, running)
            self.app.call_from_thread(self._got_usage, (cluster_name, job_id), text)
            if state is not None and state.is_final:
                return
            for _ in range(int(USAGE_S * 10)):
                if worker.is_cancelled:
                    return
                time.sleep(0.1)

    def _got_usage(self, key: tuple[str, str], text: str) -> None:
        if key == self.key:
            self.query_one("#usage", Static).update(text)

    def action_usage(self) -> None:
        self.query_one(TabbedContent).active = "tab-usage"

    # -- logs ----------------------------------------------------------------------------------

    def _follow(self) -> None:
        handle, job = self.handle, self.job
        if not self._active or self.key is None or handle is None:
            return
        cluster = self.ctx.hub.cluster(self.key[0])
        if cluster is None:
            return
        self._reset_panel()
        self._generation += 1  # text a cancelled follower still sends is dropped
        if job is None:  # any other job: the files its script names (hpcui.jobs.other)
            if handle.state is JobState.PENDING:
                self.panel.add_lines([PENDING_NOTE])  # its file may hold an older job's log
            self._read_log(cluster, handle, (self.stream, 0, self._generation), None)
            return
        self._read_log(cluster, handle, (self.stream, self.rank, self._generation), job)

    def _reset_panel(self) -> None:
        job_id = self.key[1] if self.key else ""
        self.panel.reset(f"{job_id} {self.stream} rank {self.rank}".lstrip())
        self._reset_metrics()

    def _reset_metrics(self) -> None:
        self.reader = MetricReader(self.metric)
        self._metrics_dirty = True

    def _replot(self) -> None:
        """Draw the metrics read so far when there are new ones (the interval's tick)."""
        if not self._metrics_dirty or not self._active:
            return
        self._metrics_dirty = False
        metrics = self.reader.metrics()
        plot = self.query_one("#metrics-plot", MetricsPlot)
        plot.show_job(metrics)
        ranks = f" · A: all {self.num_tasks} ranks on one plot" if self.num_tasks > 1 else ""
        self.query_one("#metrics-label", Static).update(
            _escape(summary(metrics, plot.drawn) + ranks)
        )

    @work(thread=True, exclusive=True, group="job-log", exit_on_error=False)
    def _read_log(
        self,
        cluster: Cluster,
        handle: JobHandle,
        key: tuple[Stream, int, int],
        watched: Job | None,
    ) -> None:
        """Follow a job's log into the panel until it ends or the screen is left. A dropped
        link is said and followed again from the spool; an id the scheduler forgot, or a
        file it names that is gone, is said and ends it; a defect is said in the panel, not
        lost in the worker. `watched`: hpcui's job, whose state changes the screen shows on
        the way (for any other job, the scheduler's word ends following: OtherJob)."""
        worker = get_current_worker()
        last_state: list[Any] = [None]

        def until() -> bool:  # follow_many asks it before its last reads: nothing is lost
            if worker.is_cancelled or watched is None:
                return worker.is_cancelled  # left the screen: stop polling at once
            state = watched.state
            if state != last_state[0]:
                last_state[0] = state
                self.app.call_from_thread(self._state_changed, watched, state)
            return state.is_final

        stream, rank, _generation = key
        while not worker.is_cancelled:
            try:
                for chunk in cluster.logs(  # the face asks its Cluster, which asks the handle
                    handle, stream, rank, follow=True, tail_bytes=TAIL_BYTES, until=until
                ):
                    self.app.call_from_thread(self._got_text, key, chunk.text)
                    if worker.is_cancelled:
                        return
                return
            except UsageError as exc:
                self.app.call_from_thread(self.panel.add_lines, [f"[{exc}]"])
                return
            except HpcuiError as exc:
                self.app.call_from_thread(self.ctx.hub.report, cluster.name, exc)
                time.sleep(SLOW_S)
                # the next round replays the spool from local disk: start the panel over
                self.app.call_from_thread(self._reset_panel)
            except Exception as exc:
                self.app.call_from_thread(
                    self.panel.add_lines, [f"[following the log failed: {exc!r}]"]
                )
                raise

    def _got_text(self, key: tuple[Stream, int, int], text: str) -> None:
        if key != (self.stream, self.rank, self._generation):
            return
        lines = self.panel.feed(text)
        if self.reader.feed(lines):
            self._metrics_dirty = True

    def _state_changed(self, job: Job, state: Any) -> None:
        if self.job is not job:
            return
        if self.record is not None:  # the status service's word is newer than the record's
            self.record = self.record.model_copy(update={"state": state})
        self._details()
        first, self._first_state = self._first_state, False
        if state.is_final:
            self._load_result(job)
            if first and state is not JobState.COMPLETED:
                self.query_one(TabbedContent).active = "tab-result"

    @work(thread=True, exclusive=True, group="job-result", exit_on_error=False)
    def _load_result(self, job: Job) -> None:
        try:
            values = job.results(timeout=30) if job.num_tasks > 1 else [job.result(timeout=30)]
            text = "\n".join(f"rank {i}: {v!r}" for i, v in enumerate(values))
            text = f"[green]returned[/]\n{_escape(text)}"
        except JobFailedError as exc:
            text = f"[red]raised on the cluster[/]\n{_escape(exc.remote_traceback or str(exc))}"
        except JobError as exc:
            text = f"[red]{_escape(str(exc))}[/]"
        except HpcuiError as exc:
            text = f"[yellow]could not fetch the result: {_escape(str(exc))}[/]"
        self.app.call_from_thread(self.query_one("#result", Static).update, text)

    # -- actions --------------------------------------------------------------------------------

    def _switch(self, stream: str, rank: int) -> None:
        self.workers.cancel_group(self, "job-log")
        self.stream, self.rank = stream, rank
        self._details()
        self._follow()

    def action_stream(self, stream: str) -> None:
        self.query_one(TabbedContent).active = "tab-logs"
        if stream != self.stream:
            self._switch(stream, self.rank)

    def action_rank(self, step: int) -> None:
        rank = (self.rank + step) % max(self.num_tasks, 1)
        if rank != self.rank:
            self._switch(self.stream, rank)

    def action_follow(self) -> None:
        self.panel.set_follow(not self.panel.follow)

    def action_wrap(self) -> None:
        self.panel.set_wrap(not self.panel.wrap)

    def action_quiet(self) -> None:
        """Hide the runtime's own INFO lines (submitit's), or show them again."""
        self.panel.set_quiet(not self.panel.quiet)

    def action_to_end(self) -> None:
        self.panel.to_end()

    def action_tab(self, which: str) -> None:
        self.query_one(TabbedContent).active = f"tab-{which}"

    def action_search(self) -> None:
        self._open_bar("#log-search")

    def action_metric(self) -> None:
        """The Metrics tab; on it, the box for a regex (a form the reader does not know)."""
        tabs = self.query_one(TabbedContent)
        if tabs.active != "tab-metrics":
            tabs.active = "tab-metrics"
            self._metrics_dirty = True
            self._replot()
            return
        box = self.query_one("#metric-re", Input)
        box.value = self.metric
        box.display = True
        box.focus()

    def action_compare_ranks(self) -> None:
        """Every rank's metric on one plot: rank 0 beside the others (a straggler, a
        rank that diverged)."""
        from hpcui.tui.metrics_view import CompareMetrics

        if self.key is None:
            return
        if self.num_tasks < 2:
            self.notify("This job has one task: no other rank to compare.", severity="warning")
            return
        self.app.push_screen(CompareMetrics(self.ctx.hub.cluster, [self.key], ranks=True))

    def _open_bar(self, which: str) -> None:
        self.query_one(TabbedContent).active = "tab-logs"
        self.query_one("#log-bar").display = True
        box = self.query_one(which, Input)
        box.display = True
        box.focus()

    def _close_bar(self) -> bool:
        """Hide the search/metric boxes; True when one was open."""
        bar = self.query_one("#log-bar")
        was = bool(bar.display)
        bar.display = False
        metric_box = self.query_one("#metric-re", Input)
        was = was or bool(metric_box.display)
        for wid in ("#log-search", "#metric-re"):
            self.query_one(wid, Input).display = False
        return was

    @on(Input.Submitted, "#log-search")
    def _searched(self, event: Input.Submitted) -> None:
        self.panel.set_follow(False)
        self.panel.set_search(event.value)
        self._close_bar()  # n finds the next match; / asks again
        self.panel.log_widget.focus()

    def action_next_match(self) -> None:
        self.panel.next_match()

    @on(Input.Submitted, "#metric-re")
    def _metric_changed(self, event: Input.Submitted) -> None:

        try:
            reader = MetricReader(event.value)
        except re.error as exc:
            self.notify(f"bad regex: {exc}", severity="error")
            return
        self.metric = event.value
        reader.feed(self.panel.lines)
        self.reader = reader
        self._metrics_dirty = True
        self._replot()
        self._close_bar()
        self.query_one("#metrics-plot", MetricsPlot).focus()

    def action_pager(self) -> None:
        """The whole log so far in $PAGER: the app gives the terminal away meanwhile."""
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as fh:
            fh.write("\n".join(self.panel.lines) + "\n")
        pager = shlex.split(os.environ.get("PAGER") or "less -R")
        try:
            with self.app.suspend():
                subprocess.call([*pager, fh.name])
        except Exception as exc:  # no terminal to give away (web, tests)
            self.notify(f"cannot open a pager here: {exc}", severity="warning")
        finally:
            os.unlink(fh.name)

    def action_cancel(self) -> None:
        if self.key is None:
            return
        cluster, job_id = self.key

        def answered(yes: bool | None) -> None:
            if yes:
                self.post_message(CancelJobs([(cluster, job_id)]))

        self.app.push_screen(
            ConfirmModal(f"Cancel {cluster}:{job_id}?", "The job is killed.", yes="Cancel job"),
            answered,
        )

    def action_stop(self) -> None:
        if self.key is not None:
            self.post_message(StopJobs([self.key]))

    def action_back(self) -> None:
        """Esc leaves an open search or metric box first, then the screen."""
        if self._close_bar():
            self.panel.log_widget.focus()
            return
        self.app.switch_mode("jobs")


def _escape(text: str) -> str:
    from hpcui.tui.markup import escape  # not rich's: see that module

    return escape(text)
