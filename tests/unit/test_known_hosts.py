"""known_hosts read line by line as OpenSSH does: markers, hashes, patterns, bad lines."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hpcui.transport.ssh.known_hosts import host_matches, read_known_hosts


def keygen(tmp_path: Path, name: str) -> str:
    path = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return " ".join(path.with_suffix(".pub").read_text().split()[:2])


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, str]:
    return {n: keygen(tmp_path, n) for n in ("host", "old", "ca")}


def test_markers_and_a_bad_line_do_not_break_the_file(tmp_path, keys):
    kh = tmp_path / "known_hosts"
    kh.write_text(
        "# comment\n\n"
        f"@cert-authority *.example.org {keys['ca']}\n"
        "this line is not a key at all\n"
        "[login.example.org]:2222 ssh-ed25519 not-base64!\n"
        f"@revoked * {keys['old']}\n"
        f"@future-marker x {keys['ca']}\n"
        f"[login.example.org]:2222 {keys['host']}\n"
    )
    got = read_known_hosts([str(kh)], "[login.example.org]:2222")
    assert list(got.keys) == ["ssh-ed25519"]
    assert got.keys["ssh-ed25519"].get_base64() == keys["host"].split()[1]
    assert len(got.revoked) == 1 and got.revoked[0].get_base64() == keys["old"].split()[1]
    assert not got.cert_authority  # "*.example.org" does not match "[login...]:2222"
    assert got.skipped == 2  # the host's broken key and the unknown marker
    plain = read_known_hosts([str(kh)], "login.example.org")
    assert plain.cert_authority and plain.keys == {}


def test_hashed_names_as_ssh_keygen_writes_them(tmp_path, keys):
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:2222 {keys['host']}\nother.host {keys['old']}\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(kh)], check=True, capture_output=True)
    assert "|1|" in kh.read_text() and "127.0.0.1" not in kh.read_text()
    got = read_known_hosts([str(kh)], "[127.0.0.1]:2222")
    assert got.keys["ssh-ed25519"].get_base64() == keys["host"].split()[1]
    assert read_known_hosts([str(kh)], "[127.0.0.1]:2223").keys == {}


@pytest.mark.parametrize(
    ("patterns", "name", "hit"),
    [
        ("*.example.org", "a.example.org", True),
        ("*.example.org", "example.org", False),
        ("node?", "node1", True),
        ("*.example.org,!bad.example.org", "bad.example.org", False),
        ("*.example.org,!bad.example.org", "good.example.org", True),
        ("[127.0.0.1]:2222", "[127.0.0.1]:2222", True),
        ("127.0.0.1", "[127.0.0.1]:2222", False),
    ],
)
def test_openssh_patterns(patterns, name, hit):
    assert host_matches(patterns, name) is hit


def test_missing_and_unreadable_files_are_skipped(tmp_path):
    d = tmp_path / "a-directory"
    d.mkdir()
    got = read_known_hosts([str(tmp_path / "nope"), str(d)], "x")
    assert got.keys == {} and got.revoked == []
