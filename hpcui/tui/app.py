"""hpcui's terminal app: every job on every connected cluster, live, never blocking the UI.

Screens are Textual modes (jobs, job, submit, cluster); every SSH or scheduler call runs
in a thread worker; refreshes come from the clusters' shared queue watchers and re-arm
only after they finish. What the screens share (connections, registry, the open job)
is an ``AppContext`` handed to each screen; what they ask of the app arrives as messages
(``hpcui.tui.messages``). Imports go one way: app -> screens -> context/messages.
No worker takes the app down: each runs with ``exit_on_error=False`` and a failed one is
shown by ``on_worker_state_changed``.

Over 500 lines: Textual's App is one class (bindings, screens, the hub's wiring, the global actions); the screens, widgets and workers live in their own modules.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from hpcui.config import Config, config_path, load_config
from hpcui.errors import ConfigError, HpcuiError
from hpcui.jobs.control import DONE, JobControl, Verb, fan_out
from hpcui.services.browser import has_secret, redirect_page
from hpcui.store.registry import JobRecords
from hpcui.tui.chrome import LEAD_BINDINGS
from hpcui.tui.context import AppContext
from hpcui.tui.end_notice import (
    FINISH_JOBS,
    FINISH_LOOK_S,
    FIRST_FINISH_LOOK_S,
    LOOK_S,
    EndWatch,
    finish_warning,
)
from hpcui.tui.end_notice import message as end_message
from hpcui.tui.hub import Hub
from hpcui.tui.messages import (
    CancelJobs,
    ControlJobs,
    OpenJob,
    Prefill,
    Resubmit,
    ShowJob,
    ShowView,
    StopJobs,
    Submitted,
)
from hpcui.tui.screens.cluster import ClusterScreen
from hpcui.tui.screens.job import JobScreen
from hpcui.tui.screens.jobs import JobsScreen
from hpcui.tui.screens.submit import SUBMIT_FORM, SubmitScreen
from hpcui.tui.screens.sweep import SweepScreen

log = logging.getLogger(__name__)


#: the Job screen's control keys in the palette: (title, help, the screen's action)
JOB_SCREEN_COMMANDS = (
    ("Hold job", "Keep it from starting (H)", "control('hold')"),
    ("Release job", "Let a held job start (L)", "control('release')"),
    ("Requeue job", "Back to pending; a running job restarts (Q)", "control('requeue')"),
    ("Time limit of job", "A new time limit (T)", "time_limit"),
    ("Shell in job", "A shell inside the running job (!)", "shell"),
    ("Files of job", "Its folder: browse, view, download (F)", "files"),
    ("Edit and resubmit job", "Its batch script in $EDITOR, then submit (E)", "edit_resubmit"),
    (
        "Forward a port of job",
        "A port of its node on 127.0.0.1 here, URL copied (P)",
        "forward_port",
    ),
    ("Open the service of job", "Its JupyterLab or TensorBoard in the browser (B)", "open_service"),
    ("Open job in VS Code", "VS Code on its node, in its folder (V)", "vscode"),
)

#: mode -> its screen (built with the app's AppContext)
SCREENS_BY_MODE: dict[str, Callable[[AppContext], Screen[Any]]] = {
    "jobs": JobsScreen,
    "job": JobScreen,
    "submit": SubmitScreen,
    "cluster": ClusterScreen,
    "sweep": SweepScreen,
}


class HpcuiApp(App[None]):
    TITLE = "hpcui"
    CSS_PATH = "app.tcss"
    BINDINGS = [
        # the footer shows the six views as one key, "1-6 Views" (the help lists each):
        # six keys took 48 columns, and "3 Submit" beside the Submit screen's own
        Binding("1", "mode('jobs')", "Views", key_display="1-6", id="app.jobs"),
        Binding("2", "mode('job')", "Job", show=False, id="app.job"),
        Binding("3", "mode('submit')", "Submit", show=False, id="app.submit"),
        Binding("4", "mode('cluster')", "Cluster", show=False, id="app.cluster"),
        Binding("5", "history", "History", show=False, id="app.history"),
        Binding("6", "mode('sweep')", "Sweeps", show=False, id="app.sweep"),
        Binding("question_mark", "help", "Help", show=False, id="app.help"),
        Binding("q", "quit", "Quit", show=False, id="app.quit"),
    ]

    #: bumped on every connection change; screens watch it
    conn_version: reactive[int] = reactive(0)

    def __init__(self, cluster: str | None = None, *, connect: Iterable[str] | None = None) -> None:
        super().__init__()
        self.cfg = load_config()
        start = self.cfg.cluster(cluster).name or cluster or "local"
        self.ctx = AppContext(self.cfg, Hub(self, self.cfg, self.connections_changed), start)
        #: each mode's screen once Textual made it (messages go to made screens only)
        self.mode_screens: dict[str, Screen[Any]] = {}
        for mode, screen in SCREENS_BY_MODE.items():
            self.add_mode(mode, partial(self._make_mode_screen, mode, screen))
        self._connect_first = list(connect) if connect is not None else None
        #: the user's key overrides ([keys] in the config), as the help shows them
        self.keymap_overrides = user_keymap(self.cfg)
        self.set_keymap(self.keymap_overrides)

    @property
    def hub(self) -> Hub:
        return self.ctx.hub

    @property
    def registry(self) -> JobRecords:
        return self.ctx.registry

    @property
    def start_cluster(self) -> str:
        return self.ctx.start_cluster

    @property
    def current_job(self) -> tuple[str, str] | None:
        return self.ctx.current_job

    # -- startup -----------------------------------------------------------------------------

    def open_url(self, url: str, *, new_tab: bool = True) -> None:
        """A URL with a token reaches a local browser through a private redirect page, never
        its argv (`ps` shows that to every user here); a web-served app hands it over."""
        if has_secret(url) and not self.is_web:
            url = redirect_page(url).as_uri()
        super().open_url(url, new_tab=new_tab)

    def on_mount(self) -> None:
        self.connections_changed()
        self.switch_mode("jobs")
        self._end_watch = EndWatch()
        self.set_interval(LOOK_S, self._look_for_ends)
        self.set_interval(FINISH_LOOK_S, self._look_at_finishes)
        self.set_timer(FIRST_FINISH_LOOK_S, self._look_at_finishes)
        if not config_path().exists():  # the first run: no config file yet
            self.action_add_cluster(first_run=True)
        first = self._connect_first
        for name in dict.fromkeys([self.start_cluster] if first is None else first):
            if name in self.hub.conns:
                self.hub.connect(name)
        if first is None:  # the registry may be slow or locked: read it off the UI thread
            self.run_worker(
                self._connect_live_clusters, thread=True, group="startup", exit_on_error=False
            )

    def _look_for_ends(self) -> None:
        self.run_worker(
            self._read_ends, thread=True, exclusive=True, group="ends", exit_on_error=False
        )

    def _read_ends(self) -> None:
        try:
            records = self.registry.list(limit=500)
        except HpcuiError:  # locked or broken: the Jobs screen says so; look again later
            return
        ended = self._end_watch.look(records)
        if ended:
            self.call_from_thread(self._say_ends, ended)

    def _say_ends(self, ended: list[Any]) -> None:
        """A notification and the bell for each job that ended, but the one on screen."""
        shown = self.ctx.current_job if self.current_mode == "job" else None
        told = False
        for record in ended:
            if (record.cluster, record.job_id) == shown:
                continue
            text, severity = end_message(record)
            self.notify(text, title="job ended", severity=severity, timeout=10)
            told = True
        if told:
            self.bell()

    def _look_at_finishes(self) -> None:
        self.run_worker(
            self._read_finishes, thread=True, exclusive=True, group="finish", exit_on_error=False
        )

    def _read_finishes(self) -> None:
        """Will each running hpcui job finish (hpcui.jobs.finish), on every connected
        cluster with a queue: the Jobs table's column and the notice, whatever screen."""
        found: dict[tuple[str, str], Any] = {}
        for conn in self.hub.ready():
            if not conn.has_queue or conn.cluster is None:
                continue
            try:
                looks = conn.cluster.running_finishes(FINISH_JOBS)
            except HpcuiError:
                continue  # the queue's own error shows on the Jobs screen
            found.update({(conn.name, job_id): f for job_id, f in looks.items()})
        names: dict[tuple[str, str], str] = {}
        if any(f.will_finish is False for f in found.values()):
            with contextlib.suppress(HpcuiError):
                names = {(r.cluster, r.job_id or ""): r.name for r in self.registry.list(limit=500)}
        self.call_from_thread(self._finishes_now, found, names)

    def _finishes_now(
        self, found: dict[tuple[str, str], Any], names: dict[tuple[str, str], str]
    ) -> None:
        self.ctx.finishes = found
        for key, finish in found.items():
            if finish.will_finish is not False or key in self.ctx.finish_told:
                continue
            self.ctx.finish_told.add(key)
            text = finish_warning(key[0], key[1], names.get(key, ""), finish)
            self.notify(text, title="will not finish", severity="warning", timeout=30)

    def _connect_live_clusters(self) -> None:
        """Configured clusters where hpcui has unfinished jobs: their table rows stay live."""
        records = self.registry.list(limit=500)
        live = {r.cluster for r in records if not r.state.is_final} & set(self.hub.conns)
        for name in sorted(live):
            self.call_from_thread(self.hub.connect, name)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place a failed worker ends up: shown, logged, and the app goes on."""
        if event.state is not WorkerState.ERROR:
            return
        exc = event.worker.error
        if isinstance(exc, HpcuiError):
            message = str(exc)
        else:
            log.error("worker %s failed", event.worker.name, exc_info=exc)
            message = f"{type(exc).__name__}: {exc} (a bug in hpcui: please report it)"
        self.notify(message, severity="error", title="something failed", timeout=15)

    def connections_changed(self) -> None:
        self.sub_title = self.hub.header_text()
        self.conn_version += 1

    # -- navigation --------------------------------------------------------------------------

    def action_mode(self, mode: str) -> None:
        if mode == "job" and self.current_job is None:
            self.notify("No job open yet: pick one on the Jobs screen and press Enter.")
            return
        self.switch_mode(mode)
        jobs = self.mode_screens.get("jobs")
        if mode == "jobs" and isinstance(jobs, JobsScreen) and jobs.view == "history":
            self._tell("jobs", ShowView("live"))  # 1 is the live table, also after 5

    def action_history(self) -> None:
        self.switch_mode("jobs")
        self._tell("jobs", ShowView("history"))

    def _tell(self, mode: str, message: Any) -> None:
        """Post `message` to the screen of `mode` once it exists and is composed."""

        def post() -> None:
            screen = self.get_screen_for_mode(mode)
            if screen is not None:
                screen.post_message(message)

        self.call_after_refresh(post)

    def _make_mode_screen(
        self, mode: str, screen: Callable[[AppContext], Screen[Any]]
    ) -> Screen[Any]:
        made = self.mode_screens[mode] = screen(self.ctx)
        return made

    def get_screen_for_mode(self, mode: str) -> Screen[Any] | None:
        return self.mode_screens.get(mode)

    async def action_quit(self) -> None:
        """Quit; with input typed into the Submit form and not submitted, ask first (a
        stray `q` must not lose a form)."""
        from hpcui.tui.modals import ConfirmModal
        from hpcui.tui.screens.submit import SubmitScreen  # the form asked, not made

        form = self.mode_screens.get("submit")
        if not (isinstance(form, SubmitScreen) and form.has_input()):
            self.exit()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.exit()

        self.push_screen(
            ConfirmModal(
                "Quit hpcui?", "The Submit form has input that was not submitted: it is lost.",
                yes="Quit",
            ),
            answered,
        )  # fmt: skip

    def action_add_cluster(self, first_run: bool = False) -> None:
        from hpcui.tui.add_cluster import (
            AddClusterModal,
        )

        self.push_screen(AddClusterModal(first_run=first_run), callback=self._cluster_added)

    def _cluster_added(self, name: str | None) -> None:
        if not name:
            return
        self.cfg = self.ctx.config = load_config()
        self.hub.add(self.cfg, name)
        self.hub.connect(name)
        self.notify(f"{name} added to {config_path()}; connecting.", title="cluster added")

    def action_help(self) -> None:
        from hpcui.tui.job_table import JobTable
        from hpcui.tui.modals import (
            ConfirmModal,
            HelpModal,
        )

        palette = Binding(self.COMMAND_PALETTE_BINDING, "command_palette", "command palette")
        groups = [
            ("Everywhere", [*self.BINDINGS, palette]),
            ("Jobs (1)", [*JobsScreen.BINDINGS, *JobTable.BINDINGS]),
            ("Job (2)", list(JobScreen.BINDINGS)),
            ("Submit (3)", list(SubmitScreen.BINDINGS)),
            ("Cluster (4)", list(ClusterScreen.BINDINGS)),
            ("Sweeps (6)", list(SweepScreen.BINDINGS)),
            ("Questions", list(ConfirmModal.BINDINGS)),
        ]
        lead = {b.id for b in LEAD_BINDINGS}  # listed once, under "Everywhere"
        self.push_screen(
            HelpModal(
                [
                    (
                        t,
                        [
                            b
                            for b in bs
                            if isinstance(b, Binding) and (t == "Everywhere" or b.id not in lead)
                        ],
                    )
                    for t, bs in groups
                ]
            )
        )

    def open_job(self, cluster: str, job_id: str) -> None:
        self.ctx.current_job = (cluster, job_id)
        if self.current_mode == "job":
            self._tell("job", ShowJob(cluster, job_id))
        else:
            self.switch_mode("job")  # the Job screen shows ctx.current_job when it resumes

    def on_open_job(self, message: OpenJob) -> None:
        self.open_job(message.cluster, message.job_id)

    def on_submitted(self, message: Submitted) -> None:
        self.open_job(message.cluster, message.job_id)

    def on_cancel_jobs(self, message: CancelJobs) -> None:
        self.cancel_jobs(message.jobs)

    def on_stop_jobs(self, message: StopJobs) -> None:
        self.stop_jobs(message.jobs)

    def on_control_jobs(self, message: ControlJobs) -> None:
        self.run_worker(
            partial(self._control, message.verb, message.jobs),
            thread=True,
            group="control",
            exit_on_error=False,
        )

    def _control(self, verb: Verb, jobs: list[tuple[str, str]]) -> None:
        self._fan_out(verb, jobs)

    def on_resubmit(self, message: Resubmit) -> None:
        self.run_worker(
            partial(self._resubmit, message.cluster, message.job_id),
            thread=True,
            group="resubmit",
            exit_on_error=False,
        )

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Jobs", "All jobs, live (1)", lambda: self.switch_mode("jobs"))
        yield SystemCommand("History", "Finished jobs with exit codes (5)", self.action_history)
        yield SystemCommand(
            "Add a cluster", "Connect, detect, test and add a cluster", self.action_add_cluster
        )
        yield SystemCommand(
            "Submit", "Submit a function or script (3)", lambda: self.switch_mode("submit")
        )
        yield SystemCommand(
            "Cluster", "Quota, modules, partitions (4)", lambda: self.switch_mode("cluster")
        )
        yield SystemCommand("Help", "Every key of every screen (?)", self.action_help)
        yield from self._job_commands()
        for name, conn in self.hub.conns.items():
            if conn.status in ("idle", "error"):
                yield SystemCommand(
                    f"Connect {name}", f"Connect to {conn.host}", lambda n=name: self.hub.connect(n)
                )

    def _job_commands(self) -> Iterable[SystemCommand]:
        """The open job's actions in the palette (the keys of the Job screen, by name)."""
        if self.current_job is None:
            return
        cluster, job_id = key = self.current_job
        ref = f"{cluster}:{job_id}"

        def cancel() -> None:
            from hpcui.tui.modals import (
                ConfirmModal,
            )

            def answered(yes: bool | None) -> None:
                if yes:
                    self.cancel_jobs([key])

            self.push_screen(
                ConfirmModal(f"Cancel {ref}?", "The job is killed.", yes="Cancel job"), answered
            )

        yield SystemCommand(
            f"Open job {ref}", "Its log, details and result (2)", lambda: self.switch_mode("job")
        )
        yield SystemCommand(f"Cancel job {ref}", "scancel/qdel, asks first (c)", cancel)
        yield SystemCommand(
            f"Stop job {ref}", "Graceful stop: the stop file (x)", lambda: self.stop_jobs([key])
        )
        yield SystemCommand(
            f"Resubmit job {ref}",
            "The form, refilled (R)",
            lambda: self.post_message(Resubmit(cluster, job_id)),
        )
        for title, help_, action in JOB_SCREEN_COMMANDS:
            yield SystemCommand(f"{title} {ref}", help_, lambda a=action: self._on_job_screen(a))

    def _on_job_screen(self, action: str) -> None:
        """A Job screen key from the palette: that screen, then its action."""
        self.switch_mode("job")
        self.call_after_refresh(
            lambda: self.run_worker(self.screen.run_action(action), exit_on_error=False)
        )

    # -- job actions shared by screens ---------------------------------------------------------

    def cancel_jobs(self, jobs: list[tuple[str, str]]) -> None:
        self.run_worker(
            lambda: self._cancel(jobs), thread=True, group="cancel", exit_on_error=False
        )

    def _cancel(self, jobs: list[tuple[str, str]]) -> None:
        self._fan_out("cancel", jobs)

    def _fan_out(self, verb: Verb, jobs: list[tuple[str, str]]) -> None:
        """One scheduler call per cluster (hpcui.jobs.control.fan_out, as the CLI), each
        cluster's outcome a notification (worker thread)."""
        for outcome in fan_out(verb, jobs, self._control_of):
            if outcome.error is not None:
                self.call_from_thread(
                    self.notify, str(outcome.error), severity="error", title=f"{verb} failed"
                )
            else:
                ids = " ".join(outcome.job_ids)
                self.call_from_thread(self.notify, f"{DONE[verb]} {outcome.cluster}: {ids}")

    def _control_of(self, name: str | None) -> JobControl:
        cluster = self.hub.cluster(name or "")
        if cluster is None:
            raise HpcuiError(f"{name} is not connected")
        return cluster.control

    def stop_jobs(self, jobs: list[tuple[str, str]]) -> None:
        self.run_worker(lambda: self._stop(jobs), thread=True, group="stop", exit_on_error=False)

    def _stop(self, jobs: list[tuple[str, str]]) -> None:
        for name, job_id in jobs:
            cluster = self.hub.cluster(name)
            try:
                if cluster is None:
                    raise HpcuiError(f"{name} is not connected")
                cluster.get_job(job_id).stop()
            except HpcuiError as exc:
                self.call_from_thread(self.notify, str(exc), severity="error", title="stop failed")
                continue
            self.call_from_thread(
                self.notify, f"asked {name}:{job_id} to stop (its code must poll stop_requested())"
            )

    # -- resubmit: the registry record keeps the form the Submit screen sent -------------------

    def _resubmit(self, cluster: str, job_id: str) -> None:
        """Open the Submit form filled as it was for this job (jobs submitted from the app)."""
        record = self.registry.get(cluster, job_id)
        form = record.meta.get(SUBMIT_FORM) if record is not None else None
        if form is None:
            self.call_from_thread(
                self.notify,
                f"{cluster}:{job_id} was not submitted from this app, so its call is unknown "
                "here; resubmit it from Python (hpcui.get_job) or the Submit screen.",
                severity="warning",
            )
            return
        self.call_from_thread(self._refill, form)

    def _refill(self, form: dict[str, Any]) -> None:
        self.switch_mode("submit")
        self._tell("submit", Prefill(form))
        self.notify("Check the form and press ctrl+s to submit again.")


def binding_ids() -> dict[str, str]:
    """Every remappable binding of the app: id -> default key (the app's and its screens')."""
    ids: dict[str, str] = {}
    owners: list[type[App[Any] | Screen[Any]]] = [HpcuiApp, JobsScreen, JobScreen]
    owners += [SubmitScreen, ClusterScreen, SweepScreen]  # SCREENS_BY_MODE's screens
    for owner in owners:
        for binding in owner.BINDINGS:
            if isinstance(binding, Binding) and binding.id:
                ids[binding.id] = binding.key
    return ids


def user_keymap(cfg: Config) -> dict[str, str]:
    """The config's ``[keys]`` table checked against the app's binding ids.

    Unknown ids raise ConfigError naming the closest known ids, so a typo is not silently
    ignored (Textual's keymap would just skip it).
    """
    if not cfg.keys:
        return {}
    known = binding_ids()
    unknown = sorted(set(cfg.keys) - set(known))
    if unknown:
        import difflib

        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, known, n=1)
            hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        where = cfg.path or "the config"
        raise ConfigError(
            f"{where}: [keys] names unknown binding id(s) {', '.join(hints)}. Use the ids "
            f"listed in docs/tui.md, e.g. {', '.join(sorted(known)[:4])}; fix or remove those "
            "lines."
        )
    empty = sorted(k for k, v in cfg.keys.items() if not v.strip())
    if empty:
        raise ConfigError(
            f"{cfg.path or 'the config'}: [keys] gives no key for {', '.join(empty)}; write "
            'a Textual key name such as "x", "ctrl+x" or "f2" (several: "x,delete").'
        )
    return {k: ",".join(p.strip() for p in v.split(",")) for k, v in cfg.keys.items()}


def run_app(cluster: str | None = None) -> None:
    """Entry point for `hpcui` with no command (the CLI calls it).

    Library warnings (a failed queue refresh, a dropped connection) would print over the
    screen; while the app runs they go to Textual's log (`textual console`) instead.
    """
    from textual.logging import TextualHandler

    root = logging.getLogger()
    handler = TextualHandler()
    added = not root.handlers
    if added:
        root.addHandler(handler)
    try:
        HpcuiApp(cluster).run()
    finally:
        if added:
            root.removeHandler(handler)
