"""Cluster: connection, login host, Python check, quota bars, partitions, modules.

Each piece is one round trip, fetched in a worker when the screen opens or `r` is
pressed; quota and modules change slowly, so nothing here polls in the background.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, DataTable, Input, Label, Select, Static

from hpcui.common.formatting import filled, printable
from hpcui.errors import HpcuiError
from hpcui.sitestate import listed, module_label
from hpcui.tui.chrome import LEAD_BINDINGS, app_footer, app_header
from hpcui.tui.hub import STATUS_LOOK
from hpcui.tui.rows import hms

if TYPE_CHECKING:
    from hpcui.sitestate import (
        FreeReport,
        Module,
        ModuleState,
        PartitionInfo,
        QuotaReport,
        Standing,
    )
    from hpcui.tui.context import AppContext

BAR = 30


def quota_bar(used: int | None, limit: int | None, near: bool, width: int = BAR) -> Text:
    """``[█████░░░░] 52%``; red with a warning when near the limit (or in grace)."""
    if used is None or not limit:
        return Text("no limit" if used is not None else "-", style="dim")
    frac = min(1.0, used / limit)
    full = filled(frac, width)
    style = "bold red" if near else ("yellow" if frac >= 0.75 else "green")
    text = Text("█" * full, style=style)
    text.append("░" * (width - full), style="dim")
    text.append(f" {100 * used / limit:4.0f}%", style=style)
    if near:
        text.append("  ⚠ near the limit", style="bold red")
    return text


class ClusterScreen(Screen[None]):
    BINDINGS = [
        *LEAD_BINDINGS,
        Binding("r", "reload", "Reload", id="cluster.reload"),
        Binding("C", "connect", "Connect", id="cluster.connect"),
        Binding("slash", "module_search", "Modules", id="cluster.search"),
        Binding("escape", "leave_field", "Leave field", show=False, id="cluster.leave"),
    ]

    def __init__(self, ctx: AppContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.modules: ModuleState | None = None
        self.loaded_for: str | None = None

    def compose(self) -> ComposeResult:
        names = list(self.ctx.hub.conns)
        yield app_header()
        with Horizontal(id="cluster-bar"):
            yield Select(
                [(n, n) for n in names],
                value=self.ctx.start_cluster if self.ctx.start_cluster in names else names[0],
                allow_blank=False,
                id="cluster-pick",
            )
            yield Button("Connect", id="connect")
        with VerticalScroll(id="cluster-body"):
            yield Static("", id="conn")
            yield Label("Quota", classes="section")
            yield Static("", id="quota")
            yield Label("Partitions", classes="section")
            yield DataTable(id="partitions", cursor_type="row")
            yield Label("Free now · fair share · allocation", classes="section")
            yield Static("", id="free")
            yield Static("", id="standing")
            yield Label("Modules", classes="section")
            with Vertical(id="modules-box"):
                yield Input(placeholder="search modules (Enter asks the site's spider)", id="mod-q")
                yield Static("", id="loaded")
                yield DataTable(id="modules", cursor_type="row")
        yield app_footer()

    def on_mount(self) -> None:
        parts = self.query_one("#partitions", DataTable)
        for col in (
            "partition",
            "state",
            "nodes idle/alloc/other/total",
            "GPUs/node",
            "time limit",
        ):
            parts.add_column(col, key=col)
        mods = self.query_one("#modules", DataTable)
        for col in ("module", "version", "default", "loaded", "description"):
            mods.add_column(col, key=col)
        self.watch(self.app, "conn_version", self._conn_changed, init=False)

    @property
    def name_shown(self) -> str:
        return str(self.query_one("#cluster-pick", Select).value)

    def on_screen_resume(self) -> None:
        self._show_conn()
        if self.loaded_for != self.name_shown:
            self.action_reload()

    def _conn_changed(self, _v: int) -> None:
        self._show_conn()
        conn = self.ctx.hub.conns[self.name_shown]
        if conn.ready and self.loaded_for != self.name_shown and self.is_current:
            self.action_reload()
        elif not conn.ready and self.loaded_for is None:
            self._no_data()

    @on(Select.Changed, "#cluster-pick")
    def _picked(self, _event: Select.Changed) -> None:
        # the Select also announces the value it was built with: loading twice raced
        # two workers over one screen (and cost five more round trips)
        self._show_conn()
        if self.loaded_for != self.name_shown:
            self.action_reload()

    @on(Button.Pressed, "#connect")
    def action_connect(self) -> None:
        self.ctx.hub.connect(self.name_shown)

    def _show_conn(self) -> None:
        conn = self.ctx.hub.conns[self.name_shown]
        symbol, style = STATUS_LOOK[conn.status]
        cfg = self.ctx.hub.config.clusters.get(conn.name)
        lines = [
            f"[{style}]{symbol} {conn.status}[/] · [b]{conn.name}[/b] · login host "
            f"{conn.host} · profile {(cfg.profile if cfg else None) or 'local'}",
        ]
        if conn.error:
            lines.append(f"[red]{_esc(conn.error)}[/]")
        if conn.python:
            colour = "green" if conn.python_ok else "red"
            lines.append(f"[{colour}]{_esc(conn.python)}[/]")
        self.query_one("#conn", Static).update("\n".join(lines))

    def action_reload(self) -> None:
        name = self.name_shown
        conn = self.ctx.hub.conns[name]
        if self.loaded_for != name:  # never one cluster's data under another's name
            self._clear()
        if not conn.ready:
            self.loaded_for = None
            self._no_data()
            if conn.status == "idle":
                self.ctx.hub.connect(name)
            return
        self.loaded_for = name
        self.query_one("#quota", Static).update("loading…")
        self._load(name)

    def _no_data(self) -> None:
        conn = self.ctx.hub.conns[self.name_shown]
        hint = " (press Connect)" if conn.error else ""
        self.query_one("#quota", Static).update(f"no data: {conn.name} is {conn.status}{hint}")

    def _clear(self) -> None:
        self.modules = None
        self.query_one("#quota", Static).update("")
        self.query_one("#free", Static).update("")
        self.query_one("#standing", Static).update("")
        self.query_one("#loaded", Static).update("")
        self.query_one("#partitions", DataTable).clear()
        self.query_one("#modules", DataTable).clear()

    @work(thread=True, exclusive=True, group="cluster-load", exit_on_error=False)
    def _load(self, name: str) -> None:
        cluster = self.ctx.hub.cluster(name)
        if cluster is None:
            return
        for what, fetch in (
            ("quota", cluster.site.quota_report),
            ("partitions", cluster.site.partitions),
            ("free", cluster.site.free),
            ("standing", cluster.site.standing),
            ("modules", cluster.site.modules),
        ):
            try:
                value: Any = fetch()
            except HpcuiError as exc:
                self.app.call_from_thread(self._show_error, name, what, str(exc))
                continue
            self.app.call_from_thread(getattr(self, f"_show_{what}"), name, value)

    def _show_error(self, name: str, what: str, message: str) -> None:
        if name != self.name_shown:
            return
        if what == "quota":
            self.query_one("#quota", Static).update(f"[red]{_esc(message)}[/]")
        elif what == "modules":
            self.query_one("#loaded", Static).update(f"[red]{_esc(message)}[/]")
        elif what in ("free", "standing"):
            self.query_one(f"#{what}", Static).update(f"[dim]{_esc(message)}[/]")
        else:
            self.notify(f"{what}: {message}", severity="warning")

    def _show_quota(self, name: str, report: QuotaReport) -> None:
        if name != self.name_shown:
            return
        out = Text()
        out.append(f"from `{report.tool}`\n", style="dim")
        for e in report.entries:
            from hpcui.sitestate.jobs import format_bytes

            who = " ".join(p for p in (e.kind, e.name) if p)
            out.append(f"{e.filesystem:<24} {who:<14} ")
            limit = e.hard_bytes or e.soft_bytes
            out.append_text(quota_bar(e.used_bytes, limit, e.near_limit))
            used = format_bytes(e.used_bytes) if e.used_bytes is not None else "?"
            out.append(f"  {used} of {format_bytes(limit) if limit else '-'}")
            if e.files_used is not None:
                fl = e.files_hard or e.files_soft
                out.append(f" · files {e.files_used}{f' of {fl}' if fl else ''}")
            if e.grace:
                out.append(f" · grace {e.grace}", style="bold red")
            out.append("\n")
        if (own := report.own) is not None:
            from hpcui.sitestate.jobs import format_bytes

            share = own.share_of_file_limit
            out.append(
                f"hpcui's own folders: {own.files} files, {format_bytes(own.bytes)}"
                + (f" ({share:.0%} of the file limit)" if share is not None else ""),
                style="bold red" if own.warn else "dim",
            )
            if own.warn:
                out.append(" · `hpcui clean` frees it", style="bold red")
        self.query_one("#quota", Static).update(out)

    def _show_partitions(self, name: str, parts: list[PartitionInfo]) -> None:
        if name != self.name_shown:
            return
        table = self.query_one("#partitions", DataTable)
        table.clear()
        for p in parts:
            table.add_row(
                p.partition + ("*" if p.is_default else ""),
                p.avail,
                "-"
                if p.nodes_total is None  # PBS counts jobs per queue, not nodes
                else f"{p.nodes_idle}/{p.nodes_alloc}/{p.nodes_other}/{p.nodes_total}",
                str(p.gpus_per_node or "-"),
                hms(p.time_limit_s) if p.time_limit_s else "∞",
            )

    def _show_free(self, name: str, report: FreeReport) -> None:
        if name != self.name_shown:
            return
        out = Text()
        for p in report.partitions:
            out.append(f"{p.partition + ('*' if p.is_default else ''):<12} ")
            if p.gpus_total:
                out.append(
                    f"{p.gpus_free}/{p.gpus_total} GPUs free",
                    style="green" if p.gpus_free else "red",
                )
                out.append(f" (at most {p.max_gpus_one_node} on one node) · ")
            out.append(
                f"{p.cpus_free} CPUs free · nodes {p.nodes_idle} idle, {p.nodes_mixed} mixed, "
                f"{p.nodes_allocated} full, {p.nodes_unavailable} out\n"
            )
        self.query_one("#free", Static).update(out)

    def _show_standing(self, name: str, st: Standing) -> None:
        if name != self.name_shown:
            return
        out = Text()
        if st.note:
            out.append(st.note + "\n", style="dim")
        for f in st.fair_share:
            value = "-" if f.fair_share is None else f"{f.fair_share:.3f}"
            out.append(f"fair share {value} in {f.account}", style="bold")
            out.append(
                "  (1.0: nothing used yet · 0.5: your share used · 0: far over)\n", style="dim"
            )
        if st.pending:
            top = max(st.pending, key=lambda p: p.priority or 0)
            out.append(
                f"{len(st.pending)} pending job(s); highest priority {top.priority:.0f} "
                f"(job {top.job_id}: fair share {top.fair_share or 0:.0f}, age {top.age or 0:.0f})\n"
            )
        alloc = st.allocation
        if alloc is not None:
            for e in alloc.entries:
                style = "red" if e.left < 0 else ""
                out.append(
                    f"{e.project} {e.resource}: {e.left:.0f} of {e.allocated:.0f} {e.unit} left\n",
                    style=style,
                )
            if alloc.text:
                out.append(f"{alloc.tool}:\n{printable(alloc.text)}\n")
            if alloc.error:
                out.append(f"allocation: {alloc.error}\n", style="dim")
        self.query_one("#standing", Static).update(out)

    def _show_modules(self, name: str, state: ModuleState) -> None:
        if name != self.name_shown:
            return
        self.modules = state
        loaded = ", ".join(module_label(m) for m in state.loaded) or "none"
        failed = f"\n⚠ setup fails: {state.setup_failure.message}" if state.setup_failure else ""
        self.query_one("#loaded", Static).update(f"loaded: {loaded}{failed}")
        self._fill_modules(listed(state.available))

    def _fill_modules(self, modules: list[Module]) -> None:
        table = self.query_one("#modules", DataTable)
        table.clear()
        for m in modules[:2000]:
            table.add_row(
                m.name,
                _version_cell(m),
                "D" if m.default else "H" if m.hidden else "",
                "L" if m.loaded else "",
                (m.description or "")[:60],
            )

    def action_module_search(self) -> None:
        self.query_one("#mod-q", Input).focus()

    def action_leave_field(self) -> None:
        """Esc leaves the module search box: r, C, / and 1-6 are keys again."""
        if isinstance(self.focused, Input):
            self.set_focus(None)

    @on(Input.Changed, "#mod-q")
    def _mod_filter(self, event: Input.Changed) -> None:
        if self.modules is None:
            return
        self._fill_modules(listed(self.modules.available, event.value))

    @on(Input.Submitted, "#mod-q")
    def _mod_search(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self._search(self.name_shown, event.value.strip())

    @work(thread=True, exclusive=True, group="module-search", exit_on_error=False)
    def _search(self, name: str, term: str) -> None:
        cluster = self.ctx.hub.cluster(name)
        if cluster is None:
            return
        try:
            found = cluster.site.module_search(term)
        except HpcuiError as exc:
            self.app.call_from_thread(self._show_error, name, "modules", str(exc))
            return
        self.app.call_from_thread(self._fill_modules, found)


def _version_cell(m: Module) -> str:
    """The version column: an alias's target; an extension said as one (not loadable by
    its name: the module that provides it is)."""
    if m.alias_of:
        return f"→ {m.alias_of}"
    if m.extension:
        return (
            f"{m.version or ''} (extension{' of ' + m.extension_of[0] if m.extension_of else ''})"
        )
    return m.version or ""


def _esc(text: str) -> str:
    from hpcui.tui.markup import escape  # not rich's: see that module

    return escape(text)
