"""Capabilities as data: faces read what a scheduler can do instead of catching errors."""

from __future__ import annotations

import json

import pytest

from hpcui.backends.records import QueueEntry
from hpcui.cli import main
from hpcui.errors import UsageError
from hpcui.schedulers.base import Capabilities
from hpcui.schedulers.local import LocalScheduler
from hpcui.schedulers.pbs import WRAPPER, PbsScheduler
from hpcui.schedulers.slurm import SlurmScheduler
from hpcui.store.registry import JobRecord, shared_registry
from tests.canned import CannedTransport


def test_each_scheduler_says_what_it_can_do():
    transport = CannedTransport({}, strict=True)  # no command may run to answer
    assert SlurmScheduler(transport).capabilities == Capabilities()
    local = LocalScheduler(transport, lambda: "/tmp/x").capabilities
    assert (local.queue, local.history, local.partitions, local.arrays) == (
        False,
        False,
        False,
        True,
    )
    assert PbsScheduler(transport, "pbspro").capabilities.arrays
    assert not PbsScheduler(transport, WRAPPER).capabilities.arrays


def test_asking_local_for_a_queue_anyway_says_what_to_use():
    with pytest.raises(UsageError, match="registry"):
        LocalScheduler(CannedTransport({}, strict=True), lambda: "/tmp/x").queue(into=QueueEntry)


@pytest.fixture
def local_only(local_box):
    shared_registry().add(
        [JobRecord(cluster="local", token="t9", job_id="9191", folder="/f", name="mine")]
    )


@pytest.mark.parametrize("history", [[], ["--history", "1"]])
def test_jobs_on_a_cluster_without_a_queue_lists_the_registry(local_only, capsys, history):
    assert main(["jobs", "-c", "local", *history]) == 0
    captured = capsys.readouterr()
    assert "9191" in captured.out and "mine" in captured.out
    assert "keeps no" in captured.err
    assert main(["jobs", "-c", "local", "--json", *history]) == 0
    assert [r["job_id"] for r in json.loads(capsys.readouterr().out)] == ["9191"]


def test_partitions_on_a_cluster_without_them_is_empty_not_an_error(local_only, capsys):
    assert main(["partitions", "-c", "local", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
