"""docs/distributed.md shows, per framework, the batch script hpcui renders for a real
site from its profile; this renders them again and fails when the docs drift.

`HPCUI_WRITE_DOCS=1 pytest tests/unit/test_framework_docs.py` rewrites the blocks."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from hpcui.backends.shell import PREVIEW_DIGEST
from hpcui.backends.slurm.script import render_script
from hpcui.profiles import load_profile
from hpcui.request.plan import batch_spec, resolve
from hpcui.request.resources import Resources

DOC = Path(__file__).resolve().parents[2] / "docs" / "distributed.md"
BUNDLE = "HOME/.hpcui/runtime/BUNDLE.zip"
#: block name -> (profile, the request's keywords, the cluster's setup lines)
RENDERS: dict[str, tuple[str, dict[str, Any], list[str]]] = {
    "lightning-mn5-acc": (
        "mn5-acc",
        {"gpus": 8, "time": "2h", "launcher": "lightning", "qos": "acc_normal", "account": "ehpc01"},
        [],
    ),
    "accelerate-lumi-g": (
        "lumi-g",
        {"gpus": 16, "time": "2h", "launcher": "accelerate", "account": "project_465000000",
         "modules": ("pytorch",)},
        ["module use /appl/local/csc/modulefiles"],
    ),
    "deepspeed-puhti": (
        "puhti",
        {"gpus": 8, "time": "2h", "launcher": "deepspeed", "account": "project_2001234",
         "modules": ("pytorch",)},
        [],
    ),
}  # fmt: skip
_BLOCK = re.compile(r"(<!-- rendered: (?P<name>[\w-]+) -->\n```bash\n)(?P<body>.*?)(```)", re.S)


def render(name: str) -> str:
    profile_name, kwargs, setup = RENDERS[name]
    profile = load_profile(profile_name)
    alloc = resolve(Resources.from_kwargs(**kwargs), profile)
    spec = batch_spec(
        alloc, folder="HOME/.hpcui/jobs/TOKEN", token="TOKEN", python="python3",
        setup=setup, pythonpath=(BUNDLE,), verified=((BUNDLE, PREVIEW_DIGEST),),
    )  # fmt: skip
    return render_script(spec)


def test_the_docs_show_the_scripts_hpcui_renders_for_each_framework():
    text = DOC.read_text()
    found = {m["name"]: m["body"] for m in _BLOCK.finditer(text)}
    if os.environ.get("HPCUI_WRITE_DOCS") == "1":
        new = _BLOCK.sub(lambda m: m.group(1) + render(m["name"]) + m.group(4), text)
        DOC.write_text(new)
        found = {m["name"]: m["body"] for m in _BLOCK.finditer(new)}
    assert set(found) == set(RENDERS), f"docs/distributed.md blocks: {sorted(found)}"
    for name in RENDERS:
        assert found[name] == render(name), f"{name}: rerun with HPCUI_WRITE_DOCS=1"


@pytest.mark.parametrize("name", sorted(RENDERS))
def test_each_rendered_script_is_the_frameworks_form(name: str):
    script = render(name)
    launcher = RENDERS[name][1]["launcher"]
    if launcher == "accelerate":  # one agent per node: 8 ranks each on LUMI-G
        assert "--ntasks-per-node=1" in script and "HPCUI_NPROC_PER_NODE=8" in script
        assert "accelerate.commands.launch" in script and "module load pytorch" in script
    else:  # one task per GPU, the framework reads the exported rank variables
        assert "--ntasks-per-node=4" in script and f"# launcher {launcher}:" in script
