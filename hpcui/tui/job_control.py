"""The Job screen's control over any job: hold, release, requeue, time limit, a shell in
the job, its folder as files, edit-and-resubmit its script. A Screen the Job screen builds
on, so job.py stays about showing the job; every remote call runs in a worker, every answer
comes as a notification."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import work
from textual.binding import Binding
from textual.screen import Screen

from hpcui.errors import HpcuiError
from hpcui.jobs.control import DONE
from hpcui.tui.files_modal import FilesModal, TextPromptModal
from hpcui.tui.modals import ConfirmModal

if TYPE_CHECKING:
    from hpcui.clusters.cluster import Cluster
    from hpcui.tui.context import AppContext

#: where the app puts downloads: one folder per cluster and job
DOWNLOADS = Path.home() / "Downloads" / "hpcui"

CONTROL_BINDINGS = [
    Binding("H", "control('hold')", "Hold", show=False, id="job.hold"),
    Binding("L", "control('release')", "Release", show=False, id="job.release"),
    Binding("Q", "control('requeue')", "Requeue", show=False, id="job.requeue"),
    Binding("T", "time_limit", "Time limit", show=False, id="job.time"),
    Binding("exclamation_mark", "shell", "Shell", show=False, id="job.shell"),
    Binding("F", "files", "Files", id="job.files"),
    Binding("E", "edit_resubmit", "Edit+resubmit", show=False, id="job.edit"),
    Binding("P", "forward_port", "Forward a port", show=False, id="job.forward"),
    Binding("B", "open_service", "Open in browser", show=False, id="job.browser"),
    Binding("V", "vscode", "VS Code", show=False, id="job.vscode"),
]


class JobControlScreen(Screen[None]):
    """Needs `self.ctx` (AppContext) and `self.key` ((cluster, job id) or None), which the
    screen built on it sets."""

    ctx: AppContext
    key: tuple[str, str] | None

    def _cluster_or_say(self) -> tuple[Cluster, str] | None:
        if self.key is None:
            self.notify("Open a job first (Enter on the Jobs screen).", severity="warning")
            return None
        name, job_id = self.key
        cluster = self.ctx.hub.cluster(name)
        if cluster is None:
            self.notify(f"{name} is not connected (Cluster screen: 4).", severity="error")
            return None
        return cluster, job_id

    @work(thread=True, group="job-control", exit_on_error=False)
    def _remote(self, what: str, call: Callable[[], Any], done: str) -> None:
        try:
            call()
        except HpcuiError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error", title=what)
            return
        self.app.call_from_thread(self.notify, done)

    def action_control(self, verb: str) -> None:
        found = self._cluster_or_say()
        if found is None:
            return
        cluster, job_id = found
        done = DONE[verb]
        call = lambda: getattr(cluster.control, verb)([job_id])  # noqa: E731
        if verb == "requeue":

            def answered(yes: bool | None) -> None:
                if yes:
                    self._remote("requeue", call, f"{done} {job_id}")

            self.app.push_screen(
                ConfirmModal(
                    f"Requeue {cluster.name}:{job_id}?",
                    "A running job is killed and starts again later under the same id.",
                    yes="Requeue",
                ),
                answered,
            )
            return
        self._remote(verb, call, f"{done} {job_id}")

    def action_forward_port(self) -> None:
        """A port the user types, of the running job's node, on 127.0.0.1 here: the URL
        is copied (and said), the forward lives as long as the job or the app."""
        found = self._cluster_or_say()
        if found is None:
            return
        cluster, job_id = found

        def answered(text: str | None) -> None:
            if not text:
                return
            if not text.strip().isdigit():
                self.notify(f"Not a port: {text!r} (1-65535).", severity="error")
                return
            self._forward(cluster, job_id, int(text.strip()), None)

        self.app.push_screen(
            TextPromptModal(
                f"Forward a port of {cluster.name}:{job_id}",
                "The port a service of the job listens on (e.g. 8888, 6006, 8080)",
            ),
            answered,
        )

    def action_open_service(self) -> None:
        """The job's JupyterLab or TensorBoard (the ones hpcui started) in the browser:
        found by its own runtime file, forwarded, opened, its URL copied."""
        found = self._cluster_or_say()
        if found is not None:
            self._open_service(*found)

    @work(thread=True, group="job-control", exit_on_error=False)
    def _open_service(self, cluster: Cluster, job_id: str) -> None:
        from hpcui.services import web as services

        try:
            job = cluster.get_job(job_id)
            kind = services.KINDS.get(job.name)
            if kind is None:
                raise HpcuiError(
                    f"Job {job_id} is not a service hpcui started (jupyter, tensorboard): "
                    "forward its port with P."
                )
            server = services.read_server(job, kind)
            if server is None:
                raise HpcuiError(f"{kind.title} of job {job_id} does not serve yet: try again.")
        except HpcuiError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="warning", title="open")
            return
        self._forward(cluster, job_id, server.port, (server, kind.path))

    @work(thread=True, group="job-control", exit_on_error=False)
    def _forward(self, cluster: Cluster, job_id: str, port: int, server: Any) -> None:
        from hpcui.jobs import forwarding

        held = [
            f for f in forwarding.active()
            if (f.cluster, f.job_id, f.remote_port) == (cluster.name, job_id, port)
        ]  # fmt: skip
        try:
            fwd = (
                held[0]
                if held
                else forwarding.keep(
                    cluster.control.forward(job_id, port, local_port=forwarding.free_port(port))
                )
            )
        except HpcuiError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error", title="forward")
            return
        url = f"http://{fwd.address}/"
        if server is not None:
            found, path = server
            url = found.local_url(fwd.local_port, path)
            self.app.call_from_thread(self.app.open_url, url)
        self.app.call_from_thread(self.app.copy_to_clipboard, url)
        self.app.call_from_thread(
            self.notify, f"{fwd.describe()}: URL copied", title="forwarded", timeout=10
        )
        self.app.call_from_thread(self._forwarded)

    def _forwarded(self) -> None:
        """The screen built on this one lists its job's forwards (Details): redraw them."""

    def action_time_limit(self) -> None:
        found = self._cluster_or_say()
        if found is None:
            return
        cluster, job_id = found

        def answered(text: str | None) -> None:
            if text:
                self._remote(
                    "time limit",
                    lambda: cluster.control.set_time_limit(job_id, text),
                    f"{job_id}: time limit now {text}",
                )

        self.app.push_screen(
            TextPromptModal(
                f"New time limit for {cluster.name}:{job_id}",
                "e.g. 2:00:00, 90m, 1-12:00:00 (raising it may be reserved to administrators)",
            ),
            answered,
        )

    def action_shell(self) -> None:
        found = self._cluster_or_say()
        if found is not None:
            self._open_shell(*found)

    @work(thread=True, group="job-control", exit_on_error=False)
    def _open_shell(self, cluster: Cluster, job_id: str) -> None:
        from hpcui.services.terminal import shell_unavailable, window

        why = shell_unavailable()
        if why:
            self.app.call_from_thread(self.notify, why, severity="error", title="shell")
            return
        cols, rows = window()
        try:
            chan = cluster.control.open_shell(job_id, cols=cols, rows=rows)
        except HpcuiError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error", title="shell")
            return
        self.app.call_from_thread(self._bridge, chan, job_id)

    def _bridge(self, chan: Any, job_id: str) -> None:
        from hpcui.services.terminal import bridge

        try:
            with self.app.suspend():
                print(f"shell in job {job_id}: exit (or Ctrl-D) to go back to hpcui", flush=True)
                status = bridge(chan)
        except Exception as exc:  # no terminal to give away (the browser view)
            chan.close()
            self.notify(
                f"No terminal to hand over here ({exc}): run `hpcui shell {job_id}` in one.",
                severity="warning",
            )
            return
        self.notify(f"left job {job_id} (exit status {status})")

    def action_vscode(self) -> None:
        found = self._cluster_or_say()
        if found is not None:
            self._open_vscode(*found)

    @work(thread=True, group="job-control", exit_on_error=False)
    def _open_vscode(self, cluster: Cluster, job_id: str) -> None:
        """As `hpcui code JOB`: the node's host entry kept (~/.ssh/config includes it),
        then VS Code started, or its command shown where `code` is not installed."""
        import shlex
        import shutil
        import subprocess

        from hpcui.services import node_ssh

        try:
            entry, command = node_ssh.vscode_command(cluster, job_id)
            node_ssh.keep_entry(entry)
        except HpcuiError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error", title="VS Code")
            return
        line = shlex.join(command)
        if shutil.which("code") is None:
            self.app.call_from_thread(self.app.copy_to_clipboard, line)
            self.app.call_from_thread(
                self.notify, f"`code` is not on PATH; run (copied): {line}", title="VS Code"
            )
            return
        subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        self.app.call_from_thread(
            self.notify, f"VS Code opens job {job_id} on {entry.node}", title="VS Code"
        )

    def action_files(self) -> None:
        found = self._cluster_or_say()
        if found is not None:
            cluster, job_id = found
            self.app.push_screen(FilesModal(cluster, job_id, DOWNLOADS / cluster.name / job_id))

    def action_edit_resubmit(self) -> None:
        found = self._cluster_or_say()
        if found is not None:
            self._fetch_script(*found)

    @work(thread=True, group="job-control", exit_on_error=False)
    def _fetch_script(self, cluster: Cluster, job_id: str) -> None:
        try:
            details = cluster.control.details(job_id)
            script = cluster.control.batch_script(job_id)
        except HpcuiError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error", title="resubmit")
            return
        self.app.call_from_thread(self._edit, cluster, job_id, details.work_dir, script)

    def _edit(self, cluster: Cluster, job_id: str, work_dir: str, script: str) -> None:
        from hpcui.services.terminal import edit_text

        try:
            with self.app.suspend():
                edited = edit_text(script, suffix=".sh")
        except HpcuiError as exc:
            self.notify(str(exc), severity="warning", title="resubmit")
            return
        except Exception as exc:  # no terminal to give away (the browser view)
            self.notify(
                f"No terminal for an editor here ({exc}): `hpcui resubmit {job_id} --edit`.",
                severity="warning",
            )
            return
        if edited == script:
            self.notify("The script is unchanged: nothing submitted.")
            return
        self._remote(
            "resubmit",
            lambda: self._resubmitted(
                cluster.control.resubmit(edited, work_dir=work_dir, name=job_id)
            ),
            "submitted the edited script",
        )

    def _resubmitted(self, new_id: str) -> None:
        self.app.call_from_thread(self.notify, f"submitted as {new_id}")
