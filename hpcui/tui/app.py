"""hpcui's terminal app: the jobs hpcui knows, refreshed in a worker, never blocking the UI."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import DataTable, Footer, Header, Static

from hpcui.config import load_config
from hpcui.registry import Registry

COLUMNS = ("cluster", "id", "name", "state", "updated")


class HpcuiApp(App):
    TITLE = "hpcui"
    BINDINGS = [("r", "refresh", "Refresh"), ("q", "quit", "Quit")]
    CSS = "#info { height: auto; padding: 0 1; color: $text-muted; }"

    def __init__(self, cluster: str | None = None) -> None:
        super().__init__()
        self.cfg = load_config()
        self.cluster_name = cluster or self.cfg.default or "local"

    def compose(self) -> ComposeResult:
        yield Header()
        host = self.cfg.cluster(self.cluster_name).host or "this machine"
        yield Static(
            f"cluster [b]{self.cluster_name}[/b] ({host}) · config {self.cfg.path}", id="info"
        )
        yield DataTable(id="jobs", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for col in COLUMNS:
            table.add_column(col, key=col)
        self.action_refresh()
        self.set_interval(5.0, self.action_refresh)

    def action_refresh(self) -> None:
        self.run_worker(self._load, thread=True, exclusive=True, group="refresh")

    def _load(self) -> None:
        records = Registry().list()
        self.call_from_thread(self._show, records)

    def _show(self, records) -> None:  # type: ignore[no-untyped-def]
        import time

        table = self.query_one(DataTable)
        with self.batch_update():
            seen = set()
            for r in records:
                key = f"{r.cluster}:{r.job_id or r.token}"
                seen.add(key)
                row = (
                    r.cluster,
                    r.job_id or "-",
                    r.name,
                    r.state.value,
                    time.strftime("%H:%M:%S", time.localtime(r.updated_at)),
                )
                if key in table.rows:
                    for col, value in zip(COLUMNS, row):
                        if table.get_cell(key, col) != value:
                            table.update_cell(key, col, value)
                else:
                    table.add_row(*row, key=key)
            for key in [k for k in table.rows if k.value not in seen]:
                table.remove_row(key)


def run_app(cluster: str | None = None) -> None:
    HpcuiApp(cluster).run()
