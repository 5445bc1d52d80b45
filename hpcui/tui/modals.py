"""Modal dialogs: host-key confirmation, 2FA/passphrase prompts, yes/no confirmations."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Markdown, Static


class ConfirmModal(ModalScreen[bool]):
    """Yes/no; the destructive button is not focused by default (Enter does not cancel jobs)."""

    BINDINGS = [Binding("escape", "no", "No"), Binding("y", "yes", "Yes")]

    def __init__(self, title: str, body: str, yes: str = "Yes") -> None:
        super().__init__(classes="dialog-screen")
        self._title, self._body, self._yes = title, body, yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self._title, classes="dialog-title")
            yield Static(self._body, classes="dialog-body")
            with Horizontal(classes="dialog-buttons"):
                yield Button("No (esc)", id="no")
                yield Button(f"{self._yes} (y)", id="yes", variant="error")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_yes(self) -> None:
        self.dismiss(True)

    def action_no(self) -> None:
        self.dismiss(False)


class HostKeyModal(ModalScreen[bool]):
    """An unknown host key: show the fingerprint; accepting lets the core write known_hosts."""

    BINDINGS = [Binding("escape", "reject", "Reject")]

    def __init__(self, cluster: str, host: str, key_type: str, fingerprint: str) -> None:
        super().__init__(classes="dialog-screen")
        self.cluster, self.host, self.key_type, self.fingerprint = (
            cluster,
            host,
            key_type,
            fingerprint,
        )

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="hostkey"):
            yield Label(f"Unknown host key for {self.cluster}", classes="dialog-title")
            yield Markdown(
                f"**{self.host}** offers a **{self.key_type}** key with fingerprint\n\n"
                f"`{self.fingerprint}`\n\n"
                "Compare it with the fingerprint your site publishes. Accepting adds it to "
                "known_hosts; a key that changes later is always refused."
            )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Reject", id="reject")
                yield Button("Accept and connect", id="accept", variant="warning")

    def on_mount(self) -> None:
        self.query_one("#reject", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "accept")

    def action_reject(self) -> None:
        self.dismiss(False)


class PromptModal(ModalScreen[list[str]]):
    """keyboard-interactive questions (2FA code, passphrase): one input per question.

    Answers go straight back to the SSH layer; they are never logged or kept.
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(
        self, cluster: str, title: str, instructions: str, questions: list[tuple[str, bool]]
    ) -> None:
        super().__init__(classes="dialog-screen")
        self.cluster, self._title, self.instructions, self.questions = (
            cluster,
            title,
            instructions,
            questions,
        )

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="prompt"):
            yield Label(
                f"{self.cluster}: {self._title or 'authentication'}", classes="dialog-title"
            )
            if self.instructions.strip():
                yield Static(self.instructions.strip(), classes="dialog-body")
            for i, (question, echo) in enumerate(self.questions):
                yield Label(question.strip())
                yield Input(password=not echo, id=f"answer-{i}")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Send", id="send", variant="primary")

    def on_mount(self) -> None:
        self.query(Input).first().focus()

    def _answers(self) -> list[str]:
        return [self.query_one(f"#answer-{i}", Input).value for i in range(len(self.questions))]

    def on_input_submitted(self, event: Input.Submitted) -> None:
        inputs = list(self.query(Input))
        index = inputs.index(event.input)
        if index + 1 < len(inputs):
            inputs[index + 1].focus()
        else:
            self.dismiss(self._answers())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "send":
            self.dismiss(self._answers())
        else:
            self.action_cancel()

    def action_cancel(self) -> None:
        self.dismiss(None)  # the bridge answers emptily and remembers the person said no


#: what a key does, in more words than its footer label (by binding id); a binding without
#: an entry is described by its label
HELP_DETAIL = {
    "app.jobs": "the Jobs screen: every job on every connected cluster",
    "app.job": "the open job: log, details, result, script, usage",
    "app.submit": "the Submit form",
    "app.cluster": "the Cluster screen: quota, partitions, modules",
    "app.history": "history (sacct: exit code, efficiency)",
    "app.help": "this help",
    "jobs.select": "select / unselect (multi-select)",
    "jobs.cancel": "cancel (asks first)",
    "jobs.stop": "graceful stop (stop file; the job's code must poll it)",
    "jobs.resubmit": "resubmit (jobs submitted from this app)",
    "jobs.copy": "copy the job id",
    "jobs.compare": "compare a metric of the selected jobs on one plot ([ ] another metric)",
    "jobs.hold": "hold the selected pending jobs (any job of yours)",
    "jobs.release": "release the selected held jobs",
    "jobs.filter": "filter (Enter keeps it, Esc clears it)",
    "jobs.state": "cycle the state filter",
    "jobs.sort": "sort by the next column",
    "jobs.sort_reverse": "reverse the sort",
    "jobs.all": "hpcui jobs only / all my jobs",
    "jobs.history": "history (sacct: exit code, efficiency)",
    "job.rank_prev": "previous rank",
    "job.rank_next": "next rank",
    "job.follow": "follow the log",
    "job.wrap": "wrap lines",
    "job.quiet": "hide or show the runtime's own INFO lines (submitit's)",
    "job.search": "search the log",
    "job.next": "next search match",
    "job.end": "the log's end",
    "job.pager": "open the log in $PAGER",
    "job.usage": "GPU/CPU usage now",
    "job.metric": "the Metrics tab (loss, accuracy, ... against step or epoch); again: a regex",
    "job.ranks": "every rank's metric on one plot (rank 0 beside the others)",
    "job.cancel": "cancel (asks first)",
    "job.stop": "graceful stop (stop file)",
    "cluster.reload": "reload quota, partitions and modules",
    "cluster.connect": "connect (or reconnect) this cluster",
    "cluster.search": "search modules (spider)",
    "submit.submit": "submit the form",
    "submit.leave": "leave the field (then 1-6 and ? work)",
    "job.hold": "hold: keep a pending job from starting",
    "job.release": "release a held job",
    "job.requeue": "requeue: back to pending (a running job restarts)",
    "job.time": "change the time limit",
    "job.shell": "a shell inside the running job (srun --overlap --pty)",
    "job.files": "the job's folder: browse, view, download (d)",
    "job.edit": "edit the job's batch script in $EDITOR and submit it again",
}


class HelpModal(ModalScreen[None]):
    """Every key of every screen, generated from their bindings with the user's keymap
    applied: a binding added anywhere shows up here. Centred, scrolls; Esc closes."""

    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, groups: list[tuple[str, list[Binding]]]) -> None:
        super().__init__(classes="dialog-screen")
        self.groups = groups

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="help"):
            yield Label("hpcui keys · Esc closes · ↑/↓ scroll", classes="dialog-title")
            with VerticalScroll(id="help-body"):
                yield Markdown(self.text())

    def keys(self, binding: Binding) -> str:
        keymap: dict[str, str] = getattr(self.app, "keymap_overrides", None) or {}
        keys = keymap.get(binding.id or "", binding.key) if binding.id else binding.key
        return " ".join(
            f"`{self.app.get_key_display(Binding(k.strip(), ''))}`"
            for k in keys.split(",")
            if k.strip()
        )

    def text(self) -> str:
        lines: list[str] = []
        for title, bindings in self.groups:
            lines += [f"**{title}**", "", "| key | what |", "|---|---|"]
            for b in bindings:
                what = HELP_DETAIL.get(b.id or "", b.description or b.action)
                lines.append(f"| {self.keys(b)} | {what} |")
            lines.append("")
        lines.append(
            "Keys are remapped in the config's `[keys]` table by binding id "
            '(e.g. `jobs.cancel = "x"`).'
        )
        return "\n".join(lines)

    def action_close(self) -> None:
        self.dismiss(None)
