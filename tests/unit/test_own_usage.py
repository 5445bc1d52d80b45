"""What hpcui's own folders take of the quota: the command on a real shell, the entry
whose filesystem holds them, and the warning threshold."""

from __future__ import annotations

from hpcui.backends.quota import QuotaEntry
from hpcui.sitestate.footprint import fetch_own_usage, holding, parse_own_usage
from hpcui.transport.local import LocalTransport


def _entry(fs: str, files_hard: int | None) -> QuotaEntry:
    return QuotaEntry(filesystem=fs, used_bytes=1, files_used=10, files_hard=files_hard)


def test_counts_every_inode_under_the_base(tmp_path):
    base = tmp_path / "hpcui"
    (base / "jobs" / "a").mkdir(parents=True)
    for i in range(5):
        (base / "jobs" / "a" / f"{i}.pkl").write_bytes(b"x" * 3000)
    (base / "jobs" / "a" / "link").symlink_to("0.pkl")
    usage = fetch_own_usage(LocalTransport(), f'"{base}"', [_entry(str(tmp_path), 100)])
    assert usage is not None and usage.base == str(base)
    assert usage.files == 9  # base, jobs, a, 5 files, 1 link: all count against a file quota
    assert usage.bytes >= 5 * 3000
    assert usage.share_of_file_limit == 0.09 and not usage.warn
    assert fetch_own_usage(LocalTransport(), f'"{tmp_path}/none"', []) is None


def test_the_longest_filesystem_holding_the_base_decides():
    entries = [_entry("/", 1_000_000), _entry("/gpfs/home", 100_000), _entry("/gpfs/homes", 5)]
    assert holding("/gpfs/home/bsc/u1/.hpcui", entries).filesystem == "/gpfs/home"
    assert holding("/scratch/u1", [_entry("/gpfs/home", 10)]) is None
    usage = parse_own_usage("25000 1024 /gpfs/home/bsc/u1/.hpcui", entries)
    assert usage.share_of_file_limit == 0.25 and usage.warn  # a quarter of the file limit
    assert parse_own_usage("", entries) is None and parse_own_usage("x y z", entries) is None
