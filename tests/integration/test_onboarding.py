"""`hpcui init` / `hpcui add` against the dev cluster's two sites: the scheduler and the
profile detected, a Python of this minor version found (on PATH on dev, as a module on
dev24 whose python3 is 3.13), a tiny test job run, the table appended with the user's
other tables and comments intact; wrong answers leave the config file as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcui.clusters import onboarding
from hpcui.config import ClusterConfig, load_config
from hpcui.errors import UsageError
from tests.conftest import DEVCLUSTER, LOCAL_WHEELS
from tests.support.pty_session import run_on_pty

pytestmark = pytest.mark.devcluster

ROOT = Path(__file__).resolve().parents[2]
SSH = str(DEVCLUSTER / "ssh" / "config")
BEFORE = """# my clusters (a comment hpcui must keep)
default = "mine"

[clusters.mine]   # inline comment too
host = "example.invalid"
profile = "generic"
"""


def _env(tmp_path: Path, config: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HPCUI_CONFIG": str(config),
        "HPCUI_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": str(ROOT),
        "NO_COLOR": "1",
    }


def _hpcui(tmp_path: Path, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hpcui.cli", *args],
        capture_output=True,
        text=True,
        env=_env(tmp_path, config),
        stdin=subprocess.DEVNULL,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("host", "python", "setup"),
    [
        ("hpcui-dev", "/usr/bin/python3", None),  # Debian 12: python3 is 3.11
        ("hpcui-dev24", "python3", ["module load python/3.11"]),  # trixie: 3.13 + a module
    ],
)
def test_add_detects_the_site_and_writes_a_working_table(devcluster, tmp_path, host, python, setup):
    config = tmp_path / "config.toml"
    config.write_text(BEFORE)
    name = f"new-{host}"
    done = _hpcui(tmp_path, config, "add", name, "--host", host, "--ssh-config", SSH,
                  "--yes", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["tested"] is True and outcome["facts"]["scheduler"] == "slurm"
    assert outcome["cluster"]["profile"] == "dev", outcome["profile_reason"]
    assert "partitions cpu, gpu" in outcome["profile_reason"]
    assert (outcome["cluster"]["python"], outcome["cluster"]["setup"]) == (python, setup)
    text = config.read_text()
    assert text.startswith(BEFORE)  # the user's text, comments included, untouched
    cluster = load_config(config).cluster(name)
    assert (cluster.host, cluster.profile, cluster.python) == (host, "dev", python)
    again = _hpcui(tmp_path, config, "-c", name, "exec", "hostname")
    assert again.returncode == 0 and again.stdout.strip(), again.stderr
    twice = _hpcui(tmp_path, config, "add", name, "--host", host, "--ssh-config", SSH, "--yes")
    assert twice.returncode == 2 and "already" in twice.stderr
    assert config.read_text() == text


@pytest.mark.parametrize(
    ("args", "words", "code"),
    [
        (["--host", "hpcui-dev", "--key", "/nonexistent/key"], "key", 3),
        (["--host", "127.0.0.1", "--user", "hpcuser"], "", 3),  # port 22 is closed here
        (
            ["--host", "hpcui-dev", "--python", "/usr/bin/python3", "--profile", "mn5-acc"],
            "account",
            2,
        ),
        (["--host", "-oProxyCommand=x"], "host", 2),
    ],
)
def test_wrong_answers_leave_the_config_untouched(devcluster, tmp_path, args, words, code):
    config = tmp_path / "config.toml"
    config.write_text(BEFORE)
    done = _hpcui(tmp_path, config, "add", "bad", "--ssh-config", SSH, "--yes", *args)
    assert done.returncode == code, done.stdout + done.stderr
    assert words in done.stderr.lower()
    assert config.read_text() == BEFORE


def test_no_matching_python_is_said_plainly(devcluster):
    from hpcui.clusters.cluster import Cluster

    base = ClusterConfig(name="probe", host="hpcui-dev24", ssh_config=SSH)
    with Cluster(base) as c:
        facts = onboarding.parse_probe(c.run(onboarding.probe_command()).stdout)
    assert any(v == "3.13" for v in facts.pythons.values())
    assert "python/3.11" in facts.python_modules
    with pytest.raises(
        UsageError, match=r"No Python 3\.99 .*python3 \(3\.13\).*module python/3\.11"
    ):
        onboarding.match_python(facts, want="3.99")


def test_init_asks_under_a_terminal(devcluster, tmp_path):
    """The questions of `hpcui init` answered on a pseudo-terminal."""
    config = tmp_path / "config.toml"
    argv = [sys.executable, "-m", "hpcui.cli", "init", "--ssh-config", SSH, "--no-test"]
    answers = [
        (b"Login host", b"hpcui-dev"),
        (b"Name for it", b"first"),
        (b"User name", b""),
        (b"Private key", b""),
        (b"Jump host", b""),
        (b"Write it", b"y"),
        (b"Packages your jobs need there", b"humanize==4.15.0"),  # the first environment
    ]

    def answer(seen: bytes) -> bytes | None:
        if answers and answers[0][0] in seen.split(b"\n")[-1]:
            return answers.pop(0)[1]
        return None

    env = {**_env(tmp_path, config), **LOCAL_WHEELS}  # the offline site's wheels: from here
    code, text = run_on_pty(argv, env, answer)
    assert code == 0, text
    assert not answers, text
    assert "profile:   dev" in text and "first added to" in text
    assert "environment ready: " in text and "/envs/" in text, text  # built on the login node
    assert load_config(config).cluster("first").host == "hpcui-dev"
    assert load_config(config).default == "first"  # the first table becomes the default


def test_the_table_reads_back_and_quotes_its_values(tmp_path):
    cluster = ClusterConfig(
        name="x",
        host="login.example",
        python='/opt/py "3.11"/bin/python3',
        setup=["module load python/3.11", 'export A="b c"'],
        defaults={"account": "proj1"},
    )
    path = tmp_path / "c.toml"
    onboarding.write_table(path, cluster)
    back = load_config(path).cluster("x")
    assert (back.python, back.setup, back.defaults) == (
        cluster.python,
        cluster.setup,
        {"account": "proj1"},
    )


def test_the_app_offers_to_add_a_cluster_on_its_first_run(devcluster, tmp_path, monkeypatch):
    """No config file yet: the app opens on the add-cluster dialog; looking at the site
    and pressing Add writes the table, runs the test job and connects the new cluster."""
    import asyncio

    from textual.widgets import Input

    from hpcui.tui.add_cluster import AddClusterModal
    from hpcui.tui.app import HpcuiApp

    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(f"Include {SSH}\n")  # the alias, as a user has it
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("HPCUI_CONFIG", raising=False)  # the user config: none yet
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    config = tmp_path / "xdg" / "hpcui" / "config.toml"

    async def until(pilot, cond, timeout):
        deadline = time.monotonic() + timeout
        while not cond():
            assert time.monotonic() < deadline, "not in time"
            await pilot.pause(0.2)

    async def scenario() -> None:
        app = HpcuiApp()
        async with app.run_test(size=(120, 45)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, AddClusterModal), 10)
            modal = app.screen
            modal.query_one("#add-host", Input).value = "hpcui-dev"
            modal.query_one("#add-name", Input).value = "pilot"
            await pilot.click("#add-look")
            await until(pilot, lambda: modal.proposal is not None, 90)
            assert modal.proposal.cluster.profile == "dev"
            assert not config.exists()  # nothing written before Add
            await pilot.click("#add-write")
            await until(pilot, lambda: not isinstance(app.screen, AddClusterModal), 300)
            assert "pilot" in app.hub.conns
            await until(pilot, lambda: app.hub.conns["pilot"].status == "connected", 60)
        assert load_config(config).cluster("pilot").host == "hpcui-dev"

    asyncio.run(scenario())


def test_add_takes_user_host_port_as_ssh_writes_it(devcluster, tmp_path):
    """Issue 35, defect 3: `--host 127.0.0.1:2222` tried port 22 of a host named
    "127.0.0.1:2222", and there was no --port."""
    ssh_config = tmp_path / "ssh_config"  # no alias: the host key and key file only
    ssh_config.write_text(
        f"Host 127.0.0.1\n    IdentityFile {DEVCLUSTER}/ssh/id_ed25519\n"
        f"    IdentitiesOnly yes\n    UserKnownHostsFile {DEVCLUSTER}/ssh/known_hosts\n"
        "    StrictHostKeyChecking yes\n"
    )
    config = tmp_path / "config.toml"
    config.write_text(BEFORE)
    done = _hpcui(tmp_path, config, "add", "raw", "--host", "hpcuser@127.0.0.1:2222",
                  "--ssh-config", str(ssh_config), "--no-test", "--yes", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    cluster = load_config(config).cluster("raw")
    assert (cluster.user, cluster.host, cluster.port) == ("hpcuser", "127.0.0.1", 2222)
    again = _hpcui(tmp_path, config, "-c", "raw", "exec", "whoami")
    assert again.returncode == 0 and again.stdout.strip() == "hpcuser", again.stderr
    both = _hpcui(tmp_path, config, "add", "raw2", "--host", "127.0.0.1:2222", "--port", "2223",
                  "--ssh-config", str(ssh_config), "--yes")  # fmt: skip
    assert both.returncode == 2 and "give one" in both.stderr
    assert "raw2" not in config.read_text()


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("login1.bsc.es", (None, "login1.bsc.es", None)),
        ("alias-from-ssh-config", (None, "alias-from-ssh-config", None)),
        ("bsc012345@glogin1.bsc.es", ("bsc012345", "glogin1.bsc.es", None)),
        ("127.0.0.1:2222", (None, "127.0.0.1", 2222)),
        ("me@[::1]:2200", ("me", "::1", 2200)),
    ],
)
def test_a_destination_is_read_as_ssh_reads_it(text, parts):
    assert onboarding.split_destination(text) == parts


@pytest.mark.parametrize("bad", ["a b", "host:99999", "user@", "[::1", "host:port"])
def test_a_destination_that_is_none_says_so(bad):
    with pytest.raises(UsageError):
        onboarding.split_destination(bad)
