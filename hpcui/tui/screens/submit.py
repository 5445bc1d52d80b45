"""Submit: pick a cluster, say what to run, set resources; see the batch script live.

The preview is the core's own plan (``Cluster.plan``: profile rules and defaults, no
network) rendered by the cluster's scheduler, so what is shown is what ``submit`` sends,
except for the job folder, token and runtime-bundle path that exist only at submit time.

Over 500 lines: one Textual Screen (the form, its validation on each key, the preview and the submit worker share its state); the fields come from hpcui.request.fields.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.syntax import Syntax
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Button, Checkbox, Input, Label, Select, Static
from textual.worker import get_current_worker

from hpcui.errors import HpcuiError
from hpcui.request.fields import FRIENDLY, REQUEST_FIELDS, RequestField
from hpcui.submission.estimate import NOW_S, wait_s
from hpcui.submission.targets import Call, default_name, json_value, load_call
from hpcui.tui.chrome import LEAD_BINDINGS, app_footer, app_header
from hpcui.tui.messages import Prefill, Submitted

if TYPE_CHECKING:
    from hpcui.backends.records import StartEstimate
    from hpcui.clusters.cluster import Cluster
    from hpcui.request.allocation import Allocation
    from hpcui.tui.context import AppContext

#: the form's resource boxes: the fields of hpcui.request.fields that have a label
FORM_FIELDS: tuple[RequestField, ...] = tuple(f for f in REQUEST_FIELDS if f.label)
#: free text (lists, paths, directives): a whole row of the grid, not a third of it (a
#: profile's extra directive was cut to 12 columns)
WIDE_FIELDS = frozenset(
    {"env", "modules", "after_ok", "container", "binds", "container_env", "extra"}
)


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
        array: str = "",
    ) -> None:
        self.cluster, self.target, self.args, self.kwargs = cluster, target, args, kwargs
        self.resources = dict(resources or {})
        self.array = array

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def resource_kwargs(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in FORM_FIELDS:
            raw = self.resources.get(f.keyword, "").strip()
            if not raw:
                continue
            if f.kind is None:  # a flag: the box is ticked or not
                if raw.lower() in ("true", "yes", "1", "on"):
                    out[f.keyword] = True
                continue
            if f.repeatable:  # e.g. --begin=now+60 --mail-type=END
                out[f.keyword] = raw.split()
                continue
            try:
                out[f.keyword] = f.kind(raw)
            except ValueError:
                raise FieldError(
                    f.keyword, f"{f.label or f.keyword} must be a whole number, got {raw!r}."
                ) from None
        return out

    def default_name(self) -> str:
        """What submit will call the job when no name is given (the function, the script)."""
        return default_name(self.target)

    def array_calls(self) -> list[list[Any]] | None:
        """The array's argument lists (`[[1, "a"], [2, "b"]]`: one element each), or None
        for a single job."""
        if not self.array.strip():
            return None
        calls = json_value(self.array, "array", list)
        if not calls or not all(isinstance(c, list) for c in calls):
            raise FieldError(
                "array", "array must be a JSON list of argument lists, e.g. [[1], [2], [3]]."
            )
        if len({len(c) for c in calls}) != 1:
            raise FieldError("array", "every element of the array needs as many arguments.")
        if json_value(self.kwargs, "keyword arguments", dict):
            raise FieldError(
                "array", "an array takes positional arguments only: empty the keyword arguments."
            )
        return calls

    def call(self) -> Call:
        """The call to submit: ``pkg.mod:fn`` imported here, or a script file (one loader
        for the app and the CLI: ``hpcui.submission.targets``)."""
        args = json_value(self.args, "arguments", list)
        kwargs = json_value(self.kwargs, "keyword arguments", dict)
        return load_call(self.target, args, kwargs)

    def problems(self) -> dict[str, str]:
        """Each field's problem, found while typing (field id -> message): JSON boxes,
        numbers, and what the core's Resources refuses, under the field that holds it."""
        from pydantic import ValidationError

        from hpcui.request.resources import Resources

        out: dict[str, str] = {}
        for box, what, kind in (("args", "arguments", list), ("kwargs", "keyword arguments", dict)):
            try:
                json_value(getattr(self, box), what, kind)
            except HpcuiError as exc:
                out[box] = str(exc)
        try:
            self.array_calls()
        except FieldError as exc:
            out["array"] = exc.message
        except HpcuiError as exc:
            out["array"] = str(exc)
        kwargs = {}
        for f in FORM_FIELDS:  # each box on its own: one bad number hides no other problem
            one = SubmitForm(
                self.cluster, self.target, resources={f.keyword: self.resources.get(f.keyword, "")}
            )
            try:
                kwargs.update(one.resource_kwargs())
            except FieldError as exc:
                out[f"res-{exc.field}"] = exc.message
        keyword_of_field = {v: k for k, v in FRIENDLY.items()}
        try:  # the form's keywords are Resources' fields but for time/mem (FRIENDLY)
            Resources(**{keyword_of_field.get(k, k): v for k, v in kwargs.items()})
        except ValidationError as exc:
            for err in exc.errors():
                field = str(err["loc"][0]) if err["loc"] else ""
                msg = str(err["msg"]).removeprefix("Value error, ")
                out.setdefault(f"res-{FRIENDLY.get(field, field)}", msg)
        return out


class FieldError(HpcuiError):
    """A value the form cannot use, with the field that holds it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def preview_plan(cluster: Cluster, form: SubmitForm) -> tuple[str, str, Allocation]:
    """(plan summary with billing advice, batch script, the plan: the form shows its
    defaults as placeholders) — no network."""
    kwargs = form.resource_kwargs()
    kwargs.setdefault("name", form.default_name())
    if kwargs.get("launcher") == "auto":  # shown as submit will choose it, from the code
        from hpcui.submission.frameworks import choose_launcher, code_text

        call = form.call()
        kwargs["launcher"] = choose_launcher(code_text(call.fn, call.args))[0]
    calls = form.array_calls()
    shown = cluster.preview_script(array_size=len(calls) if calls else None, **kwargs)
    return shown.summary, shown.script, shown.allocation


#: the form waits this long after the last change before asking the scheduler
ESTIMATE_AFTER_S = 1.0


def estimate_line(found: list[StartEstimate]) -> str:
    """`start estimate: gpu now on node1 · gpu-long 14:30 on node7` (the scheduler's);
    where it gives none, its reason."""
    parts = []
    for e in found:
        where = e.partition or "default partition"
        wait = wait_s(e)
        if e.start is None or wait is None:
            parts.append(f"{where}: no estimate ({e.said})")
            continue
        at = (
            "now"
            if wait < NOW_S
            else f"{e.start:%H:%M}" + ("" if wait < 86400 else f" on {e.start:%Y-%m-%d}")
        )
        parts.append(f"{where} {at} on {e.nodes}")
    return "start estimate: " + " · ".join(parts)


def cost_text(cluster: Cluster, array_size: int | None, kwargs: dict[str, Any]) -> str:
    """What the submit costs at most and what its account has left (`hpcui budget`'s
    ledger: a round trip, so on the estimate's worker)."""
    from hpcui.sitestate.budget import cost_lines

    jobs = array_size or int(kwargs.get("chain") or 1)
    try:
        cost = cluster.cost(jobs, **kwargs)
        ledger = cluster.site.budget() if cluster.capabilities.budget and cost else None
    except HpcuiError as exc:
        return f"cost: not known ({exc})"
    return " · ".join(cost_lines(cost, ledger))


def placeholders(alloc: Allocation) -> dict[str, str]:
    """What each empty box will mean: the value the plan uses (profile, cluster defaults)."""
    from hpcui.tui.rows import hms

    return {
        "gpus": f"{alloc.gpus} (none)" if not alloc.gpus else str(alloc.gpus),
        "nodes": str(alloc.nodes),
        "tasks_per_node": f"{alloc.tasks_per_node} (1/GPU)"
        if alloc.gpus_per_node
        else str(alloc.tasks_per_node),
        "cpus_per_task": str(alloc.cpus_per_task),
        "mem": alloc.mem_text or "no --mem",
        "time": hms(alloc.time_s) if alloc.time_s else "no --time",
        "partition": alloc.partition or "site default",
        "qos": alloc.qos or "none",
        "account": alloc.account or "your default",
        "constraint": alloc.constraint or "none",
        "name": alloc.name,
        "max_restarts": str(alloc.max_restarts),
        "after_ok": "job ids: 1234 1235",
        "modules": "cuda/12.4 ...",
        "extra": " ".join(alloc.extra) or "e.g. --begin=now+60 --mail-type=END",
    }


class SubmitScreen(Screen[None]):
    BINDINGS = [
        *LEAD_BINDINGS,
        Binding("ctrl+s", "submit", "Submit", id="submit.submit"),
        Binding("ctrl+o", "jupyter", "JupyterLab", id="submit.jupyter"),
        Binding("escape", "leave_field", "Leave field", show=False, id="submit.leave"),
    ]

    def __init__(self, ctx: AppContext) -> None:
        super().__init__()
        self.ctx = ctx
        self._debounce: Timer | None = None
        self._estimate_timer: Timer | None = None
        self.estimate_text = ""  # the start estimate shown (tests read it)
        self.imports_text = ""  # what the call imports, checked on the cluster (tests read it)
        self.preview_text = ""  # the batch script shown (tests read it)
        self.plan_text = ""
        self.problems: dict[str, str] = {}  # field id -> what is wrong with it
        self._previewed: tuple[str, bool] | None = None  # the form (and link) last shown

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
                yield Static("", id="err-args", classes="field-error")
                yield Label("keyword arguments (JSON object)")
                yield Input(value="{}", id="kwargs")
                yield Static("", id="err-kwargs", classes="field-error")
                yield Label("array: a job per argument list (JSON: [[1], [2]])")
                yield Input(placeholder="empty: a single job", id="array")
                yield Static("", id="err-array", classes="field-error")
                with Grid(id="resources"):
                    for f in FORM_FIELDS:
                        with Vertical(classes="wide" if f.keyword in WIDE_FIELDS else ""):
                            yield Label(f.label or f.keyword)
                            yield field_widget(f)
                            yield Static("", id=f"err-res-{f.keyword}", classes="field-error")
                yield Button("Submit (ctrl+s)", id="submit", variant="primary")
                yield Static("", id="submit-status")
            with VerticalScroll(id="submit-preview"):
                yield Static("", id="plan")
                yield Static("", id="estimate").set_styles("display: none;")
                yield Static("", id="imports").set_styles("display: none;")
                yield Static("", id="script-preview")
        yield app_footer()

    def focus_next(self, selector: Any = "*") -> Any:
        """Tab from a screen with no focus starts at "what to run" (the cluster select
        comes first on screen, but is seldom changed: shift+tab reaches it)."""
        if self.focused is None or isinstance(self.focused, VerticalScroll):  # no field yet
            target = self.query_one("#target", Input)
            self.set_focus(target)
            return target
        return super().focus_next(selector)

    def on_screen_resume(self) -> None:
        self._cluster_picked()
        # coming back: no field holds the focus, so 1-6, h and ? are the screen keys again
        # (Textual gives the last focused field its focus back)
        if self.focused is not None and self.focused is not self.query_one("#submit", Button):
            self.set_focus(None)

    def on_key(self, event: events.Key) -> None:
        """A printable key typed while a form control has the focus belongs to the form:
        a dropdown or checkbox does not use it, but it must never reach the app's keys
        (a `q` in `work.py:slow_square` quit the app)."""
        focused = self.focused
        if not event.is_printable or not isinstance(focused, (Select, Checkbox)):
            return
        own = {key.strip() for b in focused.BINDINGS for key in _binding_keys(b)}
        if event.key not in own:
            event.stop()
            event.prevent_default()
            self.app.bell()

    def has_input(self) -> bool:
        """Something typed into the form and not submitted (a quit asks first)."""
        form = self.form()
        return (
            bool(form.target.strip())
            or any(str(v).strip() for v in form.resources.values())
            or form.args.strip() not in ("", "[]")
            or form.kwargs.strip() not in ("", "{}")
        )

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
                f.keyword: field_value(self.query_one(f"#res-{f.keyword}")) for f in FORM_FIELDS
            },
            array=self.query_one("#array", Input).value,
        )

    def on_prefill(self, message: Prefill) -> None:
        self.prefill(SubmitForm(**message.form))

    def prefill(self, form: SubmitForm) -> None:
        if form.cluster in self.ctx.hub.conns:
            self.query_one("#cluster", Select).value = form.cluster
        self.query_one("#target", Input).value = form.target
        self.query_one("#args", Input).value = form.args
        self.query_one("#kwargs", Input).value = form.kwargs
        self.query_one("#array", Input).value = form.array
        for f in FORM_FIELDS:
            set_field(self.query_one(f"#res-{f.keyword}"), form.resources.get(f.keyword, ""))
        self._schedule_preview()

    @on(Select.Changed, "#cluster")
    def _cluster_picked(self, _event: Select.Changed | None = None) -> None:
        name = str(self.query_one("#cluster", Select).value)
        conn = self.ctx.hub.conns.get(name)
        if conn is None:
            return
        # picking a cluster does not connect to it (a login may ask for a 2FA code): the
        # preview works offline, and Submit connects first, saying so; the placeholders
        # come with the preview (what the plan uses for each empty box)
        self._schedule_preview()

    @on(Input.Changed)
    @on(Checkbox.Changed)
    def _changed(self, _event: Input.Changed | Checkbox.Changed) -> None:
        self._schedule_preview()

    @on(Select.Changed, ".field")
    def _choice_changed(self, _event: Select.Changed) -> None:
        self._schedule_preview()

    def _schedule_preview(self) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(0.25, self.update_preview)

    def update_preview(self) -> None:
        form = self.form()
        cluster = self.ctx.hub.cluster(form.cluster)
        # the Select and the boxes also announce the values they were built with, and under
        # load past the debounce: a form already shown is not planned (nor estimated) again
        seen = (json.dumps(form.as_dict(), sort_keys=True), cluster is not None)
        if seen == self._previewed:
            return
        self._previewed = seen
        plan = self.query_one("#plan", Static)
        script = self.query_one("#script-preview", Static)
        offline = ""
        if cluster is None:  # the script needs no connection (as `hpcui script`): show it
            cfg = self.ctx.hub.config.clusters.get(form.cluster)
            if cfg is None:
                plan.update(f"[red]{form.cluster} is not in the config[/]")
                return
            from hpcui.clusters.cluster import Cluster

            cluster = Cluster(cfg)  # never connected: the preview reads config and profile
            status = self.ctx.hub.conns[form.cluster].status
            offline = f"{form.cluster} is {status}: previewed offline\n"
        problems = form.problems()
        self.problems = problems
        for err in self.query(".field-error").results(Static):
            said = problems.get(str(err.id).removeprefix("err-"), "")
            err.update(f"[red]{_esc(said)}[/]" if said else "")
            err.display = bool(said)
        if problems:
            self.plan_text = f"{len(problems)} field(s) to fix: see the red lines in the form"
            self.preview_text = ""
            plan.update(f"[red]{self.plan_text}[/]")
            script.update("")
            return
        try:
            summary, text, alloc = preview_plan(cluster, form)
        except HpcuiError as exc:
            plan.update(f"[red]{_esc(offline + str(exc))}[/]")
            script.update("")
            return
        for keyword, hint in placeholders(alloc).items():
            for box in self.query(f"#res-{keyword}").results(Input):
                box.placeholder = hint
        self.plan_text, self.preview_text = offline + summary, text
        style = "yellow" if offline or "advice:" in summary else "green"
        plan.update(f"[{style}]{_esc(self.plan_text)}[/]")
        script.update(Syntax(text, "bash", line_numbers=False, word_wrap=True))
        self._schedule_estimate(form, offline == "")

    # -- when would it start (the scheduler's estimate: a round trip, off the typing) -------

    def _schedule_estimate(self, form: SubmitForm, connected: bool) -> None:
        if self._estimate_timer is not None:
            self._estimate_timer.stop()
        box = self.query_one("#estimate", Static)
        box.display = connected  # offline: no line at all (the preview says it is offline)
        if not connected:
            self.estimate_text = ""
            box.update("")
            return
        self.estimate_text = ""  # until this form's own answer comes
        box.update("[dim]start estimate: asking the scheduler…[/]")
        self._estimate_timer = self.set_timer(ESTIMATE_AFTER_S, lambda: self._estimate(form))

    @work(thread=True, exclusive=True, group="submit-estimate", exit_on_error=False)
    def _estimate(self, form: SubmitForm) -> None:
        cluster = self.ctx.hub.cluster(form.cluster)
        if cluster is None:
            return
        kwargs = form.resource_kwargs()
        calls = form.array_calls()
        try:
            found = cluster.estimate_start(array_size=len(calls) if calls else None, **kwargs)
            text = estimate_line(found)
        except HpcuiError as exc:
            text = f"start estimate: none ({exc})"
        text += "\n" + cost_text(cluster, len(calls) if calls else None, kwargs)
        try:  # what the call imports, checked there (hpcui.submission.needs)
            call = form.call()
            imports = cluster.faces.imports_line(call.fn, call.args, call.kwargs, **kwargs)
        except Exception as exc:  # a target that does not load yet: the submit says why
            imports = "" if not isinstance(exc, HpcuiError) else f"imports: not checked ({exc})"
        if get_current_worker().is_cancelled:
            return  # the form changed meanwhile: its own estimate is on the way
        self.app.call_from_thread(self._estimated, text, imports)

    def _estimated(self, text: str, imports: str = "") -> None:
        self.estimate_text, self.imports_text = text, imports
        self.query_one("#estimate", Static).update(f"[cyan]{_esc(text)}[/]")
        box = self.query_one("#imports", Static)
        box.display = bool(imports)
        style = "red" if "not importable" in imports else "cyan"
        box.update(f"[{style}]{_esc(imports)}[/]")

    def action_leave_field(self) -> None:
        """Esc leaves the field being typed in, so 1-6 and ? work again."""
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
        problems = form.problems()
        if problems:
            self.update_preview()
            self.notify(next(iter(problems.values())), severity="error", title="fix the form")
            return
        self.query_one("#submit-status", Static).update("submitting…")
        self._submit(cluster, form)

    def _hear_imports(self) -> None:
        """A registry image's import (minutes, once) shows its progress in the status line."""
        from hpcui.submission.containers import import_progress

        def said(line: str) -> None:
            self.app.call_from_thread(self._status, f"importing the image: {_esc(line)}")

        import_progress.set(said)  # this worker thread's context only

    @work(thread=True, exclusive=True, group="submit", exit_on_error=False)
    def _submit(self, cluster: Cluster, form: SubmitForm) -> None:
        self._hear_imports()
        try:
            call = form.call()
            resources = form.resource_kwargs()
            resources.setdefault("name", call.name)
            calls = form.array_calls()
            if calls:  # ONE job array; the table folds it into one row
                job = cluster.map(call.fn, *zip(*calls, strict=True), **resources).jobs[0]
            else:
                job = cluster.submit(call.fn, *call.args, kwargs=call.kwargs, **resources)
            # the registry record keeps the form: "resubmit" refills it, in any process
            cluster.faces.remember(job, SUBMIT_FORM, form.as_dict())
        except HpcuiError as exc:
            self.app.call_from_thread(self._failed, str(exc))
            return
        except Exception as exc:  # the user's function failed to pickle, etc.
            self.app.call_from_thread(self._failed, f"{type(exc).__name__}: {exc}")
            return
        self.app.call_from_thread(self._submitted, form, job.job_id)

    def action_jupyter(self) -> None:
        """JupyterLab on a compute node with this form's resources (its call is not
        needed): submitted, waited for, forwarded, opened, its URL copied."""
        form = self.form()
        cluster = self.ctx.hub.cluster(form.cluster)
        if cluster is None:
            self.notify(f"Connect to {form.cluster} first (Cluster screen: 4).", severity="warning")
            return
        self.query_one("#submit-status", Static).update("starting JupyterLab…")
        self._jupyter(cluster, form)

    @work(thread=True, exclusive=True, group="submit", exit_on_error=False)
    def _jupyter(self, cluster: Cluster, form: SubmitForm) -> None:
        from hpcui.jobs import forwarding
        from hpcui.services import web as services

        kind = services.KINDS["jupyter"]
        self._hear_imports()
        try:
            services.check_installed(cluster, kind, **form.resource_kwargs())
            job = services.submit(cluster, kind, None, **form.resource_kwargs())
            self.app.call_from_thread(self._submitted, form, job.job_id)

            def said(text: str) -> None:
                self.app.call_from_thread(self.notify, text, title="JupyterLab")

            server = services.wait_for_server(job, kind, timeout=3600, said=said)
            fwd = forwarding.keep(
                cluster.control.forward(
                    job.job_id, server.port, local_port=forwarding.free_port(server.port)
                )
            )
        except HpcuiError as exc:
            self.app.call_from_thread(self._failed, str(exc))
            return
        url = server.local_url(fwd.local_port, kind.path)
        self.app.call_from_thread(self.app.open_url, url)
        self.app.call_from_thread(self.app.copy_to_clipboard, url)
        self.app.call_from_thread(
            self.notify, f"JupyterLab of job {job.job_id}: {fwd.address} (URL copied)",
            title="JupyterLab", timeout=15,
        )  # fmt: skip

    def _status(self, markup: str) -> None:
        self.query_one("#submit-status", Static).update(markup)

    def _failed(self, message: str) -> None:
        self.query_one("#submit-status", Static).update(f"[red]{_esc(message)}[/]")
        self.notify(message, severity="error", title="submit failed")

    def _submitted(self, form: SubmitForm, job_id: str) -> None:
        self.query_one("#submit-status", Static).update(f"[green]submitted {job_id}[/]")
        self.post_message(Submitted(form.cluster, job_id))


def _binding_keys(binding: BindingType) -> list[str]:
    keys = binding.key if isinstance(binding, Binding) else binding[0]
    return keys.split(",")


def _esc(text: str) -> str:
    from hpcui.tui.markup import escape  # not rich's: see that module

    return escape(text)


def field_widget(f: RequestField) -> Input | Select[str] | Checkbox:
    """The box for one request field: a choice is a Select (blank: the default), a flag a
    Checkbox, anything else an Input."""
    wid = f"res-{f.keyword}"
    if f.choices:
        return Select(
            [(c, c) for c in f.choices], prompt=f"{f.choices[0]} (default)", id=wid, classes="field"
        )
    if f.kind is None:  # the label above names it; its own text stays short ("X exclusive
        return Checkbox("yes", id=wid, classes="field")  # no" was "exclusive nodes" cut)
    return Input(id=wid, classes="field")


def field_value(widget: Any) -> str:
    if isinstance(widget, Checkbox):
        return "true" if widget.value else ""
    if isinstance(widget, Select):
        return "" if widget.is_blank() else str(widget.value)
    return str(widget.value)


def set_field(widget: Any, value: str) -> None:
    if isinstance(widget, Checkbox):
        widget.value = value.lower() in ("true", "yes", "1", "on")
    elif isinstance(widget, Select):
        if value:
            widget.value = value
        else:
            widget.clear()
    else:
        widget.value = value
