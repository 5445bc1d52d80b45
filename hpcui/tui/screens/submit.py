"""Submit: pick a cluster, say what to run, set resources; see the batch script live.

The preview is the core's own plan (``Cluster.plan``: profile rules and defaults, no
network) rendered by the cluster's scheduler, so what is shown is what ``submit`` sends,
except for the job folder, token and runtime-bundle path that exist only at submit time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.syntax import Syntax
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Button, Input, Label, Select, Static

from hpcui.errors import HpcuiError
from hpcui.request_fields import REQUEST_FIELDS, RequestField
from hpcui.targets import Call, default_name, json_value, load_call
from hpcui.tui.chrome import LEAD_BINDINGS, app_footer, app_header
from hpcui.tui.messages import Prefill, Submitted

if TYPE_CHECKING:
    from hpcui.cluster import Cluster
    from hpcui.tui.context import AppContext

#: the form's resource boxes: the fields of hpcui.request_fields that have a label
FORM_FIELDS: tuple[RequestField, ...] = tuple(f for f in REQUEST_FIELDS if f.label)


#: narrower than this, the preview sits under the form
NARROW = 120

#: key of the form in a job's registry record (meta)
SUBMIT_FORM = "submit_form"


class SubmitForm:
    """The form's values, independent of widgets (tests and resubmit build them)."""

    def __init__(
        self,
        cluster: str,
        target: str,
        args: str = "[]",
        kwargs: str = "{}",
        resources: dict[str, str] | None = None,
    ) -> None:
        self.cluster, self.target, self.args, self.kwargs = cluster, target, args, kwargs
        self.resources = dict(resources or {})

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def resource_kwargs(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in FORM_FIELDS:
            raw = self.resources.get(f.keyword, "").strip()
            if not raw:
                continue
            if f.repeatable:  # e.g. --begin=now+60 --mail-type=END
                out[f.keyword] = raw.split()
                continue
            try:
                out[f.keyword] = f.kind(raw) if f.kind is not None else True
            except ValueError:
                raise HpcuiError(f"{f.keyword} must be a whole number, got {raw!r}.") from None
        return out

    def default_name(self) -> str:
        """What submit will call the job when no name is given (the function, the script)."""
        return default_name(self.target)

    def call(self) -> Call:
        """The call to submit: ``pkg.mod:fn`` imported here, or a script file (one loader
        for the app and the CLI: ``hpcui.targets``)."""
        args = json_value(self.args, "arguments", list)
        kwargs = json_value(self.kwargs, "keyword arguments", dict)
        return load_call(self.target, args, kwargs)


def preview(cluster: Cluster, form: SubmitForm) -> tuple[str, str]:
    """(plan summary with billing advice, batch script) — no network."""
    kwargs = form.resource_kwargs()
    kwargs.setdefault("name", form.default_name())
    shown = cluster.preview_script(**kwargs)
    return shown.summary, shown.script


class SubmitScreen(Screen[None]):
    BINDINGS = [
        *LEAD_BINDINGS,
        Binding("ctrl+s", "submit", "Submit", id="submit.submit"),
        Binding("escape", "leave_field", "Leave field", show=False, id="submit.leave"),
    ]

    def __init__(self, ctx: AppContext) -> None:
        super().__init__()
        self.ctx = ctx
        self._debounce: Timer | None = None
        self.preview_text = ""  # the batch script shown (tests read it)
        self.plan_text = ""

    def compose(self) -> ComposeResult:
        names = list(self.ctx.hub.conns)
        yield app_header()
        with Horizontal(id="submit-body"):
            with VerticalScroll(id="submit-form"):
                yield Label("cluster")
                yield Select(
                    [(n, n) for n in names],
                    value=self.ctx.start_cluster if self.ctx.start_cluster in names else names[0],
                    allow_blank=False,
                    id="cluster",
                )
                yield Label("what to run: package.module:function, or a script file")
                yield Input(placeholder="mypkg.train:main  or  train.py", id="target")
                yield Label("arguments (JSON list)")
                yield Input(value="[]", id="args")
                yield Label("keyword arguments (JSON object)")
                yield Input(value="{}", id="kwargs")
                with Grid(id="resources"):
                    for f in FORM_FIELDS:
                        with Vertical():
                            yield Label(f.label or f.keyword)
                            yield Input(id=f"res-{f.keyword}")
                yield Button("Submit (ctrl+s)", id="submit", variant="primary")
                yield Static("", id="submit-status")
            with VerticalScroll(id="submit-preview"):
                yield Static("", id="plan")
                yield Static("", id="script-preview")
        yield app_footer()

    def on_screen_resume(self) -> None:
        self._cluster_picked()

    def on_resize(self, event: events.Resize) -> None:
        """Below NARROW columns the preview goes under the form, full width (side by side
        it was 15 characters wide at 80 columns)."""
        self.set_class(event.size.width < NARROW, "narrow")

    # -- form <-> values --------------------------------------------------------------------

    def form(self) -> SubmitForm:
        return SubmitForm(
            cluster=str(self.query_one("#cluster", Select).value),
            target=self.query_one("#target", Input).value,
            args=self.query_one("#args", Input).value,
            kwargs=self.query_one("#kwargs", Input).value,
            resources={
                f.keyword: self.query_one(f"#res-{f.keyword}", Input).value for f in FORM_FIELDS
            },
        )

    def on_prefill(self, message: Prefill) -> None:
        self.prefill(SubmitForm(**message.form))

    def prefill(self, form: SubmitForm) -> None:
        if form.cluster in self.ctx.hub.conns:
            self.query_one("#cluster", Select).value = form.cluster
        self.query_one("#target", Input).value = form.target
        self.query_one("#args", Input).value = form.args
        self.query_one("#kwargs", Input).value = form.kwargs
        for f in FORM_FIELDS:
            self.query_one(f"#res-{f.keyword}", Input).value = form.resources.get(f.keyword, "")
        self._schedule_preview()

    @on(Select.Changed, "#cluster")
    def _cluster_picked(self, _event: Select.Changed | None = None) -> None:
        name = str(self.query_one("#cluster", Select).value)
        conn = self.ctx.hub.conns.get(name)
        if conn is None:
            return
        # picking a cluster does not connect to it (a login may ask for a 2FA code): the
        # preview works offline, and Submit connects first, saying so
        cfg = self.ctx.hub.config.clusters.get(name)
        defaults = cfg.defaults if cfg else {}
        for f in FORM_FIELDS:
            box = self.query_one(f"#res-{f.keyword}", Input)
            value = defaults.get(f.keyword)
            box.placeholder = (
                f"{value} (cluster default)" if value is not None else "profile default"
            )
        self._schedule_preview()

    @on(Input.Changed)
    def _changed(self, _event: Input.Changed) -> None:
        self._schedule_preview()

    def _schedule_preview(self) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(0.25, self.update_preview)

    def update_preview(self) -> None:
        form = self.form()
        cluster = self.ctx.hub.cluster(form.cluster)
        plan = self.query_one("#plan", Static)
        script = self.query_one("#script-preview", Static)
        offline = ""
        if cluster is None:  # the script needs no connection (as `hpcui script`): show it
            cfg = self.ctx.hub.config.clusters.get(form.cluster)
            if cfg is None:
                plan.update(f"[red]{form.cluster} is not in the config[/]")
                return
            from hpcui.cluster import Cluster

            cluster = Cluster(cfg)  # never connected: the preview reads config and profile
            status = self.ctx.hub.conns[form.cluster].status
            offline = f"{form.cluster} is {status}: previewed offline\n"
        try:
            summary, text = preview(cluster, form)
        except HpcuiError as exc:
            plan.update(f"[red]{_esc(offline + str(exc))}[/]")
            script.update("")
            return
        self.plan_text, self.preview_text = offline + summary, text
        style = "yellow" if offline or "advice:" in summary else "green"
        plan.update(f"[{style}]{_esc(self.plan_text)}[/]")
        script.update(Syntax(text, "bash", line_numbers=False, word_wrap=True))

    def action_leave_field(self) -> None:
        """Esc leaves the field being typed in, so 1-5 and ? work again (issue 23)."""
        if isinstance(self.focused, Input):
            self.query_one("#submit", Button).focus()

    # -- submit -------------------------------------------------------------------------------

    @on(Button.Pressed, "#submit")
    def action_submit(self) -> None:
        form = self.form()
        cluster = self.ctx.hub.cluster(form.cluster)
        if cluster is None:
            status = self.ctx.hub.conns[form.cluster].status
            if status != "connecting":
                self.ctx.hub.connect(form.cluster)
            self.notify(
                f"Connecting to {form.cluster} first (it may ask for a code); submit again "
                "once it is connected.",
                severity="warning",
            )
            return
        self.query_one("#submit-status", Static).update("submitting…")
        self._submit(cluster, form)

    @work(thread=True, exclusive=True, group="submit", exit_on_error=False)
    def _submit(self, cluster: Cluster, form: SubmitForm) -> None:
        try:
            call = form.call()
            resources = form.resource_kwargs()
            resources.setdefault("name", call.name)
            job = cluster.submit(call.fn, *call.args, kwargs=call.kwargs, **resources)
            # the registry record keeps the form: "resubmit" refills it, in any process
            cluster.remember(job, SUBMIT_FORM, form.as_dict())
        except HpcuiError as exc:
            self.app.call_from_thread(self._failed, str(exc))
            return
        except Exception as exc:  # the user's function failed to pickle, etc.
            self.app.call_from_thread(self._failed, f"{type(exc).__name__}: {exc}")
            return
        self.app.call_from_thread(self._submitted, form, job.job_id)

    def _failed(self, message: str) -> None:
        self.query_one("#submit-status", Static).update(f"[red]{_esc(message)}[/]")
        self.notify(message, severity="error", title="submit failed")

    def _submitted(self, form: SubmitForm, job_id: str) -> None:
        self.query_one("#submit-status", Static).update(f"[green]submitted {job_id}[/]")
        self.post_message(Submitted(form.cluster, job_id))


def _esc(text: str) -> str:
    from rich.markup import escape

    return escape(text)
