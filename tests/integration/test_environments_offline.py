"""env= on a site whose login node reaches no index (issue 45, part 3): the dev cluster's
Slurm sites (their profile says `env_offline`; the dev index lives on the PBS site's login
host, which they cannot reach). The wheels are resolved and downloaded on this machine, for
the cluster's Python and platform, from this machine's own package source (here the dev
index's wheel folder, through pip's own PIP_FIND_LINKS, as a laptop's pip config would
name PyPI), uploaded (hpcui's folder upload: resumable, files already there skipped) and
installed with no index at all."""

from __future__ import annotations

import importlib
import textwrap
from pathlib import Path

import pytest

from hpcui.submission import containers, environments

pytestmark = pytest.mark.devcluster

PYDANTIC = importlib.metadata.version("pydantic")
WHEELS = Path("/var/lib/hpcui-devcluster/index")


def test_wheels_resolved_here_uploaded_and_installed_with_no_index(dev, tmp_path, monkeypatch):
    (tmp_path / "offtrain.py").write_text(textwrap.dedent("""
        import pydantic

        class Cfg(pydantic.BaseModel):
            lr: float = 0.1

        def train(lr):
            import sys
            return [Cfg(lr=lr).lr, pydantic.VERSION, sys.executable]
    """))  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("offtrain")
    # no environment from an earlier run (the site's home outlives it): this one builds
    base = dev.config.remote_base
    dev.run(["sh", "-c", f"rm -rf {base}/envs {base}/runtime/uv-*"]).check()
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # this machine's package source: the wheel folder
    monkeypatch.setenv("PIP_FIND_LINKS", str(WHEELS))
    monkeypatch.setattr(environments, "wheel_cache", lambda: tmp_path / "cache")
    lines: list[str] = []
    token = containers.import_progress.set(lines.append)
    try:
        job = dev.submit(mod.train, 0.5, env="auto", time="2m", cpus_per_task=1, mem="500M")
    finally:
        containers.import_progress.reset(token)
    said = "\n".join(lines)
    assert "downloading wheels here for dev (Python 3.11, x86_64" in said, said
    assert "Saved" in said and "pydantic_core" in said, said  # pip's own lines, said as they come
    assert "uploaded" in said and "building the environment" in said, said
    assert "installing with uv" in said, said  # uv's Linux binary, uploaded once
    assert f"uploading uv {environments.UV_VERSION}" in said, said
    lr, version, executable = job.result(timeout=180)
    assert (lr, version) == (0.5, PYDANTIC) and "/envs/" in executable, (lr, version, executable)
    base = dev.remote_info().base
    there = dev.run(["sh", "-c", f"ls {base}/envs/wheels"]).stdout.split()
    assert any(w.startswith(f"pydantic-{PYDANTIC}-") for w in there), there
    assert any(w.startswith("pydantic_core-") and "manylinux" in w for w in there), there
