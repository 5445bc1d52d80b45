"""Module-system parsers on verbatim Lmod 8.6.19 / Environment Modules 5.2.0 outputs."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from hpcui.backends.modules import (
    Module,
    ModuleState,
    avail_command,
    detect_module_system,
    keyword_command,
    list_command,
    module_state,
    parse_avail,
    parse_envmodules_json,
    parse_list,
    parse_lmod_keyword,
    parse_lmod_spider_json,
    parse_load_error,
    spider_command,
    version_command,
)

FIXTURES = Path(__file__).parent.parent / "fixtures"
LMOD = FIXTURES / "lmod-8.6.19"
ENVMOD = FIXTURES / "envmodules-5.2.0"


def names(modules: list[Module]) -> list[str]:
    return [m.full_name for m in modules]


@pytest.mark.parametrize(
    "path",
    [
        LMOD / "t_list.stderr",
        LMOD / "t_list_redirect.stdout",
        LMOD / "list.stderr",
        ENVMOD / "t_list.stderr",
        ENVMOD / "list.stderr",
    ],
)
def test_list_terse_and_numbered(path: Path) -> None:
    loaded = parse_list(path.read_text())
    assert names(loaded) == ["gcc/12.2.0", "cuda/12.2"]
    assert [(m.name, m.version) for m in loaded] == [("gcc", "12.2.0"), ("cuda", "12.2")]
    assert all(m.loaded for m in loaded)


def test_list_nothing_loaded() -> None:
    # The "nothing loaded" lines both tools print; their output files hold loaded lists.
    assert parse_list("No modules loaded\n") == []
    assert parse_list("No Modulefiles Currently Loaded.\n") == []


def test_lmod_terse_avail_skips_path_headers_and_directories() -> None:
    available = parse_avail((LMOD / "t_avail.stderr").read_text())
    assert names(available) == [
        "cuda/12.2",
        "gcc/11.3.0",
        "gcc/12.2.0",
        "openmpi/4.1.5",
        "python/3.11.5",
    ]
    assert not any(m.loaded or m.default for m in available)  # Lmod -t avail shows no markers


def test_envmodules_terse_avail_loaded_markers() -> None:
    available = {m.full_name: m for m in parse_avail((ENVMOD / "t_avail.stderr").read_text())}
    assert list(available) == ["cuda/12.2", "gcc/11.3.0", "gcc/12.2.0"]
    assert available["cuda/12.2"].loaded and available["gcc/12.2.0"].loaded
    assert not available["gcc/11.3.0"].loaded


def test_terse_default_markers() -> None:
    # No captured output marks a default (none is set there), so these two lines are
    # written by hand in the documented spellings: Environment Modules "(default)",
    # Lmod "(L,D)" = loaded and default.
    (module,) = parse_avail("gcc/12.2.0(default)\n")
    assert (module.full_name, module.default, module.loaded) == ("gcc/12.2.0", True, False)
    (module,) = parse_avail("gcc/12.2.0 (L,D)\n")
    assert (module.full_name, module.default, module.loaded) == ("gcc/12.2.0", True, True)


def test_lmod_terse_spider() -> None:
    assert names(parse_avail((LMOD / "t_spider_gcc.stderr").read_text())) == [
        "gcc/11.3.0",
        "gcc/12.2.0",
    ]


def test_envmodules_json_list_and_avail() -> None:
    loaded = parse_envmodules_json((ENVMOD / "j_list.stderr").read_text())
    assert names(loaded) == ["gcc/12.2.0", "cuda/12.2"]
    assert all(m.loaded for m in loaded)

    available = {
        m.full_name: m for m in parse_envmodules_json((ENVMOD / "j_avail.stderr").read_text())
    }
    assert list(available) == ["gcc/12.2.0", "gcc/11.3.0", "cuda/12.2"]
    assert available["gcc/12.2.0"].loaded and available["cuda/12.2"].loaded
    assert not available["gcc/11.3.0"].loaded
    assert available["gcc/11.3.0"].version == "11.3.0"


def test_lmod_spider_json_defaults_descriptions_hidden() -> None:
    modules = {
        m.full_name: m for m in parse_lmod_spider_json((LMOD / "spider_json.stdout").read_text())
    }
    assert set(modules) == {
        "python/3.11.5",
        "cuda/12.2",
        "openmpi/4.1.5",
        "gcc/11.3.0",
        "gcc/12.2.0",
    }
    assert modules["gcc/12.2.0"].default  # marked default: its weight starts with '^'
    assert not modules["gcc/11.3.0"].default
    assert modules["python/3.11.5"].default  # the only version is the default
    assert modules["cuda/12.2"].description == "CUDA"
    assert modules["gcc/11.3.0"].description == "GNU compilers"
    assert (modules["openmpi/4.1.5"].name, modules["openmpi/4.1.5"].version) == ("openmpi", "4.1.5")
    assert not any(m.hidden for m in modules.values())


def test_lmod_spider_json_agrees_with_software_page_defaults() -> None:
    import json

    page = json.loads((LMOD / "spider_jsonSoftwarePage.stdout").read_text())
    marked = {v["full"] for pkg in page for v in pkg["versions"] if v["markedDefault"]}
    parsed = parse_lmod_spider_json((LMOD / "spider_json.stdout").read_text())
    assert marked == {"gcc/12.2.0"}
    assert marked <= {m.full_name for m in parsed if m.default}


def test_lmod_keyword() -> None:
    (cuda,) = parse_lmod_keyword((LMOD / "keyword.stderr").read_text())
    assert (cuda.full_name, cuda.name, cuda.version, cuda.description) == (
        "cuda/12.2",
        "cuda",
        "12.2",
        "CUDA",
    )


def test_lmod_search_marks_the_defaults() -> None:
    """Issue 23, defect 11: `keyword` marks no default; keyword_command asks Lmod's
    `-t -d avail` in the same round trip (real output of the dev24 site, Lmod 8.7.60)."""
    text = (FIXTURES / "lmod-8.7.60-dev24" / "keyword_cuda_with_defaults.stdout").read_text()
    found = {m.full_name: m.default for m in parse_lmod_keyword(text)}
    assert found == {"cuda/12.4": True}  # 12.2 is hidden: keyword leaves it out


@pytest.mark.parametrize("path", [LMOD / "load_bad.stderr", ENVMOD / "load_bad.stderr"])
def test_load_error_names_the_unknown_module(path: Path) -> None:
    failure = parse_load_error(path.read_text())
    assert failure is not None
    assert failure.modules == ["nonexistent/1.0"]
    assert "nonexistent/1.0" in failure.message and "module avail" in failure.message


def test_no_load_error_on_success() -> None:
    assert parse_load_error((LMOD / "load.stderr").read_text()) is None
    assert parse_load_error((ENVMOD / "load.stderr").read_text()) is None


def test_detect_module_system() -> None:
    # Version banners as printed in public material: Lmod's own regression log for
    # 9.2 and the Environment Modules documentation ("module config" example).
    assert (
        detect_module_system("Modules based on Lua: Version 9.2  2026-04-06 14:48 -05:00") == "lmod"
    )
    assert detect_module_system("Modules Release 5.3.0 (2023-05-14)") == "envmodules"
    assert detect_module_system(env={"LMOD_VERSION": "8.6.19"}) == "lmod"
    assert (
        detect_module_system(env={"MODULES_CMD": "/usr/share/modules/libexec/modulecmd.tcl"})
        == "envmodules"
    )
    assert detect_module_system("bash: module: command not found", {}) is None


def test_commands_run_module_in_a_login_shell() -> None:
    for command in (
        list_command("lmod"),
        avail_command("envmodules"),
        keyword_command("lmod", "gpu"),
        spider_command(),
        version_command(),
    ):
        argv = shlex.split(command)
        assert argv[:2] == ["bash", "-lc"] and len(argv) == 3
    assert shlex.split(list_command("lmod"))[2] == "module --redirect -t list"
    assert shlex.split(avail_command("lmod"))[2] == "module --redirect --show_hidden -t avail"
    assert shlex.split(list_command("envmodules"))[2] == "module -j list 2>&1"
    assert shlex.split(avail_command("envmodules"))[2] == "module -j avail 2>&1"
    assert "spider-json" in spider_command()
    # A search word is quoted, never interpreted by the remote shell.
    inner = shlex.split(keyword_command("lmod", "gpu; rm -rf ~"))[2]
    assert inner.startswith("k=$(module --redirect keyword 'gpu; rm -rf ~'); ")


def test_module_state_marks_loaded_in_available() -> None:
    loaded = parse_list((LMOD / "t_list.stderr").read_text())
    available = parse_avail((LMOD / "t_avail.stderr").read_text())
    state = module_state(loaded, available)
    assert isinstance(state, ModuleState)
    assert {m.full_name for m in state.available if m.loaded} == {"gcc/12.2.0", "cuda/12.2"}
