"""Modules: one round trip for list + avail (+ Lmod spider for defaults), on captured outputs."""

from __future__ import annotations

import pytest

from hpcui.sitestate import (
    ModuleError,
    ModuleState,
    detect_system,
    fetch_modules,
    missing_modules,
    search_modules,
    setup_modules,
)
from hpcui.sitestate.remote import MARK
from hpcui.transport.base import CommandResult
from tests.canned import scripted
from tests.conftest import fixture_text


def framed(*outputs: str) -> CommandResult:
    """What all_command prints: each output after its marker line."""
    body = "".join(f"\n{MARK} {i} 0\n{out.rstrip(chr(10))}\n" for i, out in enumerate(outputs))
    return CommandResult(0, body.encode(), b"")


def test_detect_lmod_and_envmodules() -> None:
    lmod = "\nModules based on Lua: Version 8.6.19  2022-04-16 13:46 -05:00\n"
    assert detect_system(scripted(CommandResult(0, lmod.encode(), b""))) == "lmod"
    env = "Modules Release 5.2.0 (2022-11-08)\n"
    assert detect_system(scripted(CommandResult(0, b"", env.encode()))) == "envmodules"
    with pytest.raises(ModuleError, match=r"No module system on mn9.*module load"):
        detect_system(
            scripted(CommandResult(127, b"", b"bash: module: command not found")), cluster="mn9"
        )


def test_lmod_state_in_one_round_trip_with_spider_defaults() -> None:
    t = scripted(
        framed(
            fixture_text("lmod-8.6.19/t_list_redirect.stdout"),
            fixture_text("lmod-8.6.19/t_avail.stderr"),  # what --redirect puts on stdout
            fixture_text("lmod-8.6.19/spider_json.stdout"),
        )
    )
    state = fetch_modules(t, "lmod")
    assert len(t.commands) == 1
    assert (
        "-t list" in t.commands[0]
        and "-t avail" in t.commands[0]
        and "spider-json" in t.commands[0]
    )
    assert [m.full_name for m in state.loaded] == ["gcc/12.2.0", "cuda/12.2"]
    avail = {m.full_name: m for m in state.available}
    assert list(avail) == [
        "cuda/12.2",
        "gcc/11.3.0",
        "gcc/12.2.0",
        "openmpi/4.1.5",
        "python/3.11.5",
    ]
    assert avail["gcc/12.2.0"].default and not avail["gcc/11.3.0"].default  # marked default
    assert avail["cuda/12.2"].default and avail["cuda/12.2"].loaded
    assert avail["gcc/12.2.0"].loaded and not avail["openmpi/4.1.5"].loaded
    assert avail["python/3.11.5"].description == "Python interpreter"


def test_lmod_state_survives_a_broken_spider() -> None:
    t = scripted(framed("cuda/12.2\n", "/mf:\ncuda/12.2\ngcc/12.2.0\n", "lmod: spider crashed"))
    state = fetch_modules(t, "lmod")
    assert [m.full_name for m in state.available] == ["cuda/12.2", "gcc/12.2.0"]
    assert not any(m.default for m in state.available)


def test_envmodules_state_from_json() -> None:
    t = scripted(
        framed(
            fixture_text("envmodules-5.2.0/j_list.stderr"),
            fixture_text("envmodules-5.2.0/j_avail.stderr"),
        )
    )
    state = fetch_modules(t, "envmodules")
    assert "-j list" in t.commands[0] and "2>&1" in t.commands[0]
    assert [m.full_name for m in state.loaded] == ["gcc/12.2.0", "cuda/12.2"]
    avail = {m.full_name: m.loaded for m in state.available}
    assert avail == {"gcc/12.2.0": True, "gcc/11.3.0": False, "cuda/12.2": True}


def test_missing_answer_is_a_clear_error() -> None:
    t = scripted(CommandResult(1, b"", b"bash: module: command not found"))
    with pytest.raises(ModuleError, match=r"did not answer.*list, avail, spider.*module list"):
        fetch_modules(t, "lmod", cluster="x")


def test_search_lmod_keyword() -> None:
    t = scripted(CommandResult(0, fixture_text("lmod-8.6.19/keyword.stderr").encode(), b""))
    found = search_modules(t, "lmod", "gpu")
    assert "keyword gpu" in t.commands[0]
    assert [(m.full_name, m.description) for m in found] == [("cuda/12.2", "CUDA")]


def test_setup_lines_are_checked_against_the_site() -> None:
    setup = ["module purge", "module load cuda/12.4 python", "ml load nope/1 ; export X=1"]
    assert setup_modules(setup) == ["cuda/12.4", "python", "nope/1"]
    state = ModuleState.model_validate(
        {
            "loaded": [],
            "available": [
                {"name": "cuda", "version": "12.4", "full_name": "cuda/12.4"},
                {"name": "python", "version": "3.11", "full_name": "python/3.11"},
            ],
        }
    )
    assert missing_modules(setup, state) == ["nope/1"]
    assert missing_modules(["module load cuda/12.9"], state) == ["cuda/12.9"]


@pytest.mark.parametrize("lmod", ["lmod-8.6.19-dev", "lmod-8.7.60-dev24"])
def test_alias_and_hidden_module_listed_once_and_marked(lmod: str) -> None:
    """Both dev sites, jobs' setup `module load python/3.11 torch cuda/12.2` (torch: an
    alias of pytorch/2.13.0, cuda/12.2: hidden). Lmod 8.7.60 adds the alias's name on a
    line of its own and `<H>`; Lmod 8.6.19 does neither. hpcui reads both the same way."""
    t = scripted(
        framed(
            fixture_text(f"{lmod}/alias_hidden_t_list.stdout"),
            fixture_text(f"{lmod}/show_hidden_t_avail.stdout"),
            fixture_text(f"{lmod}/spider_json.stdout"),
        )
    )
    setup = ["module load python/3.11 torch cuda/12.2"]
    state = fetch_modules(t, "lmod", setup=setup)
    assert "module load python/3.11 torch cuda/12.2" in t.commands[0]
    assert [(m.full_name, m.hidden) for m in state.loaded] == [
        ("python/3.11", False),
        ("pytorch/2.13.0", False),
        ("cuda/12.2", True),
    ]
    assert state.loaded[1].aliases == (("torch",) if "8.7" in lmod else ())
    avail = {m.full_name: m for m in state.available}
    assert avail["torch"].alias_of == "pytorch/2.13.0" and not avail["torch"].hidden
    assert avail["cuda/12.2"].hidden and avail["cuda/12.2"].loaded
    assert not avail["cuda/12.4"].hidden and avail["cuda/12.4"].default
    assert [m.full_name for m in state.available].count("cuda/12.2") == 1
    # the job's setup loads only what exists: an alias and a hidden module count
    assert missing_modules(setup, state) == []
    assert missing_modules(["module load nope/1 torch"], state) == ["nope/1"]


@pytest.mark.parametrize("lmod", ["lmod-8.6.19-dev", "lmod-8.7.60-dev24"])
def test_numbered_list_through_an_alias(lmod: str) -> None:
    """`module list` (numbered): Lmod 8.7 writes "2) torch -> pytorch/2.13.0"."""
    from hpcui.backends.modules import parse_list

    listed = parse_list(fixture_text(f"{lmod}/alias_hidden_list.stdout"))
    assert [m.full_name for m in listed] == ["python/3.11", "pytorch/2.13.0", "cuda/12.2"]


def test_lmods_own_modules_are_lmod_and_settarg_not_versions_of_core():
    """Issue 23, defect 11: Debian's Lmod has Core/ itself on MODULEPATH; its modules were
    shown as a module `Core` with versions `lmod` and `settarg`."""
    from hpcui.backends.modules import parse_avail

    mods = {
        m.full_name: m
        for m in parse_avail(fixture_text("lmod-8.6.19-dev/t_avail_with_lmod_core.stderr"))
    }
    lmod, settarg = mods["Core/lmod"], mods["Core/settarg"]
    assert (lmod.name, lmod.version) == ("lmod", "")
    assert (settarg.name, settarg.version) == ("settarg", "")
    assert mods["python/3.11"].name == "python" and mods["python/3.11"].version == "3.11"
    assert not any(m.name == "Core" for m in mods.values())


TREE2 = "lmod-8.7.60-dev24"


def _tree2_state(listed_name: str, setup: list[str]) -> ModuleState:
    t = scripted(
        framed(
            fixture_text(f"{TREE2}/{listed_name}"),
            fixture_text(f"{TREE2}/tree2_show_hidden_t_avail.stdout"),
            fixture_text(f"{TREE2}/tree2_spider_json.stdout"),
        )
    )
    return fetch_modules(t, "lmod", setup=setup)


def test_lmod_8_7_alias_lines_are_the_module_above_not_another_one() -> None:
    """Issue 38, 1: `module load gcc/13 nvhpc/24` on dev24's Lmod 8.7.60: the terse list
    follows each module with the name it was loaded by ("gcc/13"; "nvhpc/24 <H>" for a
    hidden version loaded through a module_alias). One entry per module, as the numbered
    list shows ("1) gcc/13 -> gcc/13.2.0   2) nvhpc/24.4.0 (H)")."""
    from hpcui.backends.modules import module_label, parse_list

    terse = parse_list(fixture_text(f"{TREE2}/version_alias_hidden_t_list.stdout"))
    numbered = parse_list(fixture_text(f"{TREE2}/version_alias_hidden_list.stdout"))
    assert [(m.full_name, m.aliases, m.hidden) for m in terse] == [
        ("gcc/13.2.0", ("gcc/13",), False),
        ("nvhpc/24.4.0", ("nvhpc/24",), True),
    ]
    assert [(m.full_name, m.hidden) for m in numbered] == [(m.full_name, m.hidden) for m in terse]
    assert [module_label(m) for m in terse] == ["gcc/13 -> gcc/13.2.0", "nvhpc/24 -> nvhpc/24.4.0"]
    state = _tree2_state("version_alias_hidden_t_list.stdout", ["module load gcc/13 nvhpc/24"])
    assert [m.full_name for m in state.loaded] == ["gcc/13.2.0", "nvhpc/24.4.0"]
    avail = {m.full_name: m for m in state.available}
    assert avail["gcc/13"].alias_of == "gcc/13.2.0" and avail["nvhpc/24"].alias_of == "nvhpc/24.4.0"
    assert avail["nvhpc/24.4.0"].loaded and avail["nvhpc/24.4.0"].hidden


def test_a_hidden_version_is_no_default_and_shows_only_when_named() -> None:
    """Issue 38, 2: spider's default is the highest version that is not hidden, as Lmod
    loads it (captured: `module load nvhpc` gives 23.11, `module load nccl` 2.18); hidden
    versions stay out of a list unless asked for by full name, or loaded."""
    from hpcui.backends.modules import listed, parse_avail

    state = _tree2_state("nccl_default_t_list.stdout", [])
    avail = {m.full_name: m for m in state.available}
    loads = {
        name: fixture_text(f"{TREE2}/{name}_default_t_list.stdout").strip()
        for name in ("nccl", "nvhpc")
    }
    assert loads == {"nccl": "nccl/2.18", "nvhpc": "nvhpc/23.11"}
    for full in loads.values():
        assert avail[full].default
    assert not avail["nccl/.2.21"].default and avail["nccl/.2.21"].hidden
    assert (avail["nccl/.2.21"].name, avail["nccl/.2.21"].version) == ("nccl", ".2.21")
    assert not avail["nvhpc/24.4.0"].default and avail["nvhpc/24.4.0"].hidden
    plain = [m.full_name for m in listed(state.available)]
    shown_by_lmod = [
        m.full_name for m in parse_avail(fixture_text(f"{TREE2}/tree2_t_avail.stdout"))
    ]
    assert sorted(plain) == sorted(shown_by_lmod)  # what `module avail` shows, no more
    assert [m.full_name for m in listed(state.available, "nccl/.2.21")] == ["nccl/.2.21"]
    assert [m.full_name for m in listed(state.available, "nccl")] == ["nccl/2.18"]
    assert len(listed(state.available, show_hidden=True)) == len(state.available)
    loaded_hidden = _tree2_state("nccl_hidden_by_name_t_list.stdout", ["module load nccl/.2.21"])
    assert [(m.full_name, m.hidden) for m in loaded_hidden.loaded] == [("nccl/.2.21", True)]
    assert "nccl/.2.21" in [m.full_name for m in listed(loaded_hidden.available)]
