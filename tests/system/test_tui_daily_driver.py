"""The app as a daily driver (issue 23), Pilot without a cluster (the `local` box): the
help screen (generated from the bindings, centred, scrolls at 80x24, Esc closes), the
palette, folded arrays, columns chosen by width, the Submit form offline."""

from __future__ import annotations

import asyncio
from datetime import UTC

from textual.binding import Binding
from textual.containers import VerticalScroll

from hpcui.tui.app import JOB_SCREEN_COMMANDS, HpcuiApp
from hpcui.tui.modals import HELP_DETAIL, HelpModal
from hpcui.tui.screens.cluster import ClusterScreen
from hpcui.tui.screens.job import JobScreen
from hpcui.tui.screens.jobs import JobsScreen
from tests.support.pilot import wait_for


def open_help(size: tuple[int, int]):
    async def go():
        app = HpcuiApp()
        async with app.run_test(size=size) as pilot:
            await pilot.press("question_mark")
            await wait_for(pilot, lambda: isinstance(app.screen, HelpModal))
            modal = app.screen
            await pilot.pause(0.3)
            body = modal.query_one("#help-body", VerticalScroll)
            box = modal.query_one("#help").region
            before = body.max_scroll_y
            body.scroll_end(animate=False)
            await pilot.pause(0.2)
            scrolled = body.scroll_y
            text = modal.text()
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, HelpModal))
            return text, box, before, scrolled

    return asyncio.run(go())


def test_help_lists_every_screens_keys_and_scrolls_at_80x24(local_box):
    text, box, max_scroll, scrolled = open_help((80, 24))
    for screen in (JobsScreen, JobScreen, ClusterScreen):
        for b in screen.BINDINGS:
            assert isinstance(b, Binding)
            assert f"| {HELP_DETAIL.get(b.id or '', b.description)} |" in text, (screen, b.key)
    assert "reload quota, partitions and modules" in text  # the Cluster keys
    assert "the log's end" in text and "next search match" in text  # hidden Job keys too
    assert "| `^p` | command palette |" in text
    assert max_scroll > 0 and scrolled == max_scroll  # taller than 24 rows: it scrolls
    assert abs(box.x - (80 - box.right)) <= 1  # centred
    assert box.bottom <= 24


def test_help_is_generated_from_the_bindings(local_box, monkeypatch):
    extra = Binding("z", "noop", "Zap the cache", id="cluster.zap")
    monkeypatch.setattr(ClusterScreen, "BINDINGS", [*ClusterScreen.BINDINGS, extra])
    text, *_ = open_help((160, 45))
    assert "| `z` | Zap the cache |" in text


def test_help_shows_the_users_keymap(local_box):
    local_box.write_text(local_box.read_text() + '\n[keys]\njobs.cancel = "ctrl+k"\n')
    text, *_ = open_help((160, 45))
    assert "| `^k` | cancel (asks first) |" in text  # jobs.cancel, remapped
    assert "| `c` | cancel (asks first) |" in text  # job.cancel, as it was


def test_the_palette_finds_help_and_the_open_jobs_actions(local_box):
    """Issue 23, defect 11: "help" in the palette found nothing, and it had no job actions."""
    from hpcui.tui.modals import ConfirmModal

    async def go():
        app = HpcuiApp()
        async with app.run_test(size=(120, 40)) as pilot:
            before = [c.title for c in app.get_system_commands(app.screen)]
            await pilot.press("ctrl+p")
            await pilot.pause(0.3)
            await pilot.press(*"help")
            await pilot.pause(0.5)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, HelpModal))
            await pilot.press("escape")
            app.ctx.current_job = ("local", "4242")
            commands = {c.title: c for c in app.get_system_commands(app.screen)}
            commands["Cancel job local:4242"].callback()
            await wait_for(
                pilot,
                lambda: isinstance(app.screen, ConfirmModal) and bool(app.screen.query("#no")),
            )
            title = str(app.screen.query_one(".dialog-title").render())
            await pilot.press("escape")  # no: nothing is cancelled
            await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmModal))
            # a Job screen key from the palette: that screen, then its action
            commands["Time limit of job local:4242"].callback()
            await wait_for(pilot, lambda: bool(app.screen.query("#text")), 10)
            prompt = str(app.screen.query_one(".dialog-title").render())
            await pilot.press("escape")
            return before, set(commands), title, prompt

    before, after, title, prompt = asyncio.run(go())
    assert prompt == "New time limit for local:4242"
    assert {f"{t} local:4242" for t, _, _ in JOB_SCREEN_COMMANDS} <= after
    assert "Help" in before and not any(t.endswith("local:4242") for t in before)
    assert {"Open job local:4242", "Cancel job local:4242", "Stop job local:4242",
            "Resubmit job local:4242"} <= after  # fmt: skip
    assert title == "Cancel local:4242?"


# -- arrays: one row each, unfolded on Enter (issue 23, defect 8) ---------------------------


def array_jobs(n: int = 50, pending: int = 8):
    from hpcui.backends.slurm.queue import parse_squeue
    from hpcui.sitestate.jobs import QueueJob
    from tests.conftest import fixture_text

    line = next(
        ln for ln in fixture_text("slurm-constructed/squeue_O.txt").splitlines()
        if ln.startswith("1310|1300|7|")
    )  # fmt: skip
    rest = line.split("|")[3:]
    lines = []
    for i in range(n):
        fields = [str(4000 + i), "3202", str(i), *rest]
        if i >= n - pending:
            fields[7], fields[8] = "PENDING", "Priority"
        lines.append("|".join(fields))
    return [QueueJob.from_entry(e) for e in parse_squeue("\n".join(lines) + "\n")]


def test_a_50_element_array_is_one_row_that_unfolds(local_box):
    from datetime import datetime

    from hpcui.sitestate import QueueSnapshot
    from hpcui.tui.job_table import JobTable
    from hpcui.tui.modals import ConfirmModal
    from hpcui.tui.screens.jobs import JobsScreen, QueueUpdate

    jobs = array_jobs()
    snap = QueueSnapshot(
        jobs=jobs, taken_at=datetime.now(UTC), took_s=0.01, changed=True, next_refresh_s=2
    )

    async def go():
        app = HpcuiApp()
        async with app.run_test(size=(160, 45)) as pilot:
            screen = app.screen
            assert isinstance(screen, JobsScreen)
            screen.hpcui_only = False
            screen.post_message(QueueUpdate("mn5", snap, None))
            table = screen.query_one("#live", JobTable)
            await wait_for(pilot, lambda: table.row_count == 1)
            folded = dict(table.shown[table.keys[0]])
            table.move_cursor(row=0)
            await pilot.press("enter")
            await wait_for(pilot, lambda: table.row_count == 51)
            unfolded = [str(table.shown[k]["id"]) for k in table.keys[:3]]
            table.move_cursor(row=0)
            await pilot.press("c")  # cancel on the array's row: all its elements
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal))
            await pilot.pause(0.2)
            asked = str(app.screen.query_one(".dialog-title").render())
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is screen)
            table.move_cursor(row=0)
            await pilot.press("enter")
            await wait_for(pilot, lambda: table.row_count == 1)
            return folded, unfolded, asked

    folded, unfolded, asked = asyncio.run(go())
    assert str(folded["id"]) == "▸ 3202_[0-49]"
    assert str(folded["why"]) == "42 running · 8 pending · 0 failed"
    assert str(folded["state"]) == "RUNNING"
    assert unfolded == ["▾ 3202_[0-49]", "3202_49", "3202_48"]  # newest first, under its row
    assert asked == "Cancel 50 jobs?"


def test_small_arrays_and_plain_jobs_stay_as_they_are():
    from hpcui.sitestate.arrays import FOLD_MIN
    from hpcui.tui.rows import collapse_arrays, queue_row

    rows = {r.key: r for r in (queue_row("mn5", j) for j in array_jobs(FOLD_MIN - 1, 0))}
    assert collapse_arrays(rows, set()) == rows


def test_a_narrow_terminal_keeps_the_columns_that_matter(local_box):
    """Issue 23, defect 10: at 80x24 the Jobs table lost partition, GPUs and elapsed (the
    reason column took the width); now it chooses columns by width, most wanted first."""
    from tests.unit.test_tui import queue_jobs, show_all_jobs

    async def header(size: tuple[int, int]) -> str:
        app = HpcuiApp()
        async with app.run_test(size=size) as pilot:
            table = await show_all_jobs(pilot, queue_jobs())
            await pilot.pause(0.2)
            return "".join(seg.text for seg in table.render_line(0))

    narrow = asyncio.run(header((80, 24)))
    wide = asyncio.run(header((200, 45)))
    for label in ("id", "name", "state", "elapsed/limit", "GPUs"):
        assert label in narrow, narrow
    assert len(narrow.rstrip()) <= 80
    for label in ("cluster", "reason / start", "partition/qos", "nodes", "GPU%", "elapsed/limit"):
        assert label in wide, wide


# -- the Submit form (issue 23, defect 6, in part) ------------------------------------------


def test_the_form_previews_an_unreachable_cluster_offline_and_esc_leaves_a_field(local_box):
    """The preview of a cluster that is not connected said "connecting…" forever although
    `hpcui script` renders offline; Esc did not leave a field, so `1` was typed into it."""
    from textual.widgets import Input, Select

    local_box.write_text(  # beside `local`: a cluster on a closed loopback port
        local_box.read_text()
        + '\n[clusters.gone]\nhost = "127.0.0.1"\nport = 1\nprofile = "generic"\n'
    )

    async def go():
        app = HpcuiApp()
        async with app.run_test(size=(160, 45)) as pilot:
            await pilot.press("3")
            form = app.screen
            await wait_for(pilot, lambda: bool(form.query("#target")))
            form.query_one("#cluster", Select).value = "gone"
            await pilot.pause(0.5)
            after_pick = app.hub.conns["gone"].status  # picking does not connect
            target = form.query_one("#target", Input)
            target.focus()
            await pilot.press(*"train.py")
            form.query_one("#res-time").value = "10m"
            await wait_for(pilot, lambda: "--time=" in form.preview_text, 15)
            plan = form.plan_text
            await pilot.press("ctrl+s")  # Submit connects first, and says so
            await wait_for(pilot, lambda: app.hub.conns["gone"].status != "idle")
            await pilot.press("escape", "1")
            await wait_for(pilot, lambda: app.current_mode == "jobs")
            return plan, form.preview_text, target.value, after_pick

    plan, script, typed, after_pick = asyncio.run(go())
    assert after_pick == "idle"
    assert "gone is" in plan and "previewed offline" in plan
    assert "#SBATCH --time=00:10:00" in script and "--job-name=train" in script
    assert typed == "train.py"  # the `1` went to the app, not into the field


def footer_and_header(size: tuple[int, int]):
    """Every screen's footer keys (key, left, right) and header text at `size`."""
    from textual.widgets import Header
    from textual.widgets._footer import FooterKey

    async def go():
        app = HpcuiApp()
        out = {}
        async with app.run_test(size=size) as pilot:
            for mode in ("jobs", "job", "submit", "cluster"):
                app.switch_mode(mode)
                await pilot.pause(0.3)
                # composed and laid out (a busy machine takes longer than the pause)
                await wait_for(
                    pilot,
                    lambda: any(k.region.width for k in app.screen.query(FooterKey)),
                    20,
                )
                await pilot.pause(0.2)
                keys = [(k.key, k.region.x, k.region.right) for k in app.screen.query(FooterKey)]
                header = app.screen.query_one(Header)
                out[mode] = (keys, str(header.query_one("HeaderIcon").render()))
                if mode == "submit":
                    form = app.screen.query_one("#submit-form").region
                    pre = app.screen.query_one("#submit-preview").region
                    out["preview"] = (form, pre)
        return out

    return asyncio.run(go())


def test_help_and_quit_stay_in_every_footer_and_the_icon_is_a_common_glyph(local_box):
    """Issue 23, defect 10: at 80x24 the footer lost ? and q (cut at its right end); the
    header's ⭘ icon is missing from browser fonts (an empty box in the web view)."""
    for size in ((80, 24), (160, 45)):
        seen = footer_and_header(size)
        for mode in ("jobs", "job", "submit", "cluster"):
            keys, icon = seen[mode]
            shown = {k: (left, right) for k, left, right in keys if right <= size[0]}
            assert "question_mark" in shown and "q" in shown, (size, mode, keys)
            assert icon.strip() == "≡" and "⭘" not in icon


def test_the_submit_preview_goes_under_the_form_when_narrow(local_box):
    """Issue 23, defect 10: at 80 columns the preview was 15 characters wide."""
    form, pre = footer_and_header((80, 24))["preview"]
    assert pre.width >= 70 and pre.y > form.y
    form, pre = footer_and_header((160, 45))["preview"]
    assert pre.x > form.x and pre.width >= 80  # wide: side by side as before


def _luminance(hex_colour: str) -> float:
    def channel(c: int) -> float:
        v = c / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def test_every_state_colour_is_readable_on_the_dark_background(local_box):
    """Issue 23, defect 10: the header's state was dark blue on near-black in the web
    view (ANSI blue). Every state colour is an explicit colour with WCAG contrast >= 4.5
    on the background the app paints (its dark theme's, read from the running app)."""
    from hpcui.tui.rows import STATE_STYLE

    async def background() -> str:
        app = HpcuiApp()
        async with app.run_test(size=(80, 24)):
            return app.screen.styles.background.hex

    bg = _luminance(asyncio.run(background())[:7])
    for state, style in STATE_STYLE.items():
        colour = style.split()[-1]
        assert colour.startswith("#"), (state, style)  # not an ANSI name
        fg = _luminance(colour)
        assert (max(fg, bg) + 0.05) / (min(fg, bg) + 0.05) >= 4.5, (state, colour)


def submit_form_session(local_box, fill):
    """The Submit form with `fill(form)` applied; returns what the form shows after."""
    from textual.widgets import Input

    local_box.write_text(
        local_box.read_text()
        + '\n[clusters.mn5]\nhost = "127.0.0.1"\nport = 1\nprofile = "mn5-acc"\n'
        + '[clusters.mn5.defaults]\nqos = "acc_debug"\naccount = "ehpc01"\n'
    )

    async def go():
        app = HpcuiApp()
        async with app.run_test(size=(160, 45)) as pilot:
            await pilot.press("3")
            form = app.screen
            await wait_for(pilot, lambda: bool(form.query("#target")))
            form.query_one("#cluster").value = "mn5"
            form.query_one("#target", Input).value = "train.py"
            # the cluster's defaults reached the form and a preview was drawn (under load
            # a fixed pause alone was not always enough)
            await wait_for(
                pilot,
                lambda: (
                    form.query_one("#res-qos", Input).placeholder == "acc_debug"
                    and bool(form.preview_text)
                ),
                30,
            )
            await fill(form, pilot)
            await pilot.pause(0.8)
            errors = {str(e.id): str(e.render()) for e in form.query(".field-error") if e.display}
            holders = {str(b.id): b.placeholder for b in form.query("#resources Input")}
            return form.preview_text, form.plan_text, errors, holders

    return asyncio.run(go())


def test_placeholders_say_the_default_that_will_be_used(local_box):
    """Issue 23, defect 6: every box said "profile default"; a blank time submits
    without --time, so the box must say so (or show the profile's own time)."""

    async def nothing(form, pilot):
        pass

    script, _plan, errors, holders = submit_form_session(local_box, nothing)
    assert not errors
    assert "profile default" not in " ".join(holders.values())
    assert holders["res-nodes"] == "1" and holders["res-cpus_per_task"].isdigit()
    assert holders["res-qos"] == "acc_debug" and holders["res-account"] == "ehpc01"
    if "--time=" in script:
        assert holders["res-time"][:1].isdigit()
    else:
        assert "no --time" in holders["res-time"]
    assert holders["res-name"] == "train"


def test_json_and_number_errors_show_under_their_own_field_while_typing(local_box):
    """Issue 23, defect 6: errors in the keyword arguments appeared only on submit, under
    the wrong field's name."""

    async def typo(form, pilot):
        form.query_one("#kwargs").value = '{"lr": '
        form.query_one("#res-gpus").value = "four"
        form.query_one("#res-modules").value = "cuda;reboot"

    script, plan, errors, _holders = submit_form_session(local_box, typo)
    assert set(errors) == {"err-kwargs", "err-res-gpus", "err-res-modules"}
    assert "keyword arguments is not valid JSON" in errors["err-kwargs"]
    assert "GPUs (total) must be a whole number" in errors["err-res-gpus"]
    assert "not a module name" in errors["err-res-modules"]
    assert "3 field(s) to fix" in plan and script == ""


def test_ddp_with_torchrun_modules_exclusive_and_an_array_from_the_form(local_box):
    """Issue 23, defect 6: tasks per node, launcher, constraint, exclusive, modules and
    array had no field, so DDP could not be submitted from the form."""
    from textual.widgets import Checkbox, Select

    async def ddp(form, pilot):
        form.query_one("#res-gpus").value = "8"
        form.query_one("#res-nodes").value = "2"
        form.query_one("#res-launcher", Select).value = "torchrun"
        form.query_one("#res-exclusive", Checkbox).value = True
        form.query_one("#res-modules").value = "cuda/12.4 nccl"
        form.query_one("#res-constraint").value = "highmem"
        form.query_one("#array").value = "[[1], [2], [3]]"

    script, plan, errors, _holders = submit_form_session(local_box, ddp)
    assert not errors, errors
    assert script, plan
    assert "#SBATCH --nodes=2" in script and "--exclusive" in script
    assert "#SBATCH --constraint=highmem" in script and "--array=0-2" in script
    assert "module load cuda/12.4 nccl" in script and "torchrun" in script


def test_an_unchanged_array_keeps_its_row_between_refreshes():
    """collapse_arrays' cache: the same element rows give back the same array row (no tally,
    no repaint); one changed element, or unfolding, gives a new one."""
    from dataclasses import replace

    from hpcui.backends.states import JobState
    from hpcui.tui.rows import JobRow, array_key, collapse_arrays, state_text

    def row(i: int, state: JobState) -> JobRow:
        jid = f"77_{i}"
        cells = {"id": jid, "state": state_text(state)}
        return JobRow(
            key=f"dev:{jid}", cluster="dev", job_id=jid, state=state, hpcui=True, cells=cells
        )

    rows = {r.key: r for r in (row(i, JobState.RUNNING) for i in range(8))}
    cache: dict = {}
    key = array_key("dev", "77")
    first = collapse_arrays(rows, set(), cache)[key]
    assert collapse_arrays(dict(rows), set(), cache)[key] is first
    changed = dict(rows)
    changed["dev:77_3"] = replace(rows["dev:77_3"], state=JobState.FAILED)
    second = collapse_arrays(changed, set(), cache)[key]
    assert second is not first and "1 failed" in str(second.cells["why"])
    opened = collapse_arrays(changed, {key}, cache)
    assert opened[key] is not second and "dev:77_0" in opened
