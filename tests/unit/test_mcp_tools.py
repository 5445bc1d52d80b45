"""`hpcui mcp`'s tool table without a cluster: what changes things is exactly what
`[mcp] allow` may name, command lines keep --json before a script's arguments, resources
are checked by name, every output schema is a valid JSON schema, logs keep their tail."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from hpcui.cli import cmd_mcp
from hpcui.cli import mcp_tools as tools
from hpcui.config import MCP_ACTIONS, Config


def test_the_tools_that_act_are_the_ones_allow_can_name() -> None:
    assert {t.name for t in tools.TOOLS if t.acts} == set(MCP_ACTIONS)


def test_allow_is_checked_and_all_means_every_action() -> None:
    assert Config.model_validate({"mcp": {"allow": ["all"]}}).mcp.allowed() == set(MCP_ACTIONS)
    assert Config().mcp.allowed() == set()
    with pytest.raises(ValueError, match="unknown 'rm'"):
        Config.model_validate({"mcp": {"allow": ["rm"]}})


def test_submit_puts_json_before_the_scripts_own_arguments() -> None:
    argv = tools.command_line(
        tools.BY_NAME["submit"],
        {"script": "train.py", "args": ["--json"], "resources": {"gpus": 2}, "cluster": "dev"},
    )
    assert argv == ["-c", "dev", "run", "--json", "--gpus", "2", "train.py", "--json"]


def test_an_unknown_resource_is_refused_with_the_known_names() -> None:
    with pytest.raises(ValueError, match=r"unknown resource 'gpu'.*gpus"):
        tools.resource_flags({"gpu": 1})


def test_a_refusal_says_how_to_allow_it() -> None:
    ok, value, text = cmd_mcp.call("cancel", {"jobs": ["1"]}, allowed=set())
    assert not ok and value is None
    assert '[mcp] allow = ["cancel"]' in text


@pytest.mark.parametrize("tool", tools.TOOLS, ids=lambda t: t.name)
def test_every_schema_is_valid(tool: tools.Tool) -> None:
    Draft202012Validator.check_schema(tools.input_schema(tool))
    Draft202012Validator.check_schema(cmd_mcp.output_schema(tool))


def test_logs_keep_the_last_lines_and_say_where_they_start() -> None:
    chunks = [
        {"task": 0, "stream": "stdout", "text": "a\nb\n", "offset": 100},
        {"task": 0, "stream": "stdout", "text": "c\nd\n", "offset": 104},
        {"task": 1, "stream": "stdout", "text": "x\n", "offset": 0},
    ]
    tail = cmd_mcp.tail_chunks(chunks, 2)
    assert tail[0] == {"task": 0, "stream": "stdout", "text": "c\nd\n", "offset": 104}
    assert tail[1]["text"] == "x\n"
    schema = cmd_mcp.output_schema(tools.BY_NAME["logs"])
    Draft202012Validator(schema).validate({"result": tail})


def test_the_config_file_takes_an_mcp_table(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from hpcui.config import ConfigError, load_config

    path = tmp_path / "c.toml"
    path.write_text('[mcp]\nallow = ["cancel", "hold"]\n')
    assert load_config(path).mcp.allowed() == {"cancel", "hold"}
    path.write_text('[mcp]\nallow = ["drop"]\n')
    with pytest.raises(ConfigError, match="unknown 'drop'"):
        load_config(path)
