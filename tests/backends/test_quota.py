"""Quota parsers on verbatim outputs (tests/fixtures/quota*, sources in SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcui.backends.quota import (
    QUOTA_COMMANDS,
    QUOTA_PARSERS,
    QuotaEntry,
    QuotaParseError,
    parse_bsc_quota,
    parse_csc_workspaces,
    parse_df,
    parse_jutil_dataquota,
    parse_lfs_quota,
    parse_lumi_quota,
    parse_mmlsquota,
    parse_quota,
    parse_quota_tools,
)

FIXTURES = Path(__file__).parent.parent / "fixtures"
KiB, MiB, GiB, TiB = 1024, 1024**2, 1024**3, 1024**4


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def by_fs(entries: list[QuotaEntry]) -> dict[str, QuotaEntry]:
    return {e.filesystem: e for e in entries}


def test_bsc_quota_1024_based_bytes() -> None:
    rows = by_fs(parse_bsc_quota(fixture("quota/bsc_quota_plain.txt")))
    assert list(rows) == ["gpfs_home", "gpfs_projects", "gpfs_scratch"]
    home = rows["gpfs_home"]
    assert (home.kind, home.name) == ("USR", None)
    assert home.used_bytes == 4634706  # 4.42 MB * 1024**2, rounded
    assert home.soft_bytes == 80 * GiB
    assert home.hard_bytes == 84 * GiB
    assert (home.files_used, home.grace, home.near_limit) == (23, None, False)
    projects = rows["gpfs_projects"]
    assert projects.kind == "GRP"
    assert projects.used_bytes == 166161547264  # 154.75 GB
    assert projects.soft_bytes == 1000 * GiB
    assert projects.hard_bytes == 1132496976609  # 1.03 TB
    assert projects.files_used == 32411
    assert rows["gpfs_scratch"].used_bytes == 144 * KiB


def test_bsc_quota_ansi_colour_and_space_padding_are_ignored() -> None:
    plain = fixture("quota/bsc_quota_plain.txt")
    # The live tool pads with spaces and colours cells (fixtures/README.md).
    coloured = "\n".join(
        " ".join(f"\x1b[1;3{i % 7}m{cell}\x1b[0m" for i, cell in enumerate(line.split("\t")))
        for line in plain.splitlines()
    )
    assert "\x1b[" in coloured and "\t" not in coloured
    assert parse_bsc_quota(coloured) == parse_bsc_quota(plain)
    assert parse_quota(coloured) == parse_bsc_quota(plain)


def test_lumi_workspaces_si_units_and_projects() -> None:
    rows = by_fs(parse_lumi_quota(fixture("quota-constructed/lumi_workspaces.txt")))
    assert list(rows) == [
        "/users/alfiolaz",
        "/projappl/project_465002906",
        "/scratch/project_465002906",
        "/flash/project_465002906",
    ]
    home = rows["/users/alfiolaz"]
    assert (home.kind, home.name) == ("USR", "alfiolaz")
    assert (home.used_bytes, home.soft_bytes) == (19 * 10**9, 22 * 10**9)
    assert (home.files_used, home.files_soft) == (62_000, 100_000)
    scratch = rows["/scratch/project_465002906"]
    assert (scratch.kind, scratch.name) == ("PRJ", "project_465002906")
    assert (scratch.used_bytes, scratch.soft_bytes) == (8200, 55 * 10**12)
    assert (scratch.files_used, scratch.files_soft) == (2, 2_000_000)
    assert rows["/flash/project_465002906"].soft_bytes == 2_200_000_000_000


def test_csc_workspaces_current_layout() -> None:
    rows = by_fs(parse_csc_workspaces(fixture("quota/csc_workspaces.txt")))
    assert len(rows) == 5
    home = rows["/users/kkayttaj"]
    assert (home.kind, home.name) == ("USR", "kkayttaj")
    assert home.used_bytes == 4724464026  # 4.4 GiB
    assert home.soft_bytes == 10 * GiB
    assert (home.files_used, home.files_soft) == (24_000, 100_000)
    scratch = rows["/scratch/project_2000123"]
    assert (scratch.used_bytes, scratch.soft_bytes) == (103 * GiB, TiB)
    assert (scratch.files_used, scratch.files_soft) == (389_000, 1_000_000)
    assert rows["/projappl/project_2001234"].near_limit is False  # 85G of 100G


def test_csc_workspaces_old_layouts() -> None:
    old = by_fs(parse_csc_workspaces(fixture("quota-constructed/csc_workspaces_old.txt")))
    assert len(old) == 5
    assert old["/users/kkayttaj"].used_bytes == 2201170739  # 2.05 GiB
    assert old["/users/kkayttaj"].files_used == 23_240
    assert old["/scratch/project_2012345"].used_bytes == 56 * GiB
    assert old["/scratch/project_2012345"].files_soft == 1_000_000
    assert old["/projappl/project_3587167"].files_used is None  # "2.45" files: unreadable

    faq = by_fs(parse_csc_workspaces(fixture("quota-constructed/csc_workspaces_faq.txt")))
    assert faq["/users/jdoe"].used_bytes == 653 * MiB
    assert faq["/users/jdoe"].files_used == 680  # ".68k"
    over = faq["/scratch/project_2000040"]
    assert over.used_bytes == 1207263767298  # "1.098T*": the star marks the exceeded quota
    assert over.soft_bytes == TiB
    assert over.near_limit is True


def test_mmlsquota_units_follow_the_header() -> None:
    (row,) = parse_mmlsquota(fixture("quota-constructed/mmlsquota_vsc_kb.txt"))
    assert (row.filesystem, row.kind) == ("vol_ddn2:leuven_scratch", "USR")
    assert row.used_bytes == 1444864 * KiB
    assert row.soft_bytes == 1970061312 * KiB
    assert row.hard_bytes == 2073755648 * KiB
    assert (row.files_used, row.files_soft, row.files_hard) == (16494, None, None)
    assert row.grace is None

    home, scratch = parse_mmlsquota(fixture("quota-constructed/mmlsquota_romeo_auto.txt"))
    assert home.filesystem == "gpfs:home"
    assert home.used_bytes == 890561468826  # 829.4G
    assert (home.soft_bytes, home.hard_bytes) == (TiB, 1610784534692)  # 1T, 1.465T
    assert (home.files_used, home.files_soft, home.files_hard) == (363010, 1_000_000, 1_500_000)
    assert (scratch.soft_bytes, scratch.hard_bytes) == (15 * GiB, 20 * GiB)


def test_lfs_quota_kbytes_with_inaccurate_brackets() -> None:
    (row,) = parse_lfs_quota(fixture("quota-constructed/lfs_quota_ozstar.txt"))
    assert (row.filesystem, row.kind, row.name) == ("/fred", "USR", "username")
    assert row.used_bytes is None  # "[1041408]": lfs says the value is inaccurate
    assert (row.soft_bytes, row.hard_bytes) == (5242880 * KiB, 6291456 * KiB)
    assert row.files_used is None


def test_lfs_quota_human_readable_user_and_group() -> None:
    (user,) = parse_lfs_quota(fixture("quota-constructed/lfs_quota_h_user.txt"))
    assert (user.filesystem, user.kind, user.name) == ("./", "USR", "xdtr108")
    assert user.used_bytes == 830786765  # 792.3M
    assert user.soft_bytes is None  # "0k" is "no limit"
    assert user.hard_bytes == 10486042394100  # 9.537T
    assert (user.files_used, user.files_hard, user.grace) == (9, 2_000_000, None)

    (group,) = parse_lfs_quota(fixture("quota-constructed/lfs_quota_h_group.txt"))
    assert (group.kind, group.name, group.files_used) == ("GRP", "sds184", 60751)
    assert group.hard_bytes == 50 * TiB


def test_lfs_quota_verbose_keeps_only_the_filesystem_total() -> None:
    verbose = parse_lfs_quota(fixture("quota-constructed/lfs_quota_hv_user.txt"))
    assert verbose == parse_lfs_quota(fixture("quota-constructed/lfs_quota_h_user.txt"))


def test_quota_tools_wrapped_rows_and_units() -> None:
    rows = by_fs(parse_quota_tools(fixture("quota-constructed/quota_s_vsc.txt")))
    assert list(rows) == ["nas2-ib1:/mnt/home", "nas2-ib1:/mnt/data", "nas1-ib1:/mnt/site_scratch"]
    home = rows["nas2-ib1:/mnt/home"]
    assert (home.kind, home.name) == ("USR", "vsc31234")
    assert (home.used_bytes, home.soft_bytes, home.hard_bytes) == (648 * MiB, 2919 * MiB, 3 * GiB)
    assert (home.files_used, home.files_soft) == (3685, None)
    assert rows["nas2-ib1:/mnt/data"].files_used == 134_000  # "134k" files are decimal
    assert rows["nas1-ib1:/mnt/site_scratch"].used_bytes == 0


def test_df_and_du_fallback() -> None:
    rows = by_fs(parse_df(fixture("quota-constructed/df_k_solaris.txt")))
    root = rows["/"]
    assert (root.kind, root.used_bytes) == ("DF", 49042 * KiB)
    assert root.hard_bytes == (49042 + 124485) * KiB  # used + available
    assert rows["/proc"].hard_bytes is None
    (du,) = parse_df(fixture("quota-constructed/du_s_vsc.txt"))
    assert (du.filesystem, du.kind, du.used_bytes) == (".", "DU", 54864 * KiB)


JUTIL = "quota-constructed/jutil_dataquota_documented_columns.txt"


def test_jutil_dataquota_by_column_name() -> None:
    rows = by_fs(parse_jutil_dataquota(fixture(JUTIL)))
    home = rows["home_hpcuser1"]
    assert (home.kind, home.name) == ("FILESET", "jusers")
    assert home.used_bytes == round(7.2 * GiB) and home.soft_bytes == 15 * GiB
    assert home.hard_bytes == round(16.5 * GiB)
    assert (home.files_used, home.files_soft, home.files_hard) == (81234, 80000, 88000)
    assert home.near_limit  # over the inode soft limit: what JSC's e-mails warn about
    assert (
        rows["scratch_cstao"].used_bytes == round(95.4 * TiB) and rows["scratch_cstao"].near_limit
    )
    assert not rows["project_cstao"].near_limit
    empty = rows["data_cstao"]
    assert empty.used_bytes == 0 and empty.soft_bytes is None  # 0 = no limit


def test_jutil_dataquota_never_guesses() -> None:
    text = fixture(JUTIL)
    bare = text.replace("7.2 GB", "7730941132")  # a bare number: bytes? KiB? unknown
    assert by_fs(parse_jutil_dataquota(bare))["home_hpcuser1"].used_bytes is None
    with pytest.raises(QuotaParseError, match="cells"):
        parse_jutil_dataquota(text.replace("81234", "81234 extra"))
    with pytest.raises(QuotaParseError, match="fileset"):
        parse_jutil_dataquota(text.replace("fileset ", "thing   "))
    with pytest.raises(QuotaParseError, match="inode-usage"):
        parse_jutil_dataquota("jutil: error: user not found\n")


def test_jutil_dataquota_pipe_table() -> None:
    piped = (
        "| fileset | data-usage | data-soft-limit | inode-usage | inode-hard-limit |\n"
        "|---------|------------|-----------------|-------------|------------------|\n"
        "| home_u1 | 1.5 GB     | 2 GB            | 10          | 100              |\n"
    )
    (row,) = parse_jutil_dataquota(piped)
    assert (row.filesystem, row.used_bytes, row.soft_bytes) == (
        "home_u1",
        round(1.5 * GiB),
        2 * GiB,
    )
    assert (row.files_used, row.files_hard, row.hard_bytes) == (10, 100, None)


@pytest.mark.parametrize(
    ("name", "parser"),
    [
        ("quota/bsc_quota_plain.txt", parse_bsc_quota),
        ("quota/csc_workspaces.txt", parse_csc_workspaces),
        ("quota-constructed/csc_workspaces_old.txt", parse_csc_workspaces),
        ("quota-constructed/csc_workspaces_faq.txt", parse_csc_workspaces),
        ("quota-constructed/lumi_workspaces.txt", parse_lumi_quota),
        ("quota-constructed/mmlsquota_vsc_kb.txt", parse_mmlsquota),
        ("quota-constructed/mmlsquota_romeo_auto.txt", parse_mmlsquota),
        ("quota-constructed/lfs_quota_ozstar.txt", parse_lfs_quota),
        ("quota-constructed/lfs_quota_h_user.txt", parse_lfs_quota),
        ("quota-constructed/lfs_quota_h_group.txt", parse_lfs_quota),
        ("quota-constructed/lfs_quota_hv_user.txt", parse_lfs_quota),
        ("quota-constructed/quota_s_vsc.txt", parse_quota_tools),
        ("quota-constructed/df_k_solaris.txt", parse_df),
        ("quota-constructed/du_s_vsc.txt", parse_df),
        ("quota-constructed/jutil_dataquota_documented_columns.txt", parse_jutil_dataquota),
    ],
)
def test_parse_quota_recognises_each_format(name: str, parser) -> None:
    text = fixture(name)
    assert parse_quota(text) == parser(text)
    assert parse_quota(text)


@pytest.mark.parametrize("text", ["", "hello world\n", "Permission denied\n", "{}"])
def test_unknown_text_raises_with_what_was_expected(text: str) -> None:
    with pytest.raises(QuotaParseError, match=r"expected .*bsc_quota.*mmlsquota.*jutil"):
        parse_quota(text)


def test_capacity_table_without_site_markers_is_refused() -> None:
    # lumi-quota is 1000-based and csc-workspaces 1024-based: never guess between them.
    text = fixture("quota-constructed/lumi_workspaces.txt")
    anonymous = "\n".join(
        ln for ln in text.splitlines() if "hosted on" not in ln and "Quota for" not in ln
    )
    with pytest.raises(QuotaParseError, match=r"lumi-quota.*csc-workspaces"):
        parse_quota(anonymous)


def test_parser_for_the_wrong_tool_raises() -> None:
    with pytest.raises(QuotaParseError, match="bsc_quota"):
        parse_bsc_quota(fixture("quota/csc_workspaces.txt"))
    with pytest.raises(QuotaParseError, match="Disk quotas for"):
        parse_lfs_quota(fixture("quota/bsc_quota_plain.txt"))


def test_near_limit() -> None:
    assert QuotaEntry(filesystem="/x", used_bytes=90, soft_bytes=100).near_limit
    assert not QuotaEntry(filesystem="/x", used_bytes=89, soft_bytes=100).near_limit
    assert QuotaEntry(filesystem="/x", files_used=95, files_hard=100).near_limit
    assert QuotaEntry(filesystem="/x", used_bytes=1, soft_bytes=100, grace="6days").near_limit
    assert not QuotaEntry(filesystem="/x", used_bytes=10**12, soft_bytes=0).near_limit
    assert "near_limit" in QuotaEntry(filesystem="/x").model_dump()


def test_quota_commands_cover_parsers() -> None:
    assert QUOTA_COMMANDS[0] == ("bsc_quota", ["bsc_quota"])
    for tool, argv in QUOTA_COMMANDS:
        assert tool in QUOTA_PARSERS
        assert argv and all(isinstance(a, str) for a in argv)


@pytest.mark.parametrize(
    ("token", "size"),
    [
        ("1,7G", round(1.7 * 1024**3)),  # a tool printing in a comma-decimal locale
        ("12,25T", round(12.25 * 1024**4)),
        ("1.7G", round(1.7 * 1024**3)),
        ("1,234", None),  # a thousands separator is not read as a decimal comma
    ],
)
def test_decimal_commas_before_a_unit(token, size):
    from hpcui.backends.quota import _size

    assert _size(token) == size
