"""Snapshot tests (pytest-textual-snapshot) of every screen of the app, fed with captured
scheduler output replayed from tests/fixtures: squeue -O, sacct -P, sinfo, bsc_quota
and Lmod (list, avail, spider --json).

The cluster is a real `Cluster` (its profile plans the Submit preview) whose remote calls
are answered from the fixtures; the clock the table uses for "start in" is frozen, the
terminal size is fixed, and nothing on screen depends on the time the test runs.
Regenerate after an intended UI change: `pytest tests/unit/test_tui_snapshots.py
--snapshot-update`, then look at the SVGs in tests/unit/__snapshots__/.
"""

from __future__ import annotations

import asyncio
import difflib
import html
import re
import time
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from hpcui.backends.slurm.accounting import parse_sacct
from hpcui.backends.slurm.partitions import parse_sinfo
from hpcui.backends.slurm.queue import parse_squeue
from hpcui.backends.states import JobState
from hpcui.clusters.cluster import Cluster
from hpcui.config import load_config
from hpcui.logs.follow import LogChunk
from hpcui.sitestate import QueueSnapshot, fetch_modules, parse_quota
from hpcui.sitestate.jobs import HistoryJob, QueueJob
from hpcui.sitestate.quota import QuotaReport
from hpcui.sitestate.remote import MARK
from hpcui.store.registry import JobRecord, Registry
from hpcui.transport.base import CommandResult
from hpcui.tui.app import HpcuiApp
from tests.canned import CannedTransport, scripted
from tests.conftest import ROOT, fixture_text

SIZE = (140, 36)
CELL_PX = 12.2  # a character's width in Rich's exported SVG
SNAPSHOTS = ROOT / "tests/unit/__snapshots__/test_tui_snapshots"
NOW = datetime(2026, 11, 22, 13, 31, tzinfo=UTC)  # just after the capture
SUBMITTED = NOW.timestamp() - 3723
LOG = (
    "".join(f"epoch {i} step {i * 100} loss {2.0 / (i + 1):.4f} lr 3e-4\n" for i in range(24))
    + "done: best loss 0.0800\n"
)

pytestmark = pytest.mark.timeout(120)


class FrozenDatetime(datetime):
    @classmethod
    def now(cls, tz=None):  # type: ignore[override]
        return NOW if tz else NOW.replace(tzinfo=None)


def _framed(*outputs: str) -> CommandResult:
    body = "".join(f"\n{MARK} {i} 0\n{out.rstrip(chr(10))}\n" for i, out in enumerate(outputs))
    return CommandResult(0, body.encode(), b"")


class Watcher:
    """The queue watcher's interface, replaying one captured squeue."""

    last_exception = None

    def __init__(self, snap: QueueSnapshot) -> None:
        self.snap = snap

    def subscribe(self, deliver):
        deliver(self.snap)
        return SimpleNamespace(cancel=lambda: None)

    def refresh(self, max_age_s: float = 0.0) -> QueueSnapshot:
        return self.snap

    def poke(self) -> None:
        pass

    def close(self) -> None:
        pass


class ReplayJob:
    """A finished hpcui job: its log and result as the Job screen reads them (a
    hpcui.jobs.handle.JobHandle, as the screen asks of any job)."""

    num_tasks = 1
    state = JobState.COMPLETED
    hpcui_job = True
    details = None
    name = "train"
    reason = ""

    def __init__(self, cluster: ReplayCluster, job_id: str, folder: str) -> None:
        self.cluster, self.job_id, self.folder = cluster, job_id, folder

    @property
    def cluster_name(self) -> str:
        return self.cluster.name

    def done(self) -> bool:
        return True

    def batch_script(self) -> str:
        return ""

    def cancel(self) -> None:
        pass

    def logs(self, stream="stdout", rank=None, **kw):  # as the cluster replays them
        return self.cluster.logs(self, stream, rank, **kw)

    def result(self, timeout: float | None = None) -> object:
        return {"best_loss": 0.08, "epochs": 24}


class ReplaySite:
    """The site state a Cluster screen reads (cluster.site), from captured outputs."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.jobs = [QueueJob.from_entry(e) for e in parse_squeue(SQUEUE)]
        self.queue_watcher = Watcher(
            QueueSnapshot(jobs=self.jobs, taken_at=NOW, took_s=0.01, changed=True, next_refresh_s=2)
        )

    def poke_queue(self) -> None:
        pass

    def close(self) -> None:
        pass

    def queue(self, *, include_finished: bool = False, max_age_s: float = 0.0):
        return self.jobs

    def history(self, since=None, *, job_ids=None):
        return [HistoryJob.from_entry(e) for e in parse_sacct(SACCT)]

    def unmarked_note(self, jobs) -> str:
        return ""  # the replayed sacct carries hpcui's comments

    def partitions(self):
        return parse_sinfo(SINFO)

    def free(self):
        from hpcui.backends.slurm.free import parse_sinfo_nodes
        from hpcui.sitestate import FreeReport

        return FreeReport.of(
            parse_sinfo_nodes(fixture_text("slurm-22.05.8-dev/sinfo_nodes_2gpu_job.txt"))
        )

    def standing(self):
        from hpcui.backends.slurm.free import parse_sprio, parse_sshare
        from hpcui.sitestate import AllocationReport, Standing

        return Standing(
            fair_share=parse_sshare(fixture_text("slurm-22.05.8-dev/sshare_user.txt")),
            pending=parse_sprio(fixture_text("slurm-22.05.8-dev/sprio_pending.txt")),
            allocation=AllocationReport(tool="bsc_acct", error="no real bsc_acct output to replay"),
        )

    def budget(self):
        from hpcui.backends.slurm import ledger
        from hpcui.sitestate.budget import budget_of

        shares, queue, default = ledger.split_answer(fixture_text("slurm-22.05.8-dev/ledger.txt"))
        return budget_of(
            ledger.LedgerAnswer(
                ledger.parse_associations(shares),
                ledger.parse_queue(queue),
                ledger.parse_default_account(default),
            )
        )

    def quota_report(self):
        return QuotaReport(tool="bsc_quota", entries=parse_quota(QUOTA), tried=[])

    def modules(self, *, with_setup: bool = False):
        return fetch_modules(scripted(_framed(*LMOD)), "lmod", cluster=self.name)


class ReplayCluster(Cluster):
    """A real Cluster (profile, planner, script renderer) whose remote answers are fixtures."""

    status = SimpleNamespace(track=lambda *a, **k: None, interval=0, fast_s=0)  # type: ignore[assignment]

    def __init__(self, name: str) -> None:
        super().__init__(load_config().cluster(name), transport=CannedTransport({}, strict=True))
        self.site = ReplaySite(self.name)  # type: ignore[assignment]
        self.jobs = self.site.jobs

    def run(self, cmd, **kw):  # type: ignore[override]
        return SimpleNamespace(check=lambda what: None)

    def estimate_start(self, **kw):  # type: ignore[override]
        """Slurm's `sbatch --test-only` answer, replayed (tests/fixtures/slurm-test-only)."""
        from hpcui.backends.slurm.estimate import END, parse_test_only

        said = (ROOT / "tests/fixtures/slurm-test-only/started.txt").read_text()
        return parse_test_only(f"{said}{END} gpu\n")

    def remote_info(self):  # type: ignore[override]
        return SimpleNamespace(python_version=(3, 11))

    def logs(self, job, stream="stdout", rank=None, *, until=None, **kw):  # type: ignore[override]
        if until is not None:
            until()  # as follow_many does: the state is asked before the last read
        yield LogChunk(task=rank or 0, stream=stream, text=LOG, offset=0)

    def get_job(self, job_id: str):  # type: ignore[override]
        return ReplayJob(self, job_id, f"/gpfs/home/bsc/bsc012345/.hpcui/jobs/{job_id}")


SQUEUE = fixture_text("slurm-22.05.8-dev/squeue_hpcui_format.txt")
SACCT = fixture_text("slurm-22.05.8-dev/sacct_hpcui_format.txt")
SINFO = fixture_text("slurm-22.05.8-dev/sinfo_hpcui_format.txt")
QUOTA = fixture_text("quota/bsc_quota_plain.txt")
LMOD = (
    fixture_text("lmod-8.6.19/t_list_redirect.stdout"),
    fixture_text("lmod-8.6.19/t_avail.stderr"),
    fixture_text("lmod-8.6.19/spider_json.stdout"),
)


@pytest.fixture
def replay(tmp_path, monkeypatch):
    """Config with one `mn5` cluster answered from fixtures; frozen clock; fixed TZ."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        'default = "mn5"\n[clusters.mn5]\nhost = "glogin1.bsc.es"\nprofile = "mn5-acc"\n'
        'remote_base = "/gpfs/home/bsc/bsc012345/.hpcui"\n'
        '[clusters.mn5.defaults]\nqos = "acc_debug"\naccount = "ehpc01"\n'
    )
    monkeypatch.setenv("HPCUI_CONFIG", str(cfg))
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    import hpcui
    import hpcui.clusters.api
    import hpcui.tui.rows

    monkeypatch.setattr(hpcui.clusters.api, "_clusters", {})
    monkeypatch.setattr(hpcui, "connect", lambda name, **kw: ReplayCluster(name))
    monkeypatch.setattr(hpcui.tui.rows, "datetime", FrozenDatetime)
    Registry().add(
        [
            JobRecord(
                cluster="mn5",
                token="5f0c2a9e41b7",
                job_id="3068",
                name="train",
                folder="/gpfs/home/bsc/bsc012345/.hpcui/jobs/3068",
                state=JobState.RUNNING,
                submitted_at=SUBMITTED,
                updated_at=SUBMITTED,
                meta={"script": "#!/bin/bash\n#SBATCH --job-name=train\nsrun python -m train\n"},
            )
        ]
    )
    yield
    time.tzset()


async def until(pilot, cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.05)
    await pilot.pause(0.2)


def _connected(app) -> bool:
    return app.hub.conns["mn5"].status == "connected" and bool(app.hub.conns["mn5"].python)


async def _jobs(pilot) -> None:
    app = pilot.app
    await until(pilot, lambda: _connected(app))
    await pilot.press("a")  # all my jobs, not only hpcui's
    table = app.screen.query_one("#live")
    await until(pilot, lambda: table.row_count == 5)  # 10 jobs: array 3071's 6 are one row
    # The cursor keeps its job while rows arrive, and which job it was on depends on
    # whether hpcui's own rows came before the `a`: put it on a known row.
    table.move_cursor(row=0)
    await pilot.pause()


async def _history(pilot) -> None:
    app = pilot.app
    await until(pilot, lambda: _connected(app))
    await pilot.press("5")
    await pilot.press("a")  # all my jobs: sacct keeps no comment, so none is marked hpcui's
    await until(pilot, lambda: app.screen.query_one("#history").row_count == 7)


async def _job(pilot) -> None:
    app = pilot.app
    await until(pilot, lambda: _connected(app))
    app.open_job("mn5", "3068")
    await until(pilot, lambda: app.current_mode == "job")
    screen = app.screen
    await until(pilot, lambda: len(screen.panel.lines) == LOG.count("\n"))
    await until(pilot, lambda: "COMPLETED" in str(screen.query_one("#job-head").render()))


async def _submit(pilot) -> None:
    app = pilot.app
    await until(pilot, lambda: _connected(app))
    await pilot.press("3")
    screen = app.screen
    await until(pilot, lambda: "#SBATCH" in getattr(screen, "preview_text", ""))
    # the start estimate comes a second after the last change (a worker): wait for it
    await until(pilot, lambda: getattr(screen, "estimate_text", "").startswith("start estimate"))


async def _cluster(pilot) -> None:
    app = pilot.app
    await until(pilot, lambda: _connected(app))
    await pilot.press("4")
    screen = app.screen
    await until(pilot, lambda: screen.query_one("#modules").row_count > 0)
    await until(pilot, lambda: screen.query_one("#partitions").row_count == 2)
    # every section shown and the loader done: a CI run's picture once caught one still
    # loading (a second load had begun after the first's modules arrived)
    await until(pilot, lambda: not _loading(app))
    for section in ("quota", "free", "standing", "loaded"):
        await until(pilot, lambda s=section: str(screen.query_one(f"#{s}").render()).strip())
    await until(pilot, lambda: "loading" not in str(screen.query_one("#quota").render()))
    # DataTable measures new rows' widths when the app is idle: under load a picture that
    # stayed the same for 0.2 s once had the module column still at its header's width
    mods = screen.query_one("#modules")
    longest = max(len(str(mods.get_row_at(i)[0])) for i in range(mods.row_count))
    assert longest > len("module")  # else the wait below would say nothing
    await until(pilot, lambda: mods.columns["module"].content_width >= longest)


def _loading(app) -> bool:
    return any(w.group == "cluster-load" and not w.is_finished for w in app.workers)


async def settled(pilot, timeout: float = 10.0) -> None:
    """Until two pictures 0.2 s apart are the same: the help's Markdown parses in a thread
    and mounts its tables in batches, so under CI's load a picture taken after fixed
    pauses once caught it half-built."""
    deadline = time.monotonic() + timeout
    before = pilot.app.export_screenshot()
    while True:
        await pilot.pause(0.2)
        now = pilot.app.export_screenshot()
        if now == before:
            return
        if time.monotonic() > deadline:
            raise AssertionError("the screen kept changing for 10 s")
        before = now


async def _help(pilot) -> None:
    app = pilot.app
    # the Jobs table behind the dialog complete, its cursor on a known row: which row it
    # was on depended on when the queue's rows came (a CI run's picture differed there)
    await _jobs(pilot)
    await pilot.press("question_mark")
    await until(pilot, lambda: type(app.screen).__name__ == "HelpModal")
    markdown = app.screen.query_one("Markdown")
    # every group's table mounted (the Markdown parses off the event loop)
    await until(pilot, lambda: len(markdown.query("MarkdownTable")) == 7)
    await pilot.wait_for_scheduled_animations()
    await settled(pilot)


@pytest.mark.parametrize(
    "run_before",
    [_jobs, _history, _job, _submit, _cluster, _help],
    ids=["jobs", "history", "job", "submit", "cluster", "help"],
)
def test_screen_snapshot(replay, snap_compare, run_before, request):
    taken: list[str] = []

    async def then_settled(pilot) -> None:  # every screen: the last redraws done (CI load)
        await run_before(pilot)
        await settled(pilot)
        taken.append(pilot.app.export_screenshot())

    same = snap_compare(HpcuiApp(), terminal_size=SIZE, run_before=then_settled)
    # CI keeps no snapshot report: say in the failure which lines differ, as text
    stored = SNAPSHOTS / f"test_screen_snapshot[{request.node.callspec.id}].svg"
    assert same, "\n".join(
        difflib.unified_diff(
            svg_lines(stored.read_text()) if stored.exists() else [],
            svg_lines(taken[-1]) if taken else [],
            "stored",
            "taken",
            lineterm="",
        )
    )


def svg_lines(svg: str) -> list[str]:
    """The text a screenshot shows, a line per row, each piece at its column (no styles)."""
    rows: dict[float, dict[int, str]] = {}
    for m in re.finditer(r'<text [^>]*x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        text = html.unescape(m[3]).replace("\xa0", " ")
        rows.setdefault(float(m[2]), {})[round(float(m[1]) / CELL_PX)] = text
    lines = []
    for _, row in sorted(rows.items()):
        cells: list[str] = []
        for col, text in sorted(row.items()):
            cells += [" "] * (col - len(cells))
            cells[col:] = list(text)
        lines.append("".join(cells).rstrip())
    return lines


def test_an_ended_jobs_details_say_each_thing_once(replay):
    """Issue 35, defect 8: an ended job still in squeue listed nodes, start and elapsed
    twice (the queue's and sacct's); once it ended, sacct's alone are shown."""

    async def go() -> str:
        app = HpcuiApp()
        async with app.run_test(size=SIZE) as pilot:
            await _job(pilot)
            screen = app.screen
            await until(pilot, lambda: "efficiency" in str(screen.query_one("#details").render()))
            return str(screen.query_one("#details").render())

    text = asyncio.run(go())
    for label in ("nodes ", "started ", "elapsed "):
        assert sum(line.startswith(label) for line in text.splitlines()) == 1, (label, text)
