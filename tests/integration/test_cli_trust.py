"""`hpcui trust` against the real sshd: fingerprint shown, known_hosts written, never silently."""

import subprocess
import sys

import pytest

from tests.conftest import DEVCLUSTER

pytestmark = pytest.mark.devcluster


def _config(tmp_path, known_hosts):
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[clusters.fresh]\nhost = "hpcui-dev"\nssh_config = "{DEVCLUSTER}/ssh/config"\n'
        f'known_hosts = "{known_hosts}"\nprofile = "dev"\n'
    )
    return cfg


def _hpcui(cfg, *args):
    env = {"HPCUI_CONFIG": str(cfg), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "hpcui.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


def test_trust_refuses_without_a_terminal_then_accepts_with_yes(devcluster, tmp_path):
    kh = tmp_path / "known_hosts"
    cfg = _config(tmp_path, kh)
    fp = subprocess.run(
        ["ssh-keygen", "-lf", str(DEVCLUSTER / "ssh" / "host_main_ed25519.pub")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[1]

    refused = _hpcui(cfg, "-c", "fresh", "exec", "true")
    assert refused.returncode == 3
    assert fp in refused.stderr and "hpcui trust fresh" in refused.stderr
    assert not kh.exists()

    no_tty = _hpcui(cfg, "trust", "fresh")
    assert no_tty.returncode == 3 and "--yes" in no_tty.stderr
    assert fp in no_tty.stdout
    assert not kh.exists()

    ok = _hpcui(cfg, "trust", "fresh", "--yes")
    assert ok.returncode == 0, ok.stderr
    assert kh.read_text().startswith("[127.0.0.1]:2222 ssh-ed25519 ")
    assert _hpcui(cfg, "-c", "fresh", "exec", "whoami").stdout.strip() == "hpcuser"
