"""The public API: `hpcui.__all__` (with the errors users catch) and the modules users import
by name. Everything else is internal (docs/architecture.md, "Public and internal")."""

from __future__ import annotations

import inspect
import subprocess
import sys

import hpcui
from hpcui import errors

PUBLIC_MODULES = ("hpcui.distributed", "hpcui.metrics", "hpcui.live")


def test_every_name_in_all_imports():
    missing = [name for name in hpcui.__all__ if getattr(hpcui, name, None) is None]
    assert missing == []
    assert len(hpcui.__all__) == len(set(hpcui.__all__))


def test_every_error_class_is_exported_from_hpcui():
    classes = {
        n for n, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__
    }
    assert classes and classes <= set(hpcui.__all__)
    assert hpcui.JobFailedError is errors.JobFailedError
    assert issubclass(hpcui.JobFailedError, hpcui.HpcuiError)


def test_the_modules_users_import_by_name_import():
    code = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)\nprint('ok')"
    done = subprocess.run(
        [sys.executable, "-c", code, *PUBLIC_MODULES], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


def test_an_unknown_name_says_so():
    try:
        hpcui.no_such_thing  # noqa: B018
    except AttributeError as e:
        assert "no_such_thing" in str(e)
    else:
        raise AssertionError("hpcui.no_such_thing did not raise")


def test_import_hpcui_stays_light():
    """`import hpcui` loads neither paramiko, textual, pydantic nor torch: the API is lazy."""
    code = "import sys, hpcui\nprint(sorted(m for m in ('paramiko', 'textual', 'pydantic', 'torch') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_no_subpackage_shadows_a_public_name():
    """`hpcui.submit` is the function, also after every internal module was imported: a
    subpackage of the same name would replace it as an attribute of `hpcui` (a folder
    `hpcui/submit/` once did, and `hpcui.submit(fn)` then called a module)."""
    code = (
        "import importlib, pkgutil, hpcui\n"
        "for m in pkgutil.walk_packages(hpcui.__path__, 'hpcui.'):\n"
        "    if not m.name.endswith('__main__'): importlib.import_module(m.name)\n"
        "import inspect\n"
        "bad = [n for n in hpcui.__all__ if inspect.ismodule(getattr(hpcui, n))]\n"
        "print(bad, callable(hpcui.submit), callable(hpcui.connect))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[] True True", done.stdout + done.stderr[-2000:]
