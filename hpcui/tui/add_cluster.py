"""The app's "add a cluster" dialog: shown on the first run (no config file yet) and from
the command palette. The same core as `hpcui add` (hpcui.clusters.onboarding): look at the site,
show what would be written, then run a tiny test job and append the table."""

from __future__ import annotations

from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from hpcui.errors import HpcuiError

FIELDS = (
    ("host", "login host or ~/.ssh/config alias (required)"),
    ("name", "name in hpcui (default: the host's first word)"),
    ("user", "user there (default: ssh config / yours)"),
    ("key", "private key file (default: ssh config / agent)"),
    ("jump", "jump host (default: none)"),
    ("account", "account/project to charge (if the site needs one)"),
)


class AddClusterModal(ModalScreen[str | None]):
    """Dismissed with the new cluster's name once its table is written, else None."""

    BINDINGS = [Binding("escape", "cancel", "Not now")]

    def __init__(self, *, first_run: bool = False) -> None:
        super().__init__(classes="dialog-screen")
        self.first_run = first_run
        self.proposal: Any = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog", id="add-cluster"):
            title = "Welcome to hpcui: add your cluster" if self.first_run else "Add a cluster"
            yield Label(title, classes="dialog-title")
            yield Static(
                "hpcui connects over SSH, looks at the login node (scheduler, partitions, "
                "a Python matching this one) and shows what it would write to your config. "
                "Nothing is written before you press Add.",
                classes="dialog-body",
            )
            for key, hint in FIELDS:
                yield Input(placeholder=hint, id=f"add-{key}")
            yield Static("", id="add-proposal", classes="dialog-body")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Not now (esc)", id="add-cancel")
                yield Button("Look at the site", id="add-look", variant="primary")
                yield Button(
                    "Add (runs a test job)", id="add-write", variant="success", disabled=True
                )

    def on_mount(self) -> None:
        self.query_one("#add-host", Input).focus()

    def _value(self, key: str) -> str | None:
        return self.query_one(f"#add-{key}", Input).value.strip() or None

    def _say(self, text: str) -> None:
        self.query_one("#add-proposal", Static).update(text)

    @on(Input.Changed)
    def _answers_changed(self) -> None:  # a proposal belongs to the answers it came from
        self.proposal = None
        self.query_one("#add-write", Button).disabled = True

    @on(Button.Pressed, "#add-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#add-look")
    def _look_pressed(self) -> None:
        host = self._value("host")
        if not host:
            self._say("A login host (or an alias of your ~/.ssh/config) is needed.")
            return
        self._say(f"connecting to {host}...")
        answers = {key: self._value(key) for key, _ in FIELDS}  # read here, on the UI thread
        self._look(host, self._value("name") or host.split(".")[0], answers)

    @work(thread=True, exclusive=True, group="add-cluster", exit_on_error=False)
    def _look(self, host: str, name: str, answers: dict[str, str | None]) -> None:
        from hpcui.clusters import onboarding
        from hpcui.config import ClusterConfig, config_path
        from hpcui.tui.bridge import (
            host_key_bridge,
            prompt_bridge,
        )

        try:
            onboarding.check_name(name, config_path())
            base = ClusterConfig(
                name=name,
                host=host,
                user=answers["user"],
                identity_file=answers["key"],
                proxy_jump=answers["jump"],
            )
            proposal = onboarding.propose(
                name,
                base,
                account=answers["account"],
                prompt=prompt_bridge(self.app, name),
                on_unknown_host=host_key_bridge(self.app, name),
            )
        except HpcuiError as exc:
            self.app.call_from_thread(self._say, f"✗ {exc}")
            return
        self.app.call_from_thread(self._proposed, proposal)

    def _proposed(self, proposal: Any) -> None:
        self.proposal = proposal
        self._say(
            f"scheduler {proposal.facts.scheduler} · profile {proposal.cluster.profile} "
            f"({proposal.profile_reason})\npython {proposal.cluster.python} "
            f"({proposal.python_reason})\n\n{proposal.table()}"
        )
        button = self.query_one("#add-write", Button)
        button.disabled = False
        button.focus()

    @on(Button.Pressed, "#add-write")
    def _write_pressed(self) -> None:
        if self.proposal is None:
            return
        self.query_one("#add-write", Button).disabled = True
        self._say(f"{self.proposal.table()}\nrunning a tiny test job...")
        self._write(self.proposal)

    @work(thread=True, exclusive=True, group="add-cluster", exit_on_error=False)
    def _write(self, proposal: Any) -> None:
        from hpcui.clusters import onboarding
        from hpcui.config import config_path
        from hpcui.tui.bridge import (
            host_key_bridge,
            prompt_bridge,
        )

        try:
            done = onboarding.add_cluster(
                proposal,
                config_path(),
                prompt=prompt_bridge(self.app, proposal.name),
                on_unknown_host=host_key_bridge(self.app, proposal.name),
            )
        except HpcuiError as exc:
            self.app.call_from_thread(self._say, f"✗ {exc}\n\nNothing was written.")
            return
        self.app.call_from_thread(self.dismiss, done.name)
