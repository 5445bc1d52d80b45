"""Quota: the public parser on the captured outputs, and the one-round-trip fallback chain
run by a real /bin/sh (LocalTransport) against fake site tools on PATH."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from hpcui.sitestate import QuotaError, fetch_quota, parse_quota
from hpcui.sitestate.quota import candidates
from hpcui.sitestate.remote import all_command, parse_parts
from hpcui.transport.local import LocalTransport
from tests.conftest import FIXTURES, fixture_text

GiB, TiB = 1024**3, 1024**4
REAL = {name: shutil.which(name) or f"/usr/bin/{name}" for name in ("head", "cat", "df", "tail")}


# -- the public parser on every captured format ---------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "filesystem", "used", "soft", "hard", "files"),
    [
        ("quota/bsc_quota_plain.txt", "gpfs_home", 4634706, 80 * GiB, 84 * GiB, 23),
        ("quota/csc_workspaces.txt", None, None, None, None, None),
        (
            "quota-constructed/quota_s_vsc.txt",
            "nas2-ib1:/mnt/home",
            648 * 1024**2,
            2919 * 1024**2,
            3072 * 1024**2,
            3685,
        ),
        ("quota-constructed/lfs_quota_h_user.txt", None, None, None, None, None),
        ("quota-constructed/mmlsquota_vsc_kb.txt", None, None, None, None, None),
        ("quota-constructed/lumi_workspaces.txt", None, None, None, None, None),
        ("quota-constructed/df_k_solaris.txt", None, None, None, None, None),
        ("quota-constructed/du_s_vsc.txt", None, None, None, None, None),
    ],
)
def test_parse_quota_recognises_every_fixture(fixture, filesystem, used, soft, hard, files) -> None:
    entries = parse_quota(fixture_text(fixture))
    assert entries, fixture
    assert all(e.used_bytes is None or e.used_bytes >= 0 for e in entries)
    if filesystem is not None:
        row = next(e for e in entries if e.filesystem == filesystem)
        assert (row.used_bytes, row.soft_bytes, row.hard_bytes, row.files_used) == (
            used,
            soft,
            hard,
            files,
        )


def test_every_quota_fixture_parses_or_is_refused_clearly() -> None:
    for path in sorted([*FIXTURES.glob("quota/*.txt"), *FIXTURES.glob("quota-constructed/*.txt")]):
        entries = parse_quota(path.read_text())
        assert entries and all(e.filesystem for e in entries), path.name


def test_parse_quota_refuses_unknown_text() -> None:
    with pytest.raises(ValueError, match="unrecognised quota output"):
        parse_quota("hello\nworld\n")


# -- framing several commands in one round trip ---------------------------------------------


def test_all_command_frames_each_output_with_its_status() -> None:
    t = LocalTransport()
    parts = [
        ("a", "printf 'one\\ntwo\\n'"),
        ("b with space", "echo err >&2; exit 3"),
        ("c", "printf 'no newline'"),
    ]
    res = t.run(all_command(parts))
    got = parse_parts(res.stdout, [n for n, _ in parts])
    assert [(p.name, p.exit_status, p.output) for p in got] == [
        ("a", 0, "one\ntwo"),
        ("b with space", 3, ""),
        ("c", 0, "no newline"),
    ]
    assert res.stderr.strip() == "err"


def test_banner_before_the_first_marker_is_ignored() -> None:
    assert parse_parts("Welcome to MN5!\n\n@@hpcui-part 0 0\nx\n", ["only"])[0].output == "x"


# -- the fallback chain, for real, with fake tools -----------------------------------------


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH with only what the snippet needs: no real quota tools leak in."""
    d = tmp_path / "bin"
    d.mkdir()
    for name in ("head", "cat"):
        link(d, name)
    monkeypatch.setenv("PATH", str(d))
    return d


def link(bin_dir: Path, name: str) -> None:
    os.symlink(REAL[name], bin_dir / name)


def tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def test_only_df_answers_like_on_the_dev_cluster(bin_dir: Path) -> None:
    link(bin_dir, "df")
    report = fetch_quota(LocalTransport())
    assert report.tool == "df"
    assert [t.tool for t in report.tried] == [
        "bsc_quota",
        "lumi-quota",
        "csc-workspaces",
        "mmlsquota",
        "jutil",
        "lfs quota",
        "quota",
        "df",
    ]
    assert [t.exit_status for t in report.tried[:-1]] == [None] * 7  # not installed
    (row,) = report.entries
    assert (
        row.kind == "DF" and row.used_bytes and row.hard_bytes and row.hard_bytes > row.used_bytes
    )


def test_the_site_tool_wins_and_is_parsed_with_its_own_parser(bin_dir: Path) -> None:
    fixture = FIXTURES / "quota" / "bsc_quota_plain.txt"
    tool(bin_dir, "bsc_quota", f"cat {fixture}")
    tool(bin_dir, "df", "echo df must not run >&2; exit 9")
    report = fetch_quota(LocalTransport())
    assert report.tool == "bsc_quota"
    assert len(report.tried) == 1
    home = next(e for e in report.entries if e.filesystem == "gpfs_home")
    assert (home.used_bytes, home.soft_bytes, home.hard_bytes) == (4634706, 80 * GiB, 84 * GiB)


def test_failing_and_silent_tools_are_skipped_and_reported(bin_dir: Path) -> None:
    tool(bin_dir, "mmlsquota", "echo 'mmlsquota: not a GPFS file system' >&2; exit 1")
    tool(bin_dir, "quota", "exit 0")  # no quota set: prints nothing
    tool(bin_dir, "df", f"cat {FIXTURES / 'quota-constructed' / 'df_k_solaris.txt'}")
    report = fetch_quota(LocalTransport())
    assert report.tool == "df"
    tried = {t.tool: t for t in report.tried}
    assert tried["mmlsquota"].exit_status == 1
    assert "not a GPFS" in tried["mmlsquota"].output_head
    assert tried["quota"].exit_status == 0 and tried["quota"].output_head == ""
    assert tried["bsc_quota"].exit_status is None


def test_profile_command_goes_first(bin_dir: Path) -> None:
    fixture = FIXTURES / "quota-constructed" / "lfs_quota_h_user.txt"
    tool(bin_dir, "lfs", f'[ "$1" = quota ] && cat {fixture}')
    tool(bin_dir, "bsc_quota", "echo should not run; exit 0")
    assert [c[0] for c in candidates("lfs quota")][:2] == ["lfs quota", "bsc_quota"]
    report = fetch_quota(LocalTransport(), "lfs quota")
    assert report.tool == "lfs quota"
    assert report.entries and report.entries[0].kind == "USR"
    custom = fetch_quota(LocalTransport(), f"cat {fixture}")  # a command line of its own
    assert custom.tool == "custom" and custom.entries == report.entries


def test_over_quota_exit_status_still_reads_the_table(bin_dir: Path) -> None:
    fixture = FIXTURES / "quota-constructed" / "quota_s_vsc.txt"
    tool(bin_dir, "quota", f"tail -n +2 {fixture}; exit 1")
    link(bin_dir, "tail")
    report = fetch_quota(LocalTransport())
    assert report.tool == "quota"
    assert report.entries[0].filesystem == "nas2-ib1:/mnt/home"


def test_unreadable_site_tool_is_an_error_not_a_df_number(bin_dir: Path) -> None:
    tool(bin_dir, "bsc_quota", "echo 'New fancy quota format v2'")
    link(bin_dir, "df")
    with pytest.raises(QuotaError, match=r"bsc_quota.*cannot read.*quota_command"):
        fetch_quota(LocalTransport(), cluster="mn5")


def test_nothing_answers(bin_dir: Path) -> None:
    with pytest.raises(
        QuotaError,
        match=r"No quota tool answered on dev \(tried bsc_quota \(not installed\).*df \(not installed\)\)",
    ):
        fetch_quota(LocalTransport(), cluster="dev")


def test_empty_profile_command_is_refused() -> None:
    with pytest.raises(QuotaError, match="empty"):
        candidates("   ")


def test_probes_run_under_the_c_locale(monkeypatch):
    """Every parsed site command runs with LC_ALL=C, whatever the user's locale says."""
    from hpcui.sitestate.remote import all_command, first_command, parse_parts
    from hpcui.transport.local import LocalTransport

    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    t = LocalTransport()
    res = t.run(all_command([("a", 'echo "$LC_ALL"')]))
    assert [p.output.strip() for p in parse_parts(res.stdout, ["a"])] == ["C"]
    res = t.run(first_command([("b", "echo", 'echo "$LC_ALL"')]))
    assert [p.output.strip() for p in parse_parts(res.stdout, ["b"])] == ["C"]
