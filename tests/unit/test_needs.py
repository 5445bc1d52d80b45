"""What a call needs on the cluster (hpcui.submission.needs): the installed distributions
its pickle refers to, read while hpcui's own Pickler writes it; a script's imports read
with `ast`; what a real Python says of them (python_command, run here by this machine's
interpreter); and what is refused or warned about."""

from __future__ import annotations

import importlib.metadata as metadata
import subprocess
import sys

import pytest
from pydantic import BaseModel
from rich.text import Text

from hpcui.store import remote
from hpcui.submission.needs import Need, References, problems, refusal
from hpcui.submission.pickling import pickle_calls

RICH = metadata.version("rich")
PYDANTIC = metadata.version("pydantic")


class Point(BaseModel):  # travels by value (a test module), its base class by reference
    x: int = 0


def uses_rich_inside() -> str:
    import rich  # noqa: F401 - what the check must see: an import in the body

    return "ok"


def optional_rich() -> str:
    try:
        import rich  # noqa: F401
    except ImportError:
        return "without"
    return "with"


def plain(a: int) -> int:
    import json  # the standard library: never asked about

    return a + len(json.dumps(a))


def _needs(fn, *args) -> dict[str, Need]:
    got: list[Need] = []
    pickle_calls(fn, [(args, {})], needs=got)
    return {n.module: n for n in got}


def test_a_class_passed_in_is_needed_by_name_an_object_with_its_objects():
    by_name = _needs(plain, 1)
    assert by_name == {}  # stdlib, and this module's own code by value
    with_class = _needs(len, Text)
    assert with_class["rich"] == Need("rich", "rich", RICH, objects=False)
    with_object = _needs(len, Text("hi"))
    assert with_object["rich"].objects  # a Text instance travels: its version matters


def test_an_object_of_the_users_own_model_needs_pydantic():
    """With the caller's own code by value, its model class travels with it, and its base
    class, pydantic's, by reference: pydantic must be there."""
    got = _needs(plain, Point(x=3))
    assert got["pydantic"].version == PYDANTIC, got
    assert got["pydantic"].objects  # its base class's format is the object's too
    assert set(got) <= {"pydantic", "pydantic_core", "typing_extensions"}, got


def test_an_import_in_the_body_is_needed_one_inside_a_try_is_optional():
    assert _needs(uses_rich_inside)["rich"] == Need("rich", "rich", RICH)
    assert _needs(optional_rich)["rich"].optional


def test_a_scripts_imports_are_read_not_run():
    from hpcui.node.runscript import run_script

    source = (
        "import os, rich.text\nfrom pydantic import BaseModel\nfrom . import sibling\n"
        "try:\n    import humanize_not_here\nexcept ImportError:\n    pass\n"
        "raise SystemExit('never run here')\n"
    )
    got = _needs(run_script, source, "train.py", [])
    assert set(got) == {"rich", "pydantic"}, got  # not installed here: not a distribution
    refs = References()
    refs.script(source)
    assert refs.optional == {"humanize_not_here"}
    refs.script("def broken(:\n")  # a syntax error is the job's to report, not the check's


def test_the_cluster_python_is_asked_in_one_command():
    cmd = remote.python_command(sys.executable, {"rich": "rich", "no_such_mod_xyz": "nope"})
    res = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=60)
    said = remote.parse_modules(res.stdout.splitlines())
    assert said == {"rich": (True, RICH), "no_such_mod_xyz": (False, "-")}, res
    assert res.stdout.startswith("PY=3.")
    with pytest.raises(ValueError, match="not a module"):
        remote.python_command("python3", {"x; rm -rf ~": "x"})


def test_missing_is_refused_with_the_way_out_a_version_apart_is_warned():
    needs = [
        Need("transformers", "transformers", "4.46.3"),
        Need("rich", "rich", "13.9.4", objects=True),
        Need("wandb", "wandb", "0.19.1", optional=True),
    ]
    there = {"transformers": (False, "-"), "rich": (True, "13.8.1"), "wandb": (False, "-")}
    refused, warned = problems(needs, there, cluster="dev", python="/usr/bin/python3")
    assert refused == [
        "`transformers` (transformers 4.46.3 here) is not importable by dev's Python "
        "(/usr/bin/python3)"
    ]
    assert "objects of `rich` travel" in warned[0] and "13.8.1" in warned[0]
    assert "inside a try" in warned[1]
    said = refusal(refused, needs, "/usr/bin/python3")
    assert "/usr/bin/python3 -m pip install --user transformers==4.46.3" in said
    assert "rich==" not in said and "Nothing was submitted" in said
    newer = problems([Need("pydantic", "pydantic", "2.14.4", objects=True)],
                     {"pydantic": (True, "1.10.22")}, cluster="dev", python="p")  # fmt: skip
    assert "has 1.10.22, an older major version: they will not load there" in newer[0][0]
    older = problems([Need("numpy", "numpy", "1.26.4", objects=True)],
                     {"numpy": (True, "2.1.0")}, cluster="dev", python="p")  # fmt: skip
    assert older[0] == [] and "may not load" in older[1][0]  # numpy 2 loads 1.x's arrays
    # the same minor version, or only names travelling: nothing to say
    ok = problems([Need("rich", "rich", "13.9.1", objects=True)], {"rich": (True, "13.9.4")},
                  cluster="dev", python="p")  # fmt: skip
    assert ok == ([], [])
