"""Bad input gets a clear error before anything runs (issue 22, the smaller findings)."""

from __future__ import annotations

import math
import os
import stat

import pytest

from hpcui.cli import output
from hpcui.common.formatting import printable
from hpcui.config import load_config
from hpcui.errors import ConfigError, UsageError
from hpcui.profiles import load_profile
from hpcui.request.resources import Resources
from hpcui.store.registry import Registry


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, "inf", 1e300, "400d"])
def test_a_time_that_is_not_a_sane_duration_is_a_usage_error(value):
    with pytest.raises(UsageError, match="time"):
        Resources.from_kwargs(time=value)


def test_the_registry_is_private_to_the_user(tmp_path):
    reg = Registry(tmp_path / "data" / "registry.sqlite")
    reg.close()
    assert stat.S_IMODE(os.stat(tmp_path / "data" / "registry.sqlite").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "data").st_mode) == 0o700


@pytest.mark.parametrize("name", ["../../x", "a/b", ".hidden", "mn5 acc", ""])
def test_a_cluster_name_that_is_not_a_plain_word_is_refused(tmp_path, monkeypatch, name):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[clusters."{name}"]\nhost = "login.example.org"\n')
    monkeypatch.setenv("HPCUI_CONFIG", str(cfg))
    with pytest.raises(ConfigError, match="cluster name"):
        load_config()


def test_profile_env_names_must_be_shell_names():
    with pytest.raises(ConfigError, match="shell variable names"):
        load_profile("dev", {"env": {"X=1;touch f": "1"}})
    assert load_profile("dev", {"env": {"NCCL_DEBUG": "INFO"}}).env["NCCL_DEBUG"] == "INFO"


def test_tables_show_control_and_bidi_characters_escaped(capsys):
    evil = "job\u202egnp.exe\x1b[2J"
    output.table(["NAME"], [[evil]])
    shown = capsys.readouterr().out
    assert "\u202e" not in shown and "\x1b" not in shown
    assert printable(evil) == "job\\u202egnp.exe\\u001b[2J"
    assert printable(evil) in shown


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "x --chdir=/nonexistent"},  # sbatch would read a second option
        {"account": "a --output=/tmp/stolen"},
        {"name": "bob's job"},
        {"qos": "normal#comment"},
        {"partition": "gpu\nsrun evil"},
        {"name": "caf\u00e9"},  # not ASCII: would fail in sbatch after a round trip
        {"constraint": "a100 --exclusive"},
        {"extra": ["--mail-user=a b"]},
        {"extra": ['--comment="x"']},
    ],
)
def test_directive_values_are_checked_before_the_network(kwargs):
    with pytest.raises(UsageError, match=r"batch directive|feature expression"):
        Resources.from_kwargs(**kwargs)


def test_ordinary_values_still_pass():
    req = Resources.from_kwargs(
        name="train-v2.1_lr=3e-4", account="bsc99", qos="acc_debug", partition="gpu",
        constraint="a100&(ib|eth)", extra=["--begin=now+60", "--mail-type=END,FAIL"],
    )  # fmt: skip
    assert req.name == "train-v2.1_lr=3e-4" and len(req.extra) == 2


@pytest.mark.parametrize(
    "extra",
    [
        "--array=0-9", "-o/tmp/x", "--output=/tmp/x", "signal=B:TERM",
        # sbatch's getopt_long takes unambiguous prefixes, a value after a space, and
        # short options run together (the adversarial run's findings)
        "--arr=0-3", "--array 0-3", "-Ha0-3", "-Ho/tmp/x", "--comm=x", "--out=/tmp/x",
        "--err=/tmp/x", "--sig=USR1@5", "--job=n", "-M other", "--clusters=other", "-HM x",
    ],
)  # fmt: skip
def test_extra_may_not_replace_hpcuis_own_directives(extra):
    from hpcui.backends.batch import BatchSpec
    from hpcui.backends.slurm.script import render_script

    with pytest.raises(ValueError, match="would replace hpcui's own"):
        render_script(BatchSpec(folder="/f", token="t", name="n", extra=(extra,)))


@pytest.mark.parametrize("dialect", ["pbspro", "torque", "slurm-torque-wrapper"])
@pytest.mark.parametrize(
    "extra",
    ["-J0-9", "-o/tmp/x", "-vHPCUI_TOKEN=other", "N", "-joe", "-hJ 0-3", "-VJ0-3", "-ho /tmp/x"],
)
def test_pbs_extra_may_not_replace_hpcuis_own_directives(extra, dialect):
    from hpcui.backends.batch import BatchSpec
    from hpcui.backends.pbs.script import directives

    spec = BatchSpec(folder="/f", token="t", name="n", extra=(extra,))
    with pytest.raises(ValueError, match="would replace hpcui's own"):
        directives(spec, dialect)
    ok = BatchSpec(folder="/f", token="t", name="n", extra=("-Wdepend=afterok:1",))
    assert "-Wdepend=afterok:1" in directives(ok, dialect)


@pytest.mark.parametrize(
    "extra",
    ["--partition=gpu", "-p gpu", "-Hpgpu", "--constraint=a100", "--mail-type=END",
     "--begin=now+60", "--overcommit", "--exclusive", "-A acct", "--hold", "-k"],
)  # fmt: skip
def test_ordinary_extra_directives_still_pass(extra):
    from hpcui.backends.batch import BatchSpec
    from hpcui.backends.slurm.script import directives

    assert extra in directives(BatchSpec(folder="/f", token="t", name="n", extra=(extra,)))


def test_a_keep_policy_that_is_not_a_duration_is_a_config_error(tmp_path, monkeypatch):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[clusters.x]\nhost = "127.0.0.1"\nkeep = "a month"\n')
    monkeypatch.setenv("HPCUI_CONFIG", str(cfg))
    with pytest.raises(ConfigError, match="keep"):
        load_config()
