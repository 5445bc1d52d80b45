"""A resource is declared once: the CLI's options and the Submit form come from
hpcui.request.fields, which must name every Resources field (or say why not)."""

from __future__ import annotations

import dataclasses

import pytest

from hpcui.backends.batch import BatchSpec
from hpcui.cli.parser import RESOURCE_PREFIX, build_parser
from hpcui.request.allocation import Allocation
from hpcui.request.fields import API_ONLY, FRIENDLY, REQUEST_FIELDS
from hpcui.request.plan import batch_spec
from hpcui.request.resources import Resources
from hpcui.tui.screens.submit import FORM_FIELDS, SubmitForm


def test_every_resources_field_is_an_option_or_says_why_not():
    declared = {f.keyword for f in REQUEST_FIELDS}
    fields = {FRIENDLY.get(name, name) for name in Resources.model_fields}
    assert declared - fields == set(), "options that Resources does not know"
    assert fields - declared == set(API_ONLY), "Resources fields no face offers"


def test_every_option_is_accepted_by_resources_from_kwargs():
    sample = {int: 1, str: "x", None: True}
    for f in REQUEST_FIELDS:
        value = f.choices[0] if f.choices else sample[f.kind]
        value = [value] if f.repeatable else value
        if f.keyword in ("time", "signal_delay"):
            value = "10m"
        elif f.keyword == "mem":
            value = "4G"
        elif f.keyword == "after_ok":
            value = ["1234"]
        elif f.keyword == "binds":
            value = ["/scratch"]
        elif f.keyword == "container_env":
            value = ["A=1"]
        Resources.from_kwargs(**{f.keyword: value})  # raises on an unknown keyword


def test_the_cli_offers_every_field_on_submit_run_and_script():
    import argparse

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("submit", "run", "script"):
        sub = commands.choices[command]
        dests = {a.dest for a in sub._actions if a.dest.startswith(RESOURCE_PREFIX)}
        assert dests == {RESOURCE_PREFIX + f.keyword for f in REQUEST_FIELDS}, command


def test_the_form_turns_its_boxes_into_the_same_keywords():
    form = SubmitForm(
        "local",
        "m:f",
        resources={f.keyword: "2" for f in FORM_FIELDS}
        | {"extra": "--begin=now --x=1", "exclusive": "true", "launcher": "torchrun"},
    )
    kwargs = form.resource_kwargs()
    assert set(kwargs) == {f.keyword for f in FORM_FIELDS}
    assert kwargs["gpus"] == 2 and kwargs["extra"] == ["--begin=now", "--x=1"]
    assert kwargs["exclusive"] is True and kwargs["launcher"] == "torchrun"


def test_every_request_field_is_on_the_form():
    """Issue 23, defect 6: tasks per node, launcher, constraint, exclusive, modules were
    missing, so DDP could not be submitted from the form."""
    assert {f.keyword for f in FORM_FIELDS} == {f.keyword for f in REQUEST_FIELDS}


def test_batch_spec_copies_every_field_it_shares_with_allocation():
    shared = {f.name for f in dataclasses.fields(BatchSpec)} & set(Allocation.model_fields)
    assert {"nodes", "gpus_per_node", "mem_mb", "time_s", "launcher", "env"} <= shared
    alloc = Allocation(
        nodes=3,
        tasks_per_node=2,
        cpus_per_task=5,
        gpus_per_node=2,
        mem_mb=1000,
        time_s=600,
        partition="p",
        qos="q",
        account="a",
        constraint="c",
        exclusive=True,
        name="n",
        extra=("--x",),
        gpu_directive="gpus-per-node",
        gpu_type="h100",
        launcher="torchrun",
        max_restarts=2,
        array_parallelism=4,
        env={"K": "V"},
    )
    spec = batch_spec(alloc, folder="/f", token="t")
    for name in shared:
        assert getattr(spec, name) == getattr(alloc, name), name


def test_a_submits_python_is_one_line():
    from hpcui.errors import UsageError
    from hpcui.request.resources import Resources

    assert Resources.from_kwargs(python=" ~/venvs/a/bin/python ").python == "~/venvs/a/bin/python"
    for bad in ("", "py\nthon", "a\0b"):
        with pytest.raises(UsageError, match="path of a Python on the cluster"):
            Resources.from_kwargs(python=bad)
