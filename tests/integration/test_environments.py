"""Environments built on the cluster (issue 45, part 2) on the dev cluster's real OpenPBS.

The PBS site's login host runs the site's package index (pypiserver, fed by
scripts/install-deps with humanize and pydantic's wheels) on its own loopback: the login
node reaches it, the compute nodes (other network namespaces) do not, as at JSC. A call
that needs pydantic (installed here, not on the cluster's Python) is refused without env=;
with env="auto" the environment is built on the login node (progress said), the job runs
it on a compute node and returns; a second process uses it without building; a build that
cannot be made says why in the installer's words, and one that never finished is not used.
"""

from __future__ import annotations

import importlib
import textwrap
from collections.abc import Iterator

import pytest

from hpcui.clusters.cluster import Cluster
from hpcui.errors import RemotePythonError, UsageError
from hpcui.submission import containers
from tests.integration.test_pbs_real import SKIPPED
from tests.integration.test_usage_dev import cli

PYDANTIC = importlib.metadata.version("pydantic")
pytestmark = [
    pytest.mark.devcluster,
    pytest.mark.xdist_group("pbs"),
    pytest.mark.skipif(SKIPPED.exists(), reason="the PBS site is skipped on this machine"),
]
INDEX = "http://127.0.0.1:8080/simple/"


@pytest.fixture
def pbs(dev_env) -> Iterator[Cluster]:
    from hpcui.clusters.api import connect

    cluster = connect("pbs")
    yield cluster
    cluster.close()


@pytest.fixture
def model_module(tmp_path, monkeypatch):
    """A local module (by value) whose function uses pydantic."""
    (tmp_path / "envtrain.py").write_text(textwrap.dedent("""
        import pydantic

        class Cfg(pydantic.BaseModel):
            lr: float = 0.1

        def echo(cfg):
            return cfg.lr

        def train(lr):
            import sys
            return [Cfg(lr=lr).lr, pydantic.VERSION, sys.executable]
    """))  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("envtrain")
    del __import__("sys").modules["envtrain"]


def _said() -> tuple[list[str], object]:
    lines: list[str] = []
    return lines, containers.import_progress.set(lines.append)


def _commands(pbs: Cluster, fn, *args, **resources) -> list[str]:
    """The commands a new Cluster (a second process's) runs for one submit."""
    fresh = Cluster(pbs.config)
    seen: list[str] = []
    real = fresh.transport.run

    def run(cmd, *a, **kw):
        seen.append(cmd.decode() if isinstance(cmd, bytes) else str(cmd))
        return real(cmd, *a, **kw)

    fresh.transport.run = run  # type: ignore[method-assign]  # counting, as the agent would
    try:
        fresh.submit(fn, *args, time="2m", **resources).cancel()
    finally:
        fresh.close()
    return seen[:-1]  # the cancel is not the submit's


def _builds(cluster: Cluster, folder: str) -> list[str]:
    """The build logs of one environment: one per build that ran."""
    out = cluster.run(["sh", "-c", f"ls -d {folder}.build-*.log 2>/dev/null; true"]).stdout
    return sorted(out.split())


def test_the_login_node_reaches_the_index_and_a_compute_node_does_not(pbs):
    probe = f"import urllib.request as u; u.urlopen({INDEX!r}, timeout=3); print('REACHED')"
    assert "REACHED" in pbs.run(["python3", "-c", probe]).stdout

    def reach() -> str:
        import urllib.request as u

        try:
            u.urlopen("http://127.0.0.1:8080/simple/", timeout=3)
        except OSError as exc:
            return f"refused: {exc}"
        return "REACHED"

    assert pbs.submit(reach, time="2m").result(timeout=120).startswith("refused")


def test_auto_builds_once_on_the_login_node_and_the_job_runs_it(pbs, model_module):
    # no environment from an earlier run of this test (the site's home outlives it); before
    # this Cluster's first probe, which lists the ready ones
    pbs.run(["sh", "-c", f"rm -rf {pbs.config.remote_base}/envs"]).check()
    with pytest.raises(
        RemotePythonError, match=r"`pydantic` \(pydantic .* here\) is not importable"
    ):
        pbs.submit(model_module.train, 0.5, time="2m")
    lines, token = _said()
    try:
        job = pbs.submit(model_module.train, 0.5, env="auto", time="2m")
    finally:
        containers.import_progress.reset(token)
    said = "\n".join(lines)
    assert "building the environment" in said and f"pydantic=={PYDANTIC}" in said, said
    assert "installing with" in said, said  # the installer's progress, line by line
    assert "environment" in said and "built" in lines[-1], said
    lr, version, executable = job.result(timeout=180)
    assert lr == 0.5 and version == PYDANTIC, (lr, version)
    assert "/envs/" in executable, executable  # the environment's Python, on a compute node
    folder = executable.split("/bin/")[0]
    builds = _builds(pbs, folder)
    assert builds, folder  # its installer's words are kept beside it
    # a second process: the probe lists the environment, nothing is built
    res = cli("-c", "pbs", "submit", f"{model_module.__file__}:train", "--args", "[0.25]",
              "--env", "auto", "--time", "2m", "--wait", "--json")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "building the environment" not in res.stderr, res.stderr
    assert _builds(pbs, folder) == builds  # no build of its own
    # and no round trip of its own: a fresh Cluster's submit with env= runs as many commands
    # as one without (the probe it makes anyway lists the environment)
    with_env = _commands(pbs, model_module.train, 0.75, env="auto")
    without = _commands(pbs, len, "plain")
    assert not any("flock 9" in c for c in with_env), with_env
    assert len(with_env) == len(without), (with_env, without)


def test_a_list_with_a_missing_package_is_refused_in_the_installers_words(pbs):
    with pytest.raises(UsageError) as err:
        pbs.submit(len, "x", env=["no-such-package-hpcui==1.0"], time="2m")
    said = str(err.value)
    assert "Building the environment on pbs failed (install)" in said, said
    assert "no-such-package-hpcui" in said and "nothing was submitted" in said, said


def test_an_environment_that_never_finished_is_not_used(pbs):
    """A build cut off between its rename and its mark (or half way) is built again."""

    def nice() -> tuple[str, str]:
        import sys

        import humanize

        return humanize.intcomma(1234567), sys.executable

    want = ["humanize==4.15.0"]
    said, executable = pbs.submit(nice, env=want, time="2m").result(timeout=180)
    assert said == "1,234,567"
    folder = executable.split("/bin/")[0]
    pbs.run(["rm", f"{folder}/.hpcui-ready"]).check()  # as if cut off before its mark
    fresh = Cluster(pbs.config)  # another process: what its probe finds
    try:
        lines, token = _said()
        try:
            job = fresh.submit(nice, env=want, time="2m")
        finally:
            containers.import_progress.reset(token)
        assert any("building the environment" in line for line in lines), lines
        assert job.result(timeout=180) == ("1,234,567", executable)
    finally:
        fresh.close()


def test_objects_of_a_newer_major_version_are_refused_where_an_older_one_is(pbs, model_module):
    """A real pair: a pydantic 2 model's object travels to an environment of pydantic 1.10."""
    with pytest.raises(RemotePythonError) as err:
        pbs.submit(model_module.echo, model_module.Cfg(lr=0.3), env=["pydantic==1.10.22"],
                   time="2m")  # fmt: skip
    said = str(err.value)
    assert f"objects of `pydantic` travel in this call, made with {PYDANTIC} here" in said, said
    assert "has 1.10.22, an older major version: they will not load there" in said, said


def test_env_build_list_show_and_rm_from_the_command_line(pbs):
    import json

    built = cli("-c", "pbs", "env", "build", "humanize==4.15.0", "--json")
    assert built.returncode == 0, built.stderr
    env = json.loads(built.stdout)
    assert env["requirements"] == ["humanize==4.15.0"], env
    assert env["inodes"] > 50 and env["size_bytes"] > 100_000, env  # a venv and humanize
    listed = json.loads(cli("-c", "pbs", "env", "list", "--json").stdout)
    assert env["key"] in {e["key"] for e in listed}
    table = cli("-c", "pbs", "env", "list").stdout
    assert env["key"] in table and "INODES" in table and "humanize==4.15.0" in table, table
    gone = cli("-c", "pbs", "env", "rm", env["key"][:8])
    assert gone.returncode == 0 and f"removed environment {env['key']}" in gone.stdout, gone
    after = json.loads(cli("-c", "pbs", "env", "list", "--json").stdout)
    assert env["key"] not in {e["key"] for e in after}
    auto = cli("-c", "pbs", "env", "build", "auto")
    assert auto.returncode != 0 and "env build needs the requirements" in auto.stderr
