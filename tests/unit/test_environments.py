"""env= (hpcui.submission.environments): what a request becomes, and the login node's build
script run here by real bash, a real `python3 -m venv` and real pip, installing from the
dev index's wheel folder (scripts/install-deps fills it) with no index at all (pip's and
uv's own settings say so: nothing here leaves the machine)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hpcui.errors import UsageError
from hpcui.submission.env_layers import over_modules
from hpcui.submission.environments import (
    READY,
    EnvSpec,
    build_script,
    env_key,
    failure,
    spec_of,
)
from hpcui.submission.needs import Need

WHEELS = Path("/var/lib/hpcui-devcluster/index")
HUMANIZE = "humanize==4.15.0"


def test_auto_pins_what_the_call_uses_but_optional_imports():
    needs = [Need("pydantic", "pydantic", "2.14.4"), Need("wandb", "wandb", "0.1", optional=True)]
    spec = spec_of(["auto"], needs)
    assert spec == EnvSpec(("pydantic==2.14.4",), pins=(("pydantic", "2.14.4"),), auto=True)
    with pytest.raises(UsageError, match="found no installed package"):
        spec_of(["auto"], [])


def test_lists_files_and_existing_environments(tmp_path):
    assert spec_of([HUMANIZE, "rich>=13"], []).pins == (("humanize", "4.15.0"),)
    req = tmp_path / "requirements.txt"
    req.write_text(f"# pinned\n{HUMANIZE}  # why\n\nrich[jupyter]>=13,<16\n")
    assert spec_of([str(req)], []).requirements == (HUMANIZE, "rich[jupyter]>=13,<16")
    assert spec_of(["~/venvs/t"], []).existing == "~/venvs/t/bin/python"
    assert spec_of(["/sw/py/bin/python3.11"], []).existing == "/sw/py/bin/python3.11"
    for bad in (["--index-url=http://x"], ["rich; rm -rf ~"], ["git+https://x/y"]):
        with pytest.raises(UsageError, match="is not a requirement"):
            spec_of(bad, [])


def test_the_key_changes_with_what_decides_the_content():
    a = EnvSpec((HUMANIZE,))
    assert env_key(a, "3.11.2", "", "") == env_key(EnvSpec((HUMANIZE,)), "3.11.2", "", "")
    assert len({env_key(a, "3.11.2", "", ""), env_key(a, "3.11.9", "", ""),
                env_key(a, "3.11.2", "http://mirror/simple/", ""),
                env_key(EnvSpec(("humanize",)), "3.11.2", "", "")}) == 4  # fmt: skip


def test_auto_over_modules_installs_only_what_they_lack():
    """A site's pytorch module gives torch (at its own version: built for the site's GPUs)
    and lightning; only humanize is installed, and the key follows what the module gave."""
    needs = [Need("torch", "torch", "2.13.0"), Need("lightning", "lightning", "2.6.6"),
             Need("humanize", "humanize", "4.15.0")]  # fmt: skip
    spec = spec_of(["auto"], needs)
    there = {"torch": (True, "2.5.1"), "lightning": (True, "2.6.6"), "humanize": (False, "-")}
    layered = over_modules(spec, needs, there, ("pytorch",))
    assert layered is not None and layered.requirements == (HUMANIZE,)
    assert layered.pins == (("humanize", "4.15.0"),) and layered.over == ("pytorch",)
    assert layered.provided == (("lightning", "2.6.6"), ("torch", "2.5.1"))
    newer = over_modules(spec, needs, {**there, "torch": (True, "2.6.0")}, ("pytorch",))
    plain = EnvSpec((HUMANIZE,), pins=(("humanize", "4.15.0"),), auto=True)
    keys = {env_key(s, "3.11.2", "", "") for s in (layered, newer, plain)}
    assert newer is not None and len(keys) == 3  # a module updated in place: a new build
    assert over_modules(spec, needs, {**there, "humanize": (True, "4.9")}, ("pytorch",)) is None


def _build(
    folder: Path, spec: EnvSpec, uv: str = "", uv_sha: str = "", pack: bool = False,
    python: str = sys.executable,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    script = build_script(folder=str(folder), python=python, setup=[], spec=spec,
                          uv=uv, uv_sha=uv_sha, pack=pack, log=str(folder) + ".log")  # fmt: skip
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELS),
           "UV_NO_INDEX": "1", "UV_FIND_LINKS": str(WHEELS)}  # fmt: skip
    env.pop("PIP_INDEX_URL", None)
    env["PATH"] = "/usr/bin:/bin"  # no uv here: pip is the fallback under test
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env,
                          timeout=300)  # fmt: skip


@pytest.mark.skipif(not WHEELS.is_dir(), reason="scripts/install-deps fills the dev index")
def test_a_build_is_checked_renamed_into_place_and_used_once(tmp_path):
    folder = tmp_path / "envs" / "k1"
    spec = spec_of([HUMANIZE], [])
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(_build(folder, spec).stdout))
               for _ in range(2)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    states = sorted(out.strip().splitlines()[-1] for out in results)
    assert states == ["HPCUI_ENV=built", "HPCUI_ENV=ready"], results  # one built, one waited
    assert (folder / READY).exists() and not list(folder.parent.glob("k1.part-*"))
    ran = subprocess.run([str(folder / "bin" / "python"), "-c",
                          "import humanize; print(humanize.intcomma(1234))"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert ran.stdout.strip() == "1,234", ran.stderr


@pytest.mark.skipif(not WHEELS.is_dir(), reason="scripts/install-deps fills the dev index")
def test_a_failed_build_leaves_nothing_and_says_the_installers_words(tmp_path):
    folder = tmp_path / "envs" / "k2"
    res = _build(folder, spec_of(["no-such-package-hpcui==1.0"], []))
    out = res.stdout[res.stdout.index("HPCUI_ENV=") :]
    assert out.startswith("HPCUI_ENV=failed:install"), res.stdout
    assert not folder.exists() and not list(folder.parent.glob("k2.part-*"))
    said = failure(out, cluster="dev", python="python3")
    assert "No matching distribution found for no-such-package-hpcui==1.0" in said, said
    assert "nothing was submitted" in said


@pytest.mark.skipif(not WHEELS.is_dir(), reason="scripts/install-deps fills the dev index")
def test_an_environment_without_its_mark_is_built_again(tmp_path):
    folder = tmp_path / "envs" / "k3"
    folder.mkdir(parents=True)
    (folder / "half-written").write_text("a build killed between its rename and its mark")
    assert _build(folder, spec_of([HUMANIZE], [])).stdout.strip().endswith("HPCUI_ENV=built")
    assert not (folder / "half-written").exists()


def test_wheels_are_picked_for_the_clusters_glibc_and_machine():
    from hpcui.submission.environments import platforms

    tags = platforms("aarch64", "2.28")
    assert tags[0] == "manylinux_2_17_aarch64" and "manylinux_2_28_aarch64" in tags
    assert "manylinux_2_29_aarch64" not in tags and tags[-1] == "manylinux2014_aarch64"
    assert platforms("x86_64", "-") == ["manylinux_2_17_x86_64", "manylinux2014_x86_64"]


def test_a_job_in_an_environment_marks_its_use_as_it_starts():
    from hpcui.backends.batch import BatchSpec
    from hpcui.backends.pbs import script as pbs_script
    from hpcui.backends.slurm import script as slurm_script

    env = "/home/u/.hpcui/envs/0123456789abcdef"
    spec = BatchSpec(folder="/f", token="t", name="n", python=f"{env}/bin/python", env_folder=env)
    for text in (slurm_script.render_script(spec), pbs_script.render_script(spec)):
        assert f"touch {env}/.hpcui-used 2>/dev/null || true" in text
    plain = BatchSpec(folder="/f", token="t", name="n")
    assert ".hpcui-used" not in slurm_script.render_script(plain)


@pytest.mark.skipif(not WHEELS.is_dir(), reason="scripts/install-deps fills the dev index")
def test_uv_from_its_wheel_builds_and_a_changed_binary_is_not_run(tmp_path, monkeypatch):
    import hashlib

    from hpcui.submission.environments import fetch_uv

    monkeypatch.setenv("PIP_NO_INDEX", "1")  # this machine's package source: the wheel folder
    monkeypatch.setenv("PIP_FIND_LINKS", str(WHEELS))
    said: list[str] = []
    uv = fetch_uv("x86_64", tmp_path / "cache", said.append)
    assert uv is not None and uv.exists(), said
    sha = hashlib.sha256(uv.read_bytes()).hexdigest()
    folder = tmp_path / "envs" / "k4"
    res = _build(folder, spec_of([HUMANIZE], []), uv=str(uv), uv_sha=sha)
    assert res.stdout.strip().endswith("HPCUI_ENV=built"), res.stdout
    log = Path(str(folder) + ".log").read_text()
    assert "installing with uv" in log and "installing with pip" not in log, log
    # a binary that is not the one sent is never run: pip builds instead
    other = tmp_path / "envs" / "k5"
    res = _build(other, spec_of([HUMANIZE], []), uv=str(uv), uv_sha="0" * 64)
    assert res.stdout.strip().endswith("HPCUI_ENV=built"), res.stdout
    log = Path(str(other) + ".log").read_text()
    assert "is not the one hpcui sent: pip instead" in log and "installing with pip" in log


def _files(folder: Path) -> int:
    return sum(1 for _ in folder.rglob("*"))


@pytest.mark.skipif(not WHEELS.is_dir(), reason="scripts/install-deps fills the dev index")
def test_a_pure_python_environment_packs_into_one_zip_a_compiled_one_stays_a_folder(tmp_path):
    """env_pack = "zip" (inode quotas): humanize's environment (pip and all) becomes a few
    files and still imports; pydantic's compiled core cannot load from a zip: not packed."""
    from hpcui.submission.environments import PACKED

    plain, packed = tmp_path / "envs" / "p1", tmp_path / "envs" / "p2"
    assert _build(plain, spec_of([HUMANIZE], [])).stdout.strip().endswith("HPCUI_ENV=built")
    res = _build(packed, spec_of([HUMANIZE], []), pack=True)
    assert res.stdout.strip().endswith("HPCUI_ENV=built"), res.stdout
    assert (packed / PACKED).is_file() and _files(packed) < _files(plain) / 20, (
        _files(packed), _files(plain),
    )  # fmt: skip
    ran = subprocess.run([str(packed / "bin" / "python"), "-c",
                          "import humanize, importlib.metadata as m; "
                          "print(humanize.intcomma(1234), m.version('humanize'), humanize.__file__)"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    got = ran.stdout.split()
    assert got[:2] == ["1,234", "4.15.0"] and PACKED in got[2], ran.stderr
    compiled = tmp_path / "envs" / "p3"
    res = _build(compiled, spec_of(["pydantic==2.14.4"], []), pack=True)
    assert res.stdout.strip().endswith("HPCUI_ENV=built"), res.stdout
    log = Path(str(compiled) + ".log").read_text()
    assert "not packed into one file" in log and not (compiled / PACKED).exists(), log


def test_jupyter_with_env_asks_for_jupyterlab_in_it():
    """`hpcui jupyter --env ...` runs JupyterLab in the environment env= builds: it must be
    among what is asked (refused before any round trip), and then no probe of the
    cluster's own Python is made."""
    from types import SimpleNamespace

    from hpcui.services.web import KINDS, check_installed

    no_cluster = SimpleNamespace(name="dev", setup=[], python="python3")  # never asked
    with pytest.raises(UsageError, match="does not ask for jupyterlab: add it"):
        check_installed(no_cluster, KINDS["jupyter"], env=["humanize==4.15.0"])
    assert check_installed(no_cluster, KINDS["jupyter"], env=["jupyterlab==4.4.0"]) is None


def test_a_pyproject_or_a_uv_lock_is_what_is_installed(tmp_path):
    project = tmp_path / "pyproject.toml"
    project.write_text(
        '[project]\nname = "mytrain"\nversion = "0.1"\n'
        'dependencies = ["humanize>=4", "tomli>=2 ; python_version < \\"3.11\\""]\n'
    )
    assert spec_of([str(project)], []).requirements == (
        "humanize>=4",
        'tomli>=2 ; python_version < "3.11"',
    )
    lock = tmp_path / "uv.lock"
    lock.write_text(
        'version = 1\n\n[[package]]\nname = "humanize"\nversion = "4.15.0"\n'
        'source = { registry = "https://pypi.org/simple" }\n\n'
        '[[package]]\nname = "mytrain"\nversion = "0.1"\nsource = { editable = "." }\n'
    )
    spec = spec_of([str(lock)], [])
    assert spec.requirements == (HUMANIZE,) and spec.pins == (("humanize", "4.15.0"),)
    empty = tmp_path / "other" / "pyproject.toml"
    empty.parent.mkdir()
    empty.write_text('[project]\nname = "x"\n')
    with pytest.raises(UsageError, match="names no dependency"):
        spec_of([str(empty)], [])


@pytest.mark.skipif(not WHEELS.is_dir(), reason="scripts/install-deps fills the dev index")
def test_a_layer_over_a_module_that_is_a_venv_sees_its_packages_and_adds_the_rest(tmp_path):
    """The dev site's pytorch module is a venv, as many sites' are: the layer's Python sees
    the module's packages (a .pth names its site folder), and pip installs only what is
    missing: typing-inspection, not the typing-extensions it requires (the module has it)."""
    module = tmp_path / "module-venv"
    subprocess.run([sys.executable, "-m", "venv", str(module)], check=True, timeout=120)
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELS)}
    subprocess.run([str(module / "bin" / "python"), "-m", "pip", "install", "--quiet",
                    "typing-extensions==4.16.0", "six==1.17.0"], check=True, env=env,
                   timeout=300)  # fmt: skip
    spec = EnvSpec(("typing-inspection==0.4.5",), pins=(("typing-inspection", "0.4.5"),),
                   auto=True, over=("pytorch",))  # fmt: skip
    folder = tmp_path / "envs" / "over"
    res = _build(folder, spec, python=str(module / "bin" / "python"))
    assert res.stdout.strip().endswith("HPCUI_ENV=built"), res.stdout + res.stderr
    ran = subprocess.run(
        [str(folder / "bin" / "python"), "-c",
         "import six, typing_extensions, typing_inspection; print(typing_extensions.__file__)"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().startswith(str(module)), ran.stdout  # the module's own copy
    layer_files = {p.name for p in (folder / "lib").glob("python3*/site-packages/*")}
    assert any(n.startswith("typing_inspection") for n in layer_files), layer_files
    assert not any(n.startswith("typing_extensions") for n in layer_files), layer_files
