"""The app driven by Pilot against the real dev cluster: submit from the form, watch the
table, read the log, cancel with confirmation, filter, host-key and 2FA dialogs."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid

import pytest
from textual.widgets import Input

from hpcui.backends.states import JobState
from hpcui.tui.app import HpcuiApp
from hpcui.tui.job_table import JobTable
from hpcui.tui.modals import ConfirmModal, HostKeyModal, PromptModal
from hpcui.tui.screens.job import PENDING_NOTE
from hpcui.tui.widgets import LogPanel
from tests.conftest import DEVCLUSTER

pytestmark = pytest.mark.devcluster

SIZE = (160, 45)


def chatty(n: int, gate: str = "") -> int:
    """Print n loss lines, then stay RUNNING until the test removes ~/`gate` (at most
    120 s): the table is seen to show RUNNING however slow a busy CI makes squeue."""
    import os
    import time as _t

    for i in range(n):
        print(f"step {i} loss {1 / (i + 1):.4f}", flush=True)
        _t.sleep(0.2)
    held = os.path.expanduser(f"~/{gate}") if gate else ""
    deadline = _t.monotonic() + 120
    while held and os.path.exists(held) and _t.monotonic() < deadline:
        _t.sleep(0.2)
    return 2 * n


def nap(seconds: float) -> None:
    import time as _t

    _t.sleep(seconds)


async def wait_for(pilot, cond, timeout: float = 60.0, what: object = "") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")
        await pilot.pause(0.1)


async def open_foreign_job(pilot, app, job_id: str, cluster: str = "dev"):  # type: ignore[no-untyped-def]
    """Once connected, open a job hpcui did not submit; its Details once the scheduler's
    word is in them."""
    await wait_for(pilot, lambda: app.hub.conns[cluster].status == "connected", 60, cluster)
    app.open_job(cluster, job_id)
    await wait_for(pilot, lambda: bool(app.screen.query("#details")), 30, "Job screen")
    details = app.screen.query_one("#details")
    await wait_for(pilot, lambda: "not submitted by hpcui" in str(details.render()), 30, "details")
    return details


async def wait_for_prompt(pilot, app, what: str) -> None:
    """The prompt dialog is pushed, composed and focused: typing now reaches its input."""
    await wait_for(
        pilot,
        lambda: (
            isinstance(app.screen, PromptModal)
            and app.focused is not None
            and app.focused in app.screen.query("Input")
        ),
        30,
        what,
    )


def run_closing(go):  # type: ignore[no-untyped-def]
    """Run the Pilot coroutine, then close and forget the clusters it connected."""
    import hpcui.clusters.api

    try:
        return asyncio.run(go())
    finally:
        for c in hpcui.clusters.api._clusters.values():
            c.close()
        hpcui.clusters.api._clusters.clear()


def job_state(cluster, job_id: str) -> str:
    """What the scheduler says of a job, for a failing wait's message."""
    try:
        d = cluster.control.details(job_id)
    except Exception as exc:  # a message, not a check
        return f"unknown ({exc})"
    return f"{d.state.value} ({d.reason})"


def cell(table: JobTable, key: str, col: str) -> str | None:
    return str(table.shown[key][col]) if key in table.shown else None


def test_submit_from_the_form_then_watch_table_log_and_result(dev_env, site_name, monkeypatch):
    # the shared dev cluster lists every job of the last 5 min (~1 s per squeue): the
    # watcher's breathing room (10x the last call) would make the test wait tens of seconds
    # per state; here the table's following is under test, not that room
    # (tests/unit/test_site_queue). The job stays RUNNING until the table has shown it.
    import hpcui.sitestate.watcher as watcher

    monkeypatch.setattr(watcher, "SLOW_FACTOR", 2.0)

    async def go():
        app = HpcuiApp(site_name, connect=[site_name])
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(
                pilot, lambda: app.hub.conns[site_name].status == "connected", 60, site_name
            )
            gate = f".tui-gate-{uuid.uuid4().hex[:8]}"
            app.hub.conns[site_name].cluster.run(["touch", gate]).check()
            await pilot.press("3")
            form = app.screen
            form.query_one("#target").value = "tests.integration.test_tui_dev:chatty"
            form.query_one("#args").value = f'[15, "{gate}"]'
            form.query_one("#res-time").value = "5m"
            # PENDING (held) until the table has shown it: a `--begin=now+4` ran before
            # the first look once under CI's load
            form.query_one("#res-extra").value = "--hold"
            await wait_for(
                pilot,
                lambda: "--time=" in form.preview_text and "chatty" in form.preview_text,
                10,
                "preview",
            )
            preview = form.preview_text
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: app.current_mode == "job", 60, "jump to the job")
            cluster, job_id = app.current_job
            key = f"{site_name}:{job_id}"
            await pilot.press("1")
            table = app.screen.query_one("#live", JobTable)
            seen: list[str] = []
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                state = cell(table, key, "state")
                if state and (not seen or seen[-1] != state):
                    seen.append(state)
                    if state == "PENDING":  # seen: let it start
                        await asyncio.to_thread(
                            app.hub.conns[site_name].cluster.control.release, [job_id]
                        )
                    if state == "RUNNING":  # seen: let the job finish
                        await asyncio.to_thread(
                            app.hub.conns[site_name].cluster.run, ["rm", "-f", gate]
                        )
                if state == "COMPLETED":
                    break
                await pilot.pause(0.1)
            app.open_job(cluster, job_id)
            job_screen = app.screen
            panel = job_screen.query_one(LogPanel)
            await wait_for(
                pilot,
                lambda: sum("loss" in ln for ln in panel.lines) == 15,
                60,
                lambda: f"log lines, got {panel.lines}",
            )
            result = job_screen.query_one("#result")
            await wait_for(pilot, lambda: "30" in str(result.render()), 60, "result")
            metric = job_screen.reader.metrics().get("loss").y  # "step 3 loss 0.25" lines
            script = job_screen.script_text
            # the app follows logs through Cluster.logs: spooled like `hpcui logs -f`
            spooled = list((app.registry.path.parent / "logs" / site_name).glob("*.log"))
            # resubmit: the registry record kept the form; R on the row refills it
            await pilot.press("1")
            table = app.screen.query_one("#live", JobTable)
            table.move_cursor(row=table.get_row_index(key))
            await pilot.press("R")
            await wait_for(pilot, lambda: app.current_mode == "submit", 30, "the form")
            again = app.screen
            await wait_for(
                pilot,
                lambda: again.query_one("#args").value == f'[15, "{gate}"]',
                10,
                "refilled args",
            )
            refilled = (again.query_one("#target").value, again.query_one("#res-time").value)
            return preview, seen, metric, str(result.render()), script, spooled, refilled

    preview, seen, metric, result, script, spooled, refilled = asyncio.run(go())
    assert spooled, "the Job screen's log was not spooled locally"
    assert refilled == ("tests.integration.test_tui_dev:chatty", "5m")
    assert "--time=" in preview and "chatty" in preview
    assert seen[-1] == "COMPLETED", seen
    # followed in place; COMPLETING (Slurm's epilog moment) shows when a refresh lands in it
    followed = [state for state in seen if state != "COMPLETING"]
    assert followed[:3] == ["PENDING", "RUNNING", "COMPLETED"], seen
    assert "--hold" in preview
    assert metric[:3] == [1.0, 0.5, 0.3333]
    assert "returned" in result and "30" in result
    assert "#SBATCH" in script


def test_both_sites_in_one_jobs_screen(dev_env):
    """Slurm 22.05 (dev) and 24.11 (dev24) side by side in the Jobs screen's live table,
    each row keyed by its cluster."""
    from hpcui.clusters.api import connect

    jobs = {s: connect(s).submit(nap, 300, name=f"tui-{s}", time="10m") for s in ("dev", "dev24")}

    async def go():
        app = HpcuiApp("dev", connect=["dev", "dev24"])
        async with app.run_test(size=SIZE) as pilot:
            table = app.screen.query_one("#live", JobTable)
            keys = {f"{s}:{j.job_id}" for s, j in jobs.items()}
            await wait_for(pilot, lambda: keys <= set(table.shown), 90, lambda: table.shown)
            return {k: (cell(table, k, "name"), cell(table, k, "cluster")) for k in keys}

    try:
        shown = asyncio.run(go())
    finally:
        for j in jobs.values():
            j.cancel()
    for s, j in jobs.items():
        name, cluster = shown[f"{s}:{j.job_id}"]
        assert name == f"tui-{s}" and cluster == s, shown


def test_cancel_from_the_table_with_confirmation_and_filter(dev):
    # filtered by a name no other row has: a fresh cluster's small job ids (say "57") also
    # appear in other rows' ids and times
    name = f"tuinap{uuid.uuid4().hex[:8]}"
    job = dev.submit(nap, 300, name=name, time="10m")

    async def go():
        app = HpcuiApp("dev", connect=["dev"])
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            table = screen.query_one("#live", JobTable)
            key = f"dev:{job.job_id}"
            await wait_for(pilot, lambda: key in table.shown, 60, "row")
            await pilot.press("slash", *name, "enter")
            await wait_for(pilot, lambda: list(table.shown) == [key], 10, "filter")
            table.move_cursor(row=table.get_row_index(key))
            await pilot.press("c")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), 10, "confirm")
            await pilot.press("y")
            await wait_for(pilot, lambda: cell(table, key, "state") == "CANCELLED", 120, "cancel")
            return True

    try:
        assert asyncio.run(go())
    finally:
        if not job.done():
            job.cancel()


def _fresh_config(tmp_path, known_hosts):
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[clusters.fresh]\nhost = "hpcui-dev"\nssh_config = "{DEVCLUSTER}/ssh/config"\n'
        f'known_hosts = "{known_hosts}"\nprofile = "dev"\npython = "/usr/bin/python3"\n'
    )
    return cfg


def test_host_key_dialog_accept_writes_known_hosts(devcluster, tmp_path, monkeypatch):
    kh = tmp_path / "known_hosts"
    monkeypatch.setenv("HPCUI_CONFIG", str(_fresh_config(tmp_path, kh)))
    import hpcui.clusters.api

    monkeypatch.setattr(hpcui.clusters.api, "_clusters", {})
    fp = subprocess.run(
        ["ssh-keygen", "-lf", str(DEVCLUSTER / "ssh" / "host_main_ed25519.pub")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[1]

    async def go():
        app = HpcuiApp("fresh", connect=["fresh"])
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(  # pushed, composed, and its text rendered: Markdown fills
                pilot,  # `source` in its own mount step, after the widget exists
                lambda: (
                    isinstance(app.screen, HostKeyModal)
                    and any(m.source for m in app.screen.query("Markdown"))
                ),
                30,
                "dialog",
            )
            shown = app.screen.query_one("Markdown").source
            await pilot.pause(0.2)
            await pilot.click("#accept")
            await wait_for(pilot, lambda: app.hub.conns["fresh"].status == "connected", 30, "ok")
            return shown

    try:
        shown = asyncio.run(go())
    finally:
        for c in hpcui.clusters.api._clusters.values():
            c.close()
    assert fp in shown
    assert kh.read_text().startswith("[127.0.0.1]:2222 ssh-ed25519 ")


def test_two_factor_dialog_answers_the_real_sshd(dev_env):
    seed = (DEVCLUSTER / "ssh" / "totp_seed").read_text().strip()

    async def go():
        app = HpcuiApp("dev-2fa", connect=["dev-2fa"])
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_prompt(pilot, app, "2FA dialog")
            code = subprocess.run(
                ["oathtool", "--totp", "-b", seed], capture_output=True, text=True, check=True
            ).stdout.strip()
            await pilot.press(*code, "enter")
            await wait_for(
                pilot, lambda: app.hub.conns["dev-2fa"].status == "connected", 30, "connected"
            )
            return app.sub_title

    title = run_closing(go)
    assert "● dev-2fa" in title


def test_a_wrong_2fa_code_says_why_and_offers_another_try(dev_env):
    """Issue 23, defect 9: a mistyped code used to close the dialog and leave an error
    line; now the app says the code was not accepted and asks again on `y`. Cancelling the
    dialog is not a wrong code: no retry offered."""
    seed = (DEVCLUSTER / "ssh" / "totp_seed").read_text().strip()

    async def go():
        app = HpcuiApp("dev-2fa", connect=["dev-2fa"])
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_prompt(pilot, app, "2FA dialog")
            await pilot.press(*"000000", "enter")  # wrong
            await wait_for(
                pilot, lambda: isinstance(app.screen, ConfirmModal), 30, "the retry question"
            )
            asked = str(app.screen.query_one(".dialog-title").render())
            body = str(app.screen.query_one(".dialog-body").render())
            await pilot.press("y")
            await wait_for_prompt(pilot, app, "the dialog again")
            code = subprocess.run(
                ["oathtool", "--totp", "-b", seed], capture_output=True, text=True, check=True
            ).stdout.strip()
            await pilot.press(*code, "enter")
            await wait_for(
                pilot, lambda: app.hub.conns["dev-2fa"].status == "connected", 30, "connected"
            )
            return asked, body

    asked, body = run_closing(go)
    assert asked == "dev-2fa: the code was not accepted"
    assert "rejected the keyboard-interactive answers" in body and "Try again?" in body


def test_cancelling_the_2fa_dialog_is_not_a_wrong_code(dev_env):
    async def go():
        app = HpcuiApp("dev-2fa", connect=["dev-2fa"])
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_prompt(pilot, app, "2FA dialog")
            await pilot.press("escape")
            conn = app.hub.conns["dev-2fa"]
            await wait_for(pilot, lambda: conn.status == "error", 30, "the error")
            await pilot.pause(0.3)
            return conn.error, type(app.screen).__name__

    error, screen = run_closing(go)
    assert "login cancelled" in error and screen != "ConfirmModal"


def test_job_details_follow_the_job_and_show_its_outcome(dev_env):
    """Issue 23, defect 3: the Details tab was frozen at the moment the job was opened
    (PENDING, elapsed 0:00:00). Now it follows the job and, once it has ended, shows the
    exit code, nodes, start/end and efficiency from sacct."""
    from hpcui.clusters.api import connect

    job = connect("dev").submit(nap, 3, name="tui-details", time="5m")

    async def go():
        app = HpcuiApp("dev", connect=["dev"])
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.hub.conns["dev"].status == "connected", 60, "dev")
            app.open_job("dev", job.job_id)
            await wait_for(pilot, lambda: bool(app.screen.query("#details")), 30, "Job screen")
            details = app.screen.query_one("#details")
            first = str(details.render())
            await wait_for(
                pilot,
                lambda: "exit code   0" in str(details.render()),
                120,
                lambda: f"the outcome, got {details.render()}",
            )
            return first, str(details.render()), str(app.screen.query_one("#job-head").render())

    first, last, head = run_closing(go)
    assert "COMPLETED" not in first  # opened while it was still pending or running
    assert "state       COMPLETED" in last and "ended       20" in last  # its end time
    assert "nodes       1 (node" in last and "efficiency  CPU " in last
    assert "started     20" in last and "elapsed     00:00:0" in last
    assert "COMPLETED" in head


def test_cluster_screen_shows_quota_partitions_modules(dev_env):
    async def go():
        app = HpcuiApp("dev", connect=["dev"])
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("4")
            screen = app.screen
            parts = screen.query_one("#partitions")
            mods = screen.query_one("#modules")
            await wait_for(pilot, lambda: parts.row_count > 0 and mods.row_count > 0, 60, "data")
            await wait_for(pilot, lambda: "matches" in str(screen.query_one("#conn").render()), 30)
            await wait_for(
                pilot, lambda: "GPUs free" in str(screen.query_one("#free").render()), 60, "free"
            )
            await wait_for(
                pilot, lambda: "fair share" in str(screen.query_one("#standing").render()), 60
            )
            quota = str(screen.query_one("#quota").render())
            free = str(screen.query_one("#free").render())
            names = [str(parts.get_row_at(i)[0]) for i in range(parts.row_count)]
            all_mods = {str(mods.get_row_at(i)[0]) for i in range(mods.row_count)}
            await pilot.click("#mod-q")
            await pilot.press(*"cuda")
            await pilot.pause(0.3)
            cuda = [str(mods.get_row_at(i)[0]) for i in range(mods.row_count)]
            versions = [str(mods.get_row_at(i)[1]) for i in range(mods.row_count)]
            await pilot.press(*"/12.2")  # a hidden module shows when named in full
            await pilot.pause(0.3)
            named = [tuple(map(str, mods.get_row_at(i)[:3])) for i in range(mods.row_count)]
            return (
                quota,
                names,
                cuda,
                str(screen.query_one("#conn").render()),
                free,
                all_mods,
                (
                    versions,
                    named,
                ),
            )

    quota, names, cuda, conn, free, all_mods, (versions, named) = asyncio.run(go())
    assert versions == ["12.4"] and named == [("cuda", "12.2", "H")]  # issue 38: hidden
    assert {"lmod", "settarg"} <= all_mods and "Core" not in all_mods  # defect 11
    assert "gpu " in free and "/8 GPUs free" in free
    assert "df" in quota and "%" in quota
    assert "cpu*" in names and "gpu" in names
    assert cuda and set(cuda) == {"cuda"}
    assert "connected" in conn and "Python 3." in conn


def test_key_passphrase_dialog_unlocks_the_key(devcluster, tmp_path, monkeypatch):
    """A passphrase-protected key (OpenSSH format): the app asks in its dialog, hidden
    input, and connects (before: paramiko 5's TypeError, no dialog)."""
    key = tmp_path / "locked_ed25519"
    key.write_bytes((DEVCLUSTER / "ssh" / "id_ed25519").read_bytes())
    key.chmod(0o600)
    subprocess.run(
        ["ssh-keygen", "-q", "-p", "-N", "pw4tui", "-f", str(key)], check=True, capture_output=True
    )
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[clusters.locked]\nhost = "hpcui-dev"\nssh_config = "{DEVCLUSTER}/ssh/config"\n'
        f'identity_file = "{key}"\nprofile = "dev"\npython = "/usr/bin/python3"\n'
    )
    monkeypatch.setenv("HPCUI_CONFIG", str(cfg))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    import hpcui.clusters.api

    monkeypatch.setattr(hpcui.clusters.api, "_clusters", {})

    async def go():
        app = HpcuiApp("locked", connect=["locked"])
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_prompt(pilot, app, "passphrase dialog")
            modal = app.screen
            hidden = modal.query_one("#answer-0", Input).password
            questions = [q for q, _ in modal.questions]
            await pilot.press(*"pw4tui", "enter")
            await wait_for(
                pilot, lambda: app.hub.conns["locked"].status == "connected", 30, "connected"
            )
            return hidden, questions

    try:
        hidden, questions = asyncio.run(go())
    finally:
        for c in hpcui.clusters.api._clusters.values():
            c.close()
    assert hidden  # typed without echo
    assert questions == [f"Passphrase for {key}: "]


def explode() -> None:
    raise ValueError("bad batch at step 3")


def test_a_failed_job_opens_on_its_traceback_and_a_one_task_job_has_no_rank_counter(dev):
    # issue 23, defects 7 and 11: before, it opened on an empty stdout, header "rank 0/0"
    from textual.widgets import Static, TabbedContent

    failed = dev.submit(explode, name="tui-explode")
    assert failed.wait(timeout=120).value == "FAILED"

    async def go() -> tuple[str, str, str]:
        app = HpcuiApp("dev", connect=["dev"])
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.hub.conns["dev"].status == "connected", 60, "dev")
            app.open_job("dev", failed.job_id)
            await wait_for(pilot, lambda: bool(app.screen.query("#job-tabs")), 30, "job screen")
            screen = app.screen
            tabs = screen.query_one("#job-tabs", TabbedContent)
            result = screen.query_one("#result", Static)
            await wait_for(pilot, lambda: tabs.active == "tab-result", 60, lambda: tabs.active)
            await wait_for(
                pilot, lambda: "bad batch at step 3" in str(result.render()), 60, "traceback"
            )
            head = str(screen.query_one("#job-head", Static).render())
            return tabs.active, str(result.render()), head

    active, result, head = asyncio.run(go())
    assert active == "tab-result" and "ValueError: bad batch at step 3" in result
    assert "FAILED" in head and "rank" not in head


def test_any_jobs_log_hold_release_and_files_from_the_job_screen(dev):
    """Issue 23, features 1, 3 and 4 in the app: a plain sbatch job (not hpcui's) opens
    with its own log followed, H holds and L releases it, F lists its folder."""
    from tests.integration.test_any_job import sbatch_script, wait_state

    tag = uuid.uuid4().hex[:6]
    script = (
        f"#!/bin/bash\n#SBATCH --output=tui-{tag}-%j.out\n"
        'for i in 1 2 3; do echo "plain line $i"; sleep 0.5; done\n'
    )
    job_id = sbatch_script(dev, script, "--hold")

    async def go():
        app = HpcuiApp("dev", connect=["dev"])
        async with app.run_test(size=SIZE) as pilot:
            details = await open_foreign_job(pilot, app, job_id)
            shown = str(details.render())
            panel = app.screen.query_one(LogPanel)  # held: nothing read, and it says why
            await wait_for(pilot, lambda: PENDING_NOTE in panel.lines, 30, "the pending note")
            await pilot.press("H")
            await wait_for(pilot, lambda: dev.control.details(job_id).reason == "JobHeldUser", 30)
            await pilot.press("L")
            await wait_for(
                pilot,
                lambda: dev.control.details(job_id).reason != "JobHeldUser",
                30,
                "released",
            )
            panel = app.screen.query_one(LogPanel)
            await wait_for(
                pilot,
                lambda: "plain line 3" in "\n".join(panel.lines),
                120,
                lambda: f"the log, got {panel.lines[-5:]}; job {job_state(dev, job_id)}",
            )
            await pilot.press("F")
            await wait_for(pilot, lambda: bool(app.screen.query("#files-table")), 30, "files")
            table = app.screen.query_one("#files-table")
            name = f"tui-{tag}-{job_id}.out"
            await wait_for(
                pilot,
                lambda: any(str(table.get_row_at(i)[0]) == name for i in range(table.row_count)),
                30,
                "the log in the folder",
            )
            await pilot.press("escape")
            return shown, list(panel.lines)

    try:
        shown, lines = run_closing(go)
    finally:
        dev.control.cancel([job_id])
    assert f"/tui-{tag}-{job_id}.out" in shown and "work dir" in shown
    assert [line for line in lines if line.startswith("plain line")] == [
        "plain line 1",
        "plain line 2",
        "plain line 3",
    ]
    wait_state(dev, job_id, {JobState.COMPLETED})


def follow_a_plain_job_across(dev, word: str, lines: int, interrupt) -> list[str]:  # type: ignore[no-untyped-def]
    """A running plain sbatch job printing `lines` lines, opened in the app; once two are
    shown, `interrupt(pilot, app)` runs; then every line must arrive. The panel's lines."""
    from tests.integration.test_any_job import sbatch_script, wait_state

    tag = uuid.uuid4().hex[:6]
    script = (
        f"#!/bin/bash\n#SBATCH --output={word}-{tag}-%j.out\n"
        f'for i in $(seq 1 {lines}); do echo "{word} line $i"; sleep 0.5; done\n'
    )
    job_id = sbatch_script(dev, script)
    wait_state(dev, job_id, {JobState.RUNNING})

    async def go():
        app = HpcuiApp("dev", connect=["dev"])
        async with app.run_test(size=SIZE) as pilot:
            await open_foreign_job(pilot, app, job_id)
            panel = app.screen.query_one(LogPanel)
            await wait_for(pilot, lambda: f"{word} line 2" in panel.lines, 60, "the first lines")
            await interrupt(pilot, app)
            panel = app.screen.query_one(LogPanel)
            await wait_for(
                pilot,
                lambda: f"{word} line {lines}" in panel.lines,
                90,
                lambda: f"the rest, got {panel.lines[-5:]}; job {job_state(dev, job_id)}",
            )
            return list(panel.lines)

    try:
        return run_closing(go)
    finally:
        dev.control.cancel([job_id])


def test_a_plain_jobs_log_goes_on_after_the_link_drops(dev):
    """A foreign job's log followed in the app survives a dropped SSH link, every line
    once: the pushed reader restarts from its offset and the polls reconnect."""
    from tests.conftest import session_sshd_pids

    async def drop(pilot, app):  # type: ignore[no-untyped-def]
        cluster = app.ctx.hub.cluster("dev")
        pids = await asyncio.to_thread(session_sshd_pids, cluster.run)
        subprocess.run(["kill", "-9", *map(str, pids)], check=False)

    lines = follow_a_plain_job_across(dev, "drop", 12, drop)
    assert [ln for ln in lines if ln.startswith("drop line")] == [
        f"drop line {i}" for i in range(1, 13)
    ]


def test_a_plain_jobs_log_is_followed_again_when_its_screen_comes_back(dev):
    """Leaving the Job screen stops its log follower; coming back to the same plain sbatch
    job follows it again (it stayed at what it had shown: only hpcui's jobs were
    followed again)."""

    async def away_and_back(pilot, app):  # type: ignore[no-untyped-def]
        await pilot.press("1")  # the Jobs screen: the follower stops
        await pilot.pause(1.0)
        await pilot.press("2")  # back to the same job

    lines = follow_a_plain_job_across(dev, "back", 16, away_and_back)
    assert [ln for ln in lines if ln.startswith("back line")] == [
        f"back line {i}" for i in range(1, 17)
    ]


def add(a, b):
    return a + b


async def add_in_form(pilot, app, fields: dict[str, str], *, preview: str):
    """The Submit form of the app connected to dev, set to call `add` with `fields` (widget
    id -> value), once its preview shows `preview`."""
    await wait_for(pilot, lambda: app.hub.conns["dev"].status == "connected", 60, "dev")
    await pilot.press("3")
    form = app.screen
    form.query_one("#target").value = "tests.integration.test_tui_dev:add"
    for wid, value in fields.items():
        form.query_one(f"#{wid}").value = value
    await wait_for(pilot, lambda: preview in form.preview_text, 15, "preview")
    return form


def test_an_array_from_the_form_runs_as_one_job_array(dev_env):
    """Issue 23, defect 6: the form had no array field. Now [[1, 2], [3, 4], [5, 6]] is
    ONE job array of three elements (one sbatch), each with its own result."""
    from hpcui.clusters.api import connect

    async def go():
        app = HpcuiApp("dev", connect=["dev"])
        async with app.run_test(size=SIZE) as pilot:
            fields = {"array": "[[1, 2], [3, 4], [5, 6]]", "res-time": "5m"}
            await add_in_form(pilot, app, fields, preview="--array=0-2")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: app.current_mode == "job", 60, "jump to the job")
            head = app.screen.query_one("#job-head")  # mounted and showing it, before the
            await wait_for(  # app closes: closing mid-mount is Textual's error, not ours
                pilot, lambda: app.current_job[1] in str(head.render()), 60, "the job shown"
            )
            return app.current_job

    _cluster, first = run_closing(go)
    base = first.split("_")[0]
    dev = connect("dev")
    results = [dev.get_job(f"{base}_{i}").result(timeout=180) for i in range(3)]
    assert first == f"{base}_0" and results == [3, 7, 11]


def test_hold_and_release_several_jobs_from_the_table(dev):
    """Issue 23, feature 3 in the Jobs table: select two pending jobs (any job of the
    user), H holds both with one scontrol, L releases them."""
    from tests.integration.test_any_job import sbatch_script

    ids = [sbatch_script(dev, "#!/bin/bash\ntrue\n", "--begin=now+300") for _ in range(2)]

    async def go():
        app = HpcuiApp("dev", connect=["dev"])
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.hub.conns["dev"].status == "connected", 60, "dev")
            screen = app.screen
            await pilot.press("a")  # all my jobs, not only hpcui's
            table = screen.query_one("#live", JobTable)
            keys = [f"dev:{i}" for i in ids]
            await wait_for(pilot, lambda: all(k in table.shown for k in keys), 60, "rows")

            async def select_both_then(key: str, held: bool, what: str) -> None:
                for row_key in keys:
                    table.move_cursor(row=table.get_row_index(row_key))
                    await pilot.press("space")
                await pilot.press(key)
                await wait_for(
                    pilot,
                    lambda: all(
                        (dev.control.details(i).reason == "JobHeldUser") is held for i in ids
                    ),
                    30,
                    what,
                )

            await select_both_then("H", True, "held")
            await select_both_then("L", False, "released")
            return [dev.control.details(i).reason for i in ids]

    try:
        reasons = run_closing(go)
    finally:
        dev.control.cancel(ids)
    assert all(r in ("BeginTime", "None", "") for r in reasons), reasons


def test_the_table_hears_a_jobs_end_pushed_not_at_the_queues_next_look(dev):
    """With the queue and the status poll both slowed to 5 minutes, the row can only turn
    COMPLETED in time if the job's end was pushed (hpcui.jobs.end_push -> status service ->
    a queue refresh). Before, a job the queue listed was not followed at all."""
    name = f"tuiend{uuid.uuid4().hex[:8]}"
    job = dev.submit(nap, 12, name=name, time="5m")

    async def go():
        app = HpcuiApp("dev", connect=["dev"])
        async with app.run_test(size=SIZE) as pilot:
            table = app.screen.query_one("#live", JobTable)
            key = f"dev:{job.job_id}"
            await wait_for(pilot, lambda: cell(table, key, "state") == "RUNNING", 60, "running")
            cluster = app.hub.conns["dev"].cluster
            watcher, status = cluster.site.queue_watcher, cluster.status
            watcher.interval = watcher._base = 300.0  # a poke brings it back to fast_s
            status.slow_s = status.interval = 300.0
            await wait_for(
                pilot,
                lambda: cell(table, key, "state") == "COMPLETED",
                60,
                lambda: (
                    f"COMPLETED (state {cell(table, key, 'state')}; pushes "
                    f"{status.end_push.pushes}, watching {sorted(status.end_push.watching)}, "
                    f"service {status.get(job.job_id)}, polls {status.polls})"
                ),
            )
            return status.end_push.pushes

    try:
        assert asyncio.run(go()) >= 1
    finally:
        if not job.done():
            job.cancel()


def test_the_forms_status_line_shows_a_registry_imports_progress(dev_env):
    """Issue 32: a registry image is imported on the login node before the first submit
    (minutes for an NGC image); the form's status line follows the runtime's own lines,
    then says why it failed (no registry is reachable here: a stalling loopback one)."""
    from tests.integration.stalling_registry import stalling_registry

    async def go(port: int):
        app = HpcuiApp("dev", connect=["dev"])
        async with app.run_test(size=SIZE) as pilot:
            image = f"docker://127.0.0.1:{port}/slow/img:1"
            fields = {"args": "[1, 2]", "res-time": "5m", "res-container": image}
            form = await add_in_form(pilot, app, fields, preview="enroot")
            await pilot.press("ctrl+s")
            status = form.query_one("#submit-status")
            seen: list[str] = []

            def shown() -> bool:
                text = str(status.render())
                if not seen or seen[-1] != text:
                    seen.append(text)
                return "Importing docker://" in text  # the failure, said last

            await wait_for(pilot, shown, 90, lambda: f"status line, saw {seen}")
            return seen

    with stalling_registry() as port:
        seen = run_closing(lambda: go(port))
    assert "importing the image: [INFO] Querying registry for permission grant" in seen, seen
    assert "failed" in seen[-1]
