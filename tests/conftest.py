"""Shared fixtures. Integration tests use the real dev cluster (scripts/devcluster up)."""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEVCLUSTER = ROOT / ".devcluster"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
TEST_USER_HOME = Path("/home/hpcuser")
#: the dev cluster's sites: Debian 12's Slurm 22.05 + Lmod 8.6, and Debian 13's Slurm 24.11 +
#: Lmod 8.7 in its own root filesystem (scripts/devcluster_dev24.py); tests that matter run on both
SITES = ("dev", "dev24")
NODE_PREFIX = {"dev": "node", "dev24": "dev24n"}
SITE_HOMES = {
    "dev": TEST_USER_HOME,
    "dev24": Path("/var/lib/hpcui-devcluster/dev24/rootfs/home/hpcuser"),
}


def fixture_text(rel: str) -> str:
    return (FIXTURES / rel).read_text(encoding="utf-8")


@pytest.fixture(scope="session", autouse=True)
def _no_agent_in_process():
    """In-process API and app tests connect by themselves (`HPCUI_AGENT=off`, the mode
    `[agent] persist = 0` gives users): fault tests cut, count and restart *their*
    connection. The agent path has its own tests (test_agent.py), and every subprocess
    test that builds its environment from scratch (test_cli.py) goes through the agent."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HPCUI_AGENT", "off")
        yield


@pytest.fixture(scope="session", autouse=True)
def _session_data_dir(tmp_path_factory: pytest.TempPathFactory):
    """Module- and session-scoped fixtures are set up before the per-test one below: they
    get a registry of their own too, never the user's real one."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HPCUI_DATA_DIR", str(tmp_path_factory.mktemp("hpcui-data-session")))
        yield


@pytest.fixture(autouse=True)
def _isolated_data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Each test gets its own registry: tests never touch the user's real one."""
    monkeypatch.setenv("HPCUI_DATA_DIR", str(tmp_path_factory.mktemp("hpcui-data")))


@pytest.fixture(autouse=True)
def _cluster_lock(request: pytest.FixtureRequest):
    """Dev-cluster tests share the cluster; a test that stops part of it takes it alone.

    A shared flock per test, an exclusive one for `exclusive_cluster` users: parallel
    xdist workers never see slurmdbd vanish under them. Every test passes a gate first, and
    an exclusive test holds the gate while it waits: with three workers there is always a
    shared holder, and flock alone would starve the exclusive one (past its timeout).
    """
    if request.node.get_closest_marker("devcluster") is None:
        yield
        return
    DEVCLUSTER.mkdir(exist_ok=True)
    with open(DEVCLUSTER / "tests.gate", "w") as gate, open(DEVCLUSTER / "tests.lock", "w") as fh:
        exclusive = "exclusive_cluster" in request.fixturenames
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        yield


@pytest.fixture
def local_box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config whose only cluster runs plain local processes: no Slurm, no SSH."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[clusters.local]\nscheduler = "local"\nremote_base = "{tmp_path}/base"\n')
    monkeypatch.setenv("HPCUI_CONFIG", str(cfg))
    import hpcui.clusters.api

    monkeypatch.setattr(hpcui.clusters.api, "_clusters", {})
    return cfg


@pytest.fixture
def exclusive_cluster() -> None:
    """Marker fixture: this test stops or restarts dev-cluster parts (see _cluster_lock)."""


@pytest.fixture(scope="session")
def devcluster() -> Path:
    """The running dev cluster's config; fails (not skips) when it is not up or not isolated."""
    cfg = DEVCLUSTER / "hpcui.toml"
    if not cfg.exists():
        pytest.fail("dev cluster not up: run `scripts/devcluster up` (scripts/test does it)")
    status = subprocess.run(
        [str(ROOT / "scripts" / "devcluster"), "status"], capture_output=True, text=True
    )
    if status.returncode != 0:
        pytest.fail(f"dev cluster not healthy:\n{status.stdout}{status.stderr}")
    for home in SITE_HOMES.values():
        if (home / ".ssh").exists() and os.environ.get("HPCUI_ALLOW_VISIBLE_HOME") != "1":
            pytest.fail(
                f"the test user's home {home} is visible: integration tests must run the client "
                "where the cluster's files are hidden (scripts/test runs pytest in a private "
                "mount namespace)"
            )
    return cfg


#: what this machine's pip installs from in the tests: the dev index's wheel folder (filled
#: by scripts/install-deps), never an index on the network (env= fetches uv's wheel here,
#: and offline sites' wheels: hpcui.submission.environments)
LOCAL_WHEELS = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "/var/lib/hpcui-devcluster/index"}


@pytest.fixture
def dev_env(devcluster: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCUI_CONFIG", str(devcluster))
    for key, value in LOCAL_WHEELS.items():
        monkeypatch.setenv(key, value)
    import hpcui.clusters.api

    monkeypatch.setattr(hpcui.clusters.api, "_clusters", {})
    return devcluster


@pytest.fixture
def dev(dev_env: Path):
    from hpcui.clusters.api import connect

    cluster = connect("dev")
    yield cluster
    cluster.close()


@pytest.fixture(params=SITES)
def site_name(request: pytest.FixtureRequest) -> str:
    """Each dev site in turn (a test that takes it runs once per site)."""
    return request.param


@pytest.fixture
def site(dev_env: Path, site_name: str):
    """A connected Cluster for each dev site in turn."""
    from hpcui.clusters.api import connect

    cluster = connect(site_name)
    yield cluster
    cluster.close()


def session_sshd_pids(run) -> list[int]:
    """The per-connection sshd processes serving a link (its shell's parent and the one
    above it), found through that link's `run`."""
    session = int(run("echo $PPID").stdout.strip())
    above = int(run("ps -o ppid= -p $PPID").stdout.strip() or 0)
    return [p for p in {session, above} if p > 1]


def sshd_pid(name: str) -> int:
    out = subprocess.run(
        [str(ROOT / "scripts" / "devcluster"), "sshd-pids"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in out.splitlines():
        n, _, pid = line.partition(" ")
        if n == name:
            return int(pid)
    raise AssertionError(f"no sshd {name!r} in: {out}")
