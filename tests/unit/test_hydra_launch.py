"""The Hydra launcher's pure parts: an element's columns and key from its overrides, the
default sweep name, submit's keywords from the launcher config."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from hpcui.errors import UsageError
from hpcui.sweeps import space
from hpcui.sweeps.hydra_launch import columns_of, default_name, resources_of


def test_columns_are_typed_override_values_and_keys_are_stable():
    cols = columns_of(["lr=0.1", "seed=2", "+model=big", "db.user=alice", "hydra.verbose=true"])
    assert cols == {"lr": 0.1, "seed": 2, "model": "big", "db.user": "alice"}
    # the same values in another order: the same element
    again = columns_of(["seed=2", "db.user=alice", "lr=0.1", "+model=big"])
    assert space.config_key(again) == space.config_key(cols)
    assert space.config_key(columns_of(["lr=0.01", "seed=2"])) != space.config_key(
        columns_of(["lr=0.1", "seed=2"])
    )
    assert columns_of(["layers=[1,2]", "opt={name: adam}"]) == {
        "layers": [1, 2], "opt": {"name": "adam"}
    }  # fmt: skip


def test_the_default_name_is_one_per_multirun_folder():
    assert default_name("train", Path("multirun/2026-12-07/10-11-12")) == (
        "hydra-train-2026-12-07-10-11-12"
    )
    assert default_name("my app", Path("/x/y z")) == "hydra-my-app-x-y-z"
    assert len(default_name("t" * 80, Path("a/b"))) == 64


def test_resources_are_the_set_fields_then_the_free_mapping():
    params = OmegaConf.create({"cluster": "mn5", "name": None, "wait_s": None,
                               "resume_failed": True, "gpus": 4, "mem": None,
                               "time": "1h", "resources": {"constraint": "a100"}})  # fmt: skip
    assert resources_of(params) == {"gpus": 4, "time": "1h", "constraint": "a100"}
    with pytest.raises(UsageError, match=r"hydra\.launcher\.resources must be a mapping"):
        resources_of({"resources": [1, 2]})
