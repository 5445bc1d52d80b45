"""The app's side of containers (issue 32): the Submit form's image field and its preview,
and the Job screen saying which image a job ran in."""

from __future__ import annotations

import asyncio

from hpcui.store.registry import JobRecord, shared_registry
from hpcui.tui.app import HpcuiApp
from hpcui.tui.screens.job import JobScreen
from tests.support.pilot import wait_for


def test_the_form_has_the_container_field_and_previews_the_runtimes_line(local_box):
    from textual.widgets import Input, Select

    local_box.write_text(  # an ASPIRE-like site, not reachable: the preview renders offline
        local_box.read_text() + '\n[clusters.gone]\nhost = "127.0.0.1"\nport = 1\nprofile = "dev"\n'
    )

    async def go():
        app = HpcuiApp()
        async with app.run_test(size=(160, 45)) as pilot:
            await pilot.press("3")
            form = app.screen
            await wait_for(pilot, lambda: bool(form.query("#target")))
            form.query_one("#cluster", Select).value = "gone"
            form.query_one("#target", Input).value = "train.py"
            form.query_one("#res-container", Input).value = "/images/pytorch.sqsh"
            form.query_one("#res-binds", Input).value = "/data:/data:ro"
            await wait_for(pilot, lambda: "enroot-start.sh" in form.preview_text, 15)
            first = form.preview_text, form.plan_text
            form.query_one("#res-container_runtime").value = "pyxis"
            await wait_for(pilot, lambda: "--container-image=" in form.preview_text, 15)
            return first, form.preview_text

    (enroot, plan), pyxis = asyncio.run(go())
    assert "# container: enroot /images/pytorch.sqsh" in enroot
    assert "-m /data:/data:none:x-create=auto,rbind,ro" in enroot
    assert "in enroot image /images/pytorch.sqsh" in plan
    assert "--container-image=/images/pytorch.sqsh --container-name=hpcui-" in pyxis
    assert "--container-mounts=HOME/.hpcui:HOME/.hpcui,/data:/data:ro" in pyxis


def test_the_job_screen_says_which_image_the_job_ran_in(local_box, tmp_path):
    registry = shared_registry()
    registry.add(
        [
            JobRecord(
                cluster="local", token="tok1", array_index=-1, name="train", folder=str(tmp_path),
                num_tasks=1, meta={"container": "apptainer /images/pytorch.sif"},
            )
        ]
    )  # fmt: skip
    registry.set_job_ids("local", "tok1", "4242", False)

    async def go():
        app = HpcuiApp()
        async with app.run_test(size=(160, 45)) as pilot:
            app.open_job("local", "4242")
            await wait_for(pilot, lambda: isinstance(app.screen, JobScreen))

            def details() -> str:
                found = app.screen.query("#details")  # composed a moment after the switch
                return str(found.first().render()) if found else ""

            await wait_for(pilot, lambda: "container" in details(), 15)
            return details()

    details = asyncio.run(go())
    assert "container   apptainer /images/pytorch.sif" in details
