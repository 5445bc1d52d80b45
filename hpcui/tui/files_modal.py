"""A job's folder as files (Enter: open a folder or view a file, d: download it, a folder
whole; Backspace: up, Esc: close), and a one-line text prompt."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Label, Static

from hpcui.common.formatting import printable, size
from hpcui.errors import HpcuiError

if TYPE_CHECKING:
    from hpcui.backends.records import RemoteFile
    from hpcui.clusters.cluster import Cluster


class TextPromptModal(ModalScreen[str]):
    """One line of text; Enter gives it, Esc gives None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, hint: str) -> None:
        super().__init__(classes="dialog-screen")
        self._title, self.hint = title, hint

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self._title, classes="dialog-title")
            yield Static(self.hint, classes="dialog-body")
            yield Input(id="text")
            yield Static("Enter: apply · Esc: cancel", classes="dialog-body")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class FilesModal(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("backspace", "up", "Up"),
        Binding("d", "download", "Download"),
    ]

    def __init__(self, cluster: Cluster, job_id: str, downloads: Path) -> None:
        super().__init__(classes="dialog-screen")
        self.cluster, self.job_id, self.downloads = cluster, job_id, downloads
        self.root = ""
        self.path = ""
        self.entries: dict[str, RemoteFile] = {}

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="files"):
            yield Label(f"{self.cluster.name}:{self.job_id} · files", classes="dialog-title")
            yield Static("loading…", id="files-path")
            yield DataTable(id="files-table", cursor_type="row")
            yield Static("", id="files-view")
            yield Static(
                "Enter: open / view · d: download · Backspace: up · Esc: close",
                classes="dialog-body",
            )

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("name", "size", "modified")
        table.focus()
        self._list(None)

    @work(thread=True, exclusive=True, group="files", exit_on_error=False)
    def _list(self, path: str | None) -> None:
        try:
            if path is None:
                self.root = path = self.cluster.files.folder(self.job_id)
            entries = self.cluster.files.list(path)
        except HpcuiError as exc:
            self.app.call_from_thread(self._said, str(exc))
            return
        self.app.call_from_thread(self._show, path, entries)

    def _said(self, text: str) -> None:
        self.query_one("#files-path", Static).update(Text(text, style="red"))

    def _show(self, path: str, entries: list[RemoteFile]) -> None:
        self.path = path
        self.entries = {e.path: e for e in entries}
        self.query_one("#files-path", Static).update(Text(path))
        self.query_one("#files-view", Static).update("")
        table = self.query_one(DataTable)
        table.clear()
        for e in entries:
            table.add_row(
                printable(e.name) + ("/" if e.is_dir else ""),
                "-" if e.is_dir else size(e.size),
                e.modified.astimezone().strftime("%Y-%m-%d %H:%M") if e.modified else "",
                key=e.path,
            )

    def _current(self) -> RemoteFile | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self.entries.get(key or "")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        entry = self._current()
        if entry is None:
            return
        if entry.is_dir:
            self._list(entry.path)
        else:
            self._view(entry.path)

    @work(thread=True, exclusive=True, group="files-view", exit_on_error=False)
    def _view(self, path: str) -> None:
        try:
            text, total = self.cluster.files.read_text(path, limit=64 * 1024)
        except HpcuiError as exc:
            self.app.call_from_thread(self._said, str(exc))
            return
        lines = text.splitlines()[-40:]
        head = f"{Path(path).name}: last {len(lines)} lines of the first {size(len(text))} of {size(total)}"
        body = "\n".join(printable(line) for line in lines)
        self.app.call_from_thread(
            self.query_one("#files-view", Static).update, Text(f"{head}\n{body}")
        )

    def action_up(self) -> None:
        if self.path and self.path != self.root:
            self._list(self.path.rsplit("/", 1)[0] or "/")

    def action_download(self) -> None:
        entry = self._current()
        if entry is None:
            self.notify("Choose a file or folder to download.", severity="warning")
            return
        self._download(entry)

    @work(thread=True, group="files-download", exit_on_error=False)
    def _download(self, entry: RemoteFile) -> None:
        self.downloads.mkdir(parents=True, exist_ok=True)
        shown = [-1]

        def progress(done: int, total: int) -> None:
            pct = int(done * 100 / total) if total else 100
            if pct // 10 != shown[0] // 10:  # every 10 %
                shown[0] = pct
                self.app.call_from_thread(
                    self.query_one("#files-path", Static).update,
                    Text(f"downloading {entry.name}: {pct}% of {size(total)}"),
                )

        try:  # a folder whole (only what is not here yet), a file resumably
            done = self.cluster.files.fetch(
                entry.path,
                self.downloads,
                progress=progress,
                note=lambda text: self.app.call_from_thread(self.notify, text),
            )
        except HpcuiError as exc:
            self.app.call_from_thread(self._said, f"download failed: {exc} (d again resumes)")
            return
        said = f" ({done.summary()})" if entry.is_dir else ""
        self.app.call_from_thread(self.notify, f"downloaded {done.target}{said}")
        self.app.call_from_thread(self.query_one("#files-path", Static).update, Text(self.path))

    def action_close(self) -> None:
        self.dismiss(None)
