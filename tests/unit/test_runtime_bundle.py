"""The runtime bundle: what the compute node imports, shipped once per content hash."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile

from hpcui.submission.runtime_bundle import BUNDLED, _sources, build_bundle


def _names() -> list[str]:
    _digest, data = build_bundle()
    return zipfile.ZipFile(io.BytesIO(data)).namelist()


def test_deterministic_and_addressed_by_content():
    digest, data = build_bundle()
    build_bundle.cache_clear()
    again, data2 = build_bundle()
    assert (digest, data) == (again, data2) and len(digest) == 16


def test_holds_what_the_node_imports_and_not_the_faces():
    names = _names()
    assert len(names) == len(set(names))  # an installed hpcui holds backends once, not twice
    for needed in (
        "submitit/core/_submit.py",
        "cloudpickle/__init__.py",
        "typing_extensions.py",
        "hpcui/node/torchrun.py",
        "hpcui/distributed.py",
        "hpcui/node/signed.py",
        "hpcui/backends/job_paths.py",
        "hpcui/backends/launch.py",
        "hpcui/profiles/mn5-acc.toml",
    ):
        assert needed in names, needed
    assert not [n for n in names if n.startswith(("hpcui/tui/", "backends/")) or "__pycache__" in n]
    assert set(BUNDLED) >= {"hpcui", "hpcui.backends"}


def test_the_hpcui_backends_sources_are_named_under_hpcui():
    assert all(name.startswith("hpcui/backends/") for name in _sources("hpcui.backends"))


def test_a_fresh_interpreter_imports_the_compute_side_from_the_zip_alone(tmp_path):
    _digest, data = build_bundle()
    bundle = tmp_path / "bundle.zip"
    bundle.write_bytes(data)
    code = (
        "import sys; sys.path[:] = [p for p in sys.path if 'site-packages' not in p]\n"
        "import hpcui.backends.slurm.script, hpcui.node.torchrun, hpcui.distributed, submitit\n"
        "import hpcui.backends as b; print(b.__file__)"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code],
        env={"PYTHONPATH": str(bundle)},
        cwd=tmp_path,  # not the checkout: its hpcui/ folder would come first
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(str(bundle))
