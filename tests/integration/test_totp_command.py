"""Unattended 2FA (issue 49): a cluster table's `totp_command` answers the 2FA site's
code prompt (OpenSSH + google-authenticator PAM, the dev cluster's `dev-2fa`), so the CLI
logs in without a terminal; the code is never printed, and a failing command says what
failed. The seed is read by the command from its 0600 file: never in hpcui's config."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.devcluster

SEED = ROOT / ".devcluster" / "ssh" / "totp_seed"


def config_with(tmp_path: Path, command: list[str]) -> Path:
    base = (ROOT / ".devcluster" / "hpcui.toml").read_text()
    table = base.split("[clusters.dev-2fa]", 1)[1].split("\n[", 1)[0]
    cfg = tmp_path / "hpcui.toml"
    cfg.write_text(
        f"{base}\n[clusters.dev-2fa-totp]{table}\ntotp_command = {json.dumps(command)}\n"
    )
    return cfg


def hpcui(
    cfg: Path, tmp_path: Path, *args: str, debug: bool = False
) -> subprocess.CompletedProcess:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "HPCUI_CONFIG": str(cfg),
        "HPCUI_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": str(ROOT),
        "HPCUI_AGENT": "off",
    }
    return subprocess.run(
        [sys.executable, "-m", "hpcui.cli", *(["--debug"] if debug else []), "-c", "dev-2fa-totp",
         *args],
        env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip


def current_code() -> str:
    seed = SEED.read_text().strip()
    return subprocess.run(
        ["oathtool", "--totp", "-b", seed], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_totp_command_logs_in_without_a_terminal(devcluster, tmp_path):
    reads_seed = ["sh", "-c", f'oathtool --totp -b "$(cat {SEED})"']
    cfg = config_with(tmp_path, reads_seed)
    assert SEED.read_text().strip() not in cfg.read_text()  # the secret stays in its file
    res = hpcui(cfg, tmp_path, "jobs", "--json", debug=True)
    assert res.returncode == 0, res.stderr
    assert isinstance(json.loads(res.stdout), list)
    code = current_code()
    assert code not in res.stdout + res.stderr  # never shown, never logged (--debug logs all)

    without = config_with(tmp_path, ["false"]).read_text().replace('totp_command = ["false"]\n', "")
    plain = tmp_path / "plain.toml"
    plain.write_text(without)
    res = hpcui(plain, tmp_path, "jobs")  # the same site, no command, no terminal
    assert res.returncode == 3 and "cannot prompt" in res.stderr


def test_a_failing_totp_command_says_what_failed(devcluster, tmp_path):
    cfg = config_with(tmp_path, ["sh", "-c", "echo 'seed file missing' >&2; exit 7"])
    res = hpcui(cfg, tmp_path, "jobs")
    assert res.returncode == 3, res.stderr
    assert "totp_command of dev-2fa-totp (sh) failed (exit 7: seed file missing)" in res.stderr
    cfg = config_with(tmp_path, ["/no/such/oathtool"])
    res = hpcui(cfg, tmp_path, "jobs")
    assert res.returncode == 3 and "could not run" in res.stderr, res.stderr
