"""Issue 35, "a notebook that shows the job live": a real notebook executed by nbclient in a
real IPython kernel against the local box (real local jobs). A cell that shows a Job (and
the list `map` returns) ends at once; its output is then updated in place by the display's
thread — recorded here as the kernel's `update_display_data` messages — through RUNNING
with the log's last lines to the result, or to the traceback of a job that raised; a sweep
shows its results table the same way (issue 59)."""

from __future__ import annotations

import nbformat
from nbclient import NotebookClient

from tests.conftest import ROOT

TASKS = """
import time

def train(steps):
    for step in range(1, steps + 1):
        print(f"step={step} loss={1 / step:.3f}", flush=True)
        time.sleep(1)
    return steps * steps

def square(x):
    return x * x

def boom():
    time.sleep(1)
    raise ValueError("on purpose")
"""

CELLS = [
    "import sys, time\nsys.path.insert(0, {tmp!r})\nimport hpcui\nfrom nbtasks import train, square, boom\n"
    "box = hpcui.connect('box')",
    "job = box.submit(train, 4)\nshown_at = time.monotonic()\njob",
    "squares = box.map(square, range(3))\nsquares",
    "bad = box.submit(boom)\nbad",
    "sw = hpcui.sweep(train, grid={{'steps': [2, 3]}}, name='nb-sweep', cluster=box)\nsw",
    "import hpcui.live\nprint('cell 2 ended', round(time.monotonic() - shown_at, 1), 's after the display')\n"
    "print('settled', hpcui.live.settle(120))",
    "print(repr(job))",
]


class Recording(NotebookClient):
    """nbclient as is, keeping every display update it applies (text/plain by display id)."""

    updates: dict[str, list[str]]

    def _update_display_id(self, display_id, msg):
        if msg["header"]["msg_type"] == "update_display_data":
            self.updates.setdefault(display_id, []).append(msg["content"]["data"]["text/plain"])
        return super()._update_display_id(display_id, msg)


def test_a_job_in_a_cell_updates_itself_until_its_result(tmp_path, monkeypatch):
    (tmp_path / "c.toml").write_text(
        f'[clusters.box]\nscheduler = "local"\nremote_base = "{tmp_path}/base"\n'
    )
    (tmp_path / "nbtasks.py").write_text(TASKS)
    for name, value in {
        "HPCUI_CONFIG": str(tmp_path / "c.toml"), "HPCUI_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": str(ROOT), "HPCUI_AGENT": "off",
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c.format(tmp=str(tmp_path))) for c in CELLS]
    client = Recording(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.updates = {}
    client.execute()

    def shown(cell):  # the display's output as saved (after every update), and its id
        (out,) = [o for o in nb.cells[cell].outputs if o["output_type"] == "display_data"]
        (display_id,) = [d for d, where in client._display_id_map.items() if cell in where]
        return out["data"]["text/plain"], out["data"]["text/html"], display_id

    text, page, display_id = shown(1)
    updates = client.updates[display_id]
    assert "COMPLETED" in text and "returned 16" in text, text
    assert "<b>box:" in page and "returned 16" in page
    running = [u for u in updates if " · RUNNING" in u]
    assert running, updates  # seen running, with the log's last lines under it
    assert any("step=" in u for u in running), running
    assert updates[-1] == text

    text, _, display_id = shown(2)
    assert text.startswith("box: 3 jobs (3 ended) · 3 COMPLETED"), text
    assert client.updates[display_id]

    text, _, _ = shown(3)
    assert "FAILED" in text and "raised on the cluster" in text, text
    assert "ValueError: on purpose" in text and "nbtasks.py" in text

    text, page, display_id = shown(4)  # the sweep's table, live to its results
    assert text.startswith("sweep nb-sweep on box: 2 elements · 2 COMPLETED"), text
    header, *rows = text.splitlines()[1:]
    assert header.split()[:3] == ["steps", "state", "result"], header
    assert [r.split()[:3] for r in rows] == [["2", "COMPLETED", "4"], ["3", "COMPLETED", "9"]]
    assert (
        "metric.loss" in header and rows[1].split()[header.split().index("metric.loss")] == "0.333"
    )
    assert "<th>metric.loss</th>" in page and "<td>9</td>" in page
    assert any("RUNNING" in u or "PENDING" in u for u in client.updates[display_id]), client.updates

    printed = "".join(o.get("text", "") for o in nb.cells[5].outputs)
    after = float(printed.split("cell 2 ended ")[1].split(" s")[0])
    assert after < 3.5, printed  # the kernel was not blocked: the next cells ran at once
    assert "settled True" in printed
    assert "COMPLETED" in "".join(o.get("text", "") for o in nb.cells[6].outputs)


def test_outside_jupyter_a_job_is_its_plain_text(local_box, capsys):
    import hpcui
    import hpcui.live

    job = hpcui.connect("local").submit(int, "7")
    job.wait(60)
    assert hpcui.live.show(job) is None  # no kernel here: nothing to update
    job._ipython_display_()
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"Job(local:{job.job_id}, COMPLETED)"] * 2
