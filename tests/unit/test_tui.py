"""The app opens on the embedded default and shows the registry's jobs (Textual Pilot)."""

import asyncio

from backends.states import JobState
from hpcui.registry import JobRecord, Registry
from hpcui.tui.app import HpcuiApp


def test_app_opens_on_local_and_lists_jobs(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCUI_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")  # an empty config: only `local`
    Registry().add(
        [
            JobRecord(
                cluster="local",
                token="t1",
                job_id="4242",
                name="train",
                folder="/tmp/x",
                state=JobState.RUNNING,
            )
        ]
    )

    async def run() -> tuple[str, list]:
        app = HpcuiApp()
        async with app.run_test() as pilot:
            await pilot.pause(0.5)
            table = app.query_one("DataTable")
            rows = [table.get_row_at(i) for i in range(table.row_count)]
            info = str(app.query_one("#info").render())
            await pilot.press("q")
        return info, rows

    info, rows = asyncio.run(run())
    assert "local" in info
    assert rows[0][:4] == ["local", "4242", "train", "RUNNING"]
