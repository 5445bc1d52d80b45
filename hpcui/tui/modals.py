"""Modal dialogs: host-key confirmation, 2FA/passphrase prompts, yes/no confirmations."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
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
        # empty answers: the server refuses them and the core reports a clear auth error
        self.dismiss(["" for _ in self.questions])


HELP = """\
# hpcui keys

| key | where | what |
|---|---|---|
| `1`-`5` | anywhere | jobs, job, submit, cluster, history |
| `ctrl+p` | anywhere | command palette |
| `?` | anywhere | this help |
| `q` | anywhere | quit |
| `j`/`k`, arrows | tables | move |
| `enter` | jobs | open the job |
| `space` | jobs | select / unselect (multi-select) |
| `c` | jobs, job | cancel (asks first) |
| `x` | jobs, job | graceful stop (stop file; the job's code must poll it) |
| `R` | jobs | resubmit (jobs submitted from this app) |
| `y` | jobs | copy the job id |
| `/` | jobs, job, cluster | filter / search |
| `t` | jobs | cycle the state filter |
| `s` / `S` | jobs | sort by the next column / reverse |
| `a` | jobs | hpcui jobs only / all my jobs |
| `h` | jobs | history (sacct: exit code, efficiency) |
| `o` / `e` | job | stdout / stderr |
| `[` / `]` | job | previous / next rank |
| `f` | job | follow the log |
| `w` | job | wrap lines |
| `n` | job | next search match |
| `p` | job | open the log in `$PAGER` |

Keys can be remapped with Textual keymaps (binding ids such as `jobs.cancel`).
"""


class HelpModal(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="help"):
            yield Markdown(HELP)

    def action_close(self) -> None:
        self.dismiss(None)
