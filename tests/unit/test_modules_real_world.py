"""Lmod output as real sites print it (tests/fixtures/lmod-real-world, sources quoted in
its README): column-major numbered lists, markers as flags, inactive modules, and the
hierarchy error with its spider hint."""

from __future__ import annotations

import pytest

from hpcui.backends.modules import parse_list, parse_load_error
from tests.conftest import FIXTURES

REAL = FIXTURES / "lmod-real-world"


def test_a_list_laid_out_down_the_columns_keeps_the_load_order():
    listed = parse_list((REAL / "cc2023_list.txt").read_text())
    assert [m.full_name for m in listed] == [
        "CCconfig", "gentoo/2023", "gcccore/.12.3", "gcc/12.3", "hwloc/2.9.1", "ucx/1.14.1",
        "libfabric/1.18.0", "pmix/4.2.4", "ucc/1.2.0", "openmpi/4.1.5", "flexiblas/3.3.1",
        "imkl/2023.2.0", "StdEnv/2023", "mii/1.1.2",
    ]  # fmt: skip
    by = {m.full_name: m for m in listed}
    assert by["gentoo/2023"].sticky and by["StdEnv/2023"].sticky
    assert by["gcccore/.12.3"].hidden and not by["gcc/12.3"].hidden
    assert all(m.loaded for m in listed)
    assert not any("(" in m.full_name or ")" in m.full_name for m in listed)


@pytest.mark.parametrize(
    ("name", "count", "sticky"),
    [("lumi_list.txt", 11, 3), ("alliance_fr_list.txt", 9, 2)],
)
def test_other_sites_lists_and_their_legends(name, count, sticky):
    listed = parse_list((REAL / name).read_text())
    assert len(listed) == count and sum(m.sticky for m in listed) == sticky
    assert listed[0].full_name in ("ModuleLabel/label", "CCconfig")
    assert listed[-1].full_name in ("cce/17.0.1", "StdEnv/2020")


def test_inactive_modules_after_a_swap_are_not_loaded():
    assert parse_list((REAL / "cedar_load_inactive.txt").read_text()) == []


@pytest.mark.parametrize(
    ("name", "module", "spider"),
    [
        ("rackham_exist_cannot_load.txt", "biopython", "module spider biopython"),
        ("amarel_exist_cannot_load.txt", "R-Project/3.4.1", "module spider R-Project/3.4.1"),
    ],
)
def test_a_module_behind_the_hierarchy_names_it_and_what_to_run(name, module, spider):
    failure = parse_load_error((REAL / name).read_text())
    assert failure is not None and failure.modules == [module]
    assert f"`{spider}`" in failure.message and "load those first" in failure.message


def test_environment_modules_lists_down_the_columns_too():
    listed = parse_list((FIXTURES / "envmodules-5.2.0" / "list_columns.stdout").read_text())
    assert [m.full_name for m in listed] == [
        "gcc/12.2.0", "openmpi/4.1.5", "hdf5/1.14.1", "netcdf/4.9.2", "fftw/3.3.10",
        "cuda/12.2", "python/3.11", "cmake/3.27", "boost/1.83.0", "zlib/1.3",
    ]  # fmt: skip


@pytest.mark.parametrize("lmod", ["lmod-8.6.19-dev", "lmod-8.7.60-dev24"])
def test_spider_json_names_come_from_the_package_and_the_full_name(lmod):
    from hpcui.backends.modules import parse_lmod_spider_json

    text = (FIXTURES / lmod / "spider_json_hidden_dot_version.stdout").read_text()
    found = {m.full_name: m for m in parse_lmod_spider_json(text)}
    hidden = found["foo/.2.0"]
    assert (hidden.name, hidden.version, hidden.hidden) == ("foo", ".2.0", True)
    assert found["foo/1.0"].default and not hidden.default
    mpi = found["intel/mpi/2021.9"]
    assert (mpi.name, mpi.version) == ("intel/mpi", "2021.9")


def test_a_hidden_versions_version_comes_from_its_full_name_not_the_version_field():
    """Issue 38, 2: some Lmod releases repeat the default's version in a dot-hidden entry's
    `Version` ("foo/.2.0" with Version "1.0", as a held-out output showed). Constructed
    from dev24's capture with only that field changed; the hidden version is no default
    even though it sorts highest."""
    from hpcui.backends.modules import parse_lmod_spider_json

    text = (FIXTURES / "lmod-8.7.60-dev24" / "spider_json_hidden_dot_version.stdout").read_text()
    assert '"Version":".2.0"' in text
    found = {
        m.full_name: m
        for m in parse_lmod_spider_json(text.replace('"Version":".2.0"', '"Version":"1.0"'))
    }
    hidden = found["foo/.2.0"]
    assert (hidden.name, hidden.version, hidden.hidden, hidden.default) == (
        "foo",
        ".2.0",
        True,
        False,
    )
    assert (found["foo/1.0"].version, found["foo/1.0"].default) == ("1.0", True)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("intel/15.0.2\nintel/15\n", [("intel/15.0.2", ("intel/15",), False)]),
        ("foo/24.4.0\nfoo/24.4.0 <H>\n", [("foo/24.4.0", (), True)]),
        ("gcc/12.2.0\nopenmpi/4.1.5\n", [("gcc/12.2.0", (), False), ("openmpi/4.1.5", (), False)]),
    ],
)
def test_the_held_out_alias_and_hidden_lines_are_one_module(text, want):
    """Issue 38, 1: the two shapes the held-out set showed (as the issue quotes them), and
    two different modules staying two."""
    assert [(m.full_name, m.aliases, m.hidden) for m in parse_list(text)] == want
