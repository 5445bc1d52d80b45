from datetime import timedelta

import pytest

from hpcui.errors import UsageError
from hpcui.profiles import load_profile
from hpcui.resources import Resources, parse_mem_mb, parse_time, resolve


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1:00:00", 3600),
        ("90m", 5400),
        ("2h", 7200),
        ("1-00:00:00", 86400),
        (45, 45),
        (timedelta(minutes=3), 180),
        ("30", 1800),
        ("1:30", 90),
        ("2-12", 216000),
        ("1.5h", 5400),
    ],
)
def test_parse_time(text, seconds):
    assert parse_time(text) == seconds


@pytest.mark.parametrize("bad", ["soon", "-5", 0, "1:2:3:4", "h"])
def test_parse_time_rejects(bad):
    with pytest.raises(ValueError):
        parse_time(bad)


def test_parse_mem():
    assert parse_mem_mb("4G") == 4096
    assert parse_mem_mb("500M") == 500
    assert parse_mem_mb(1000) == 1000
    with pytest.raises(ValueError):
        parse_mem_mb("lots")


def test_gpus_become_whole_nodes_with_one_task_per_gpu():
    alloc = resolve(Resources.from_kwargs(gpus=8, time="1h"), load_profile("dev"))
    assert (alloc.nodes, alloc.tasks_per_node, alloc.gpus_per_node) == (2, 4, 4)
    assert alloc.cpus_per_task == 2 and alloc.mem_mb == 8000 and alloc.partition == "gpu"


def test_torchrun_launcher_gives_one_task_per_node():
    alloc = resolve(Resources.from_kwargs(gpus=4, launcher="torchrun"), load_profile("dev"))
    assert (alloc.tasks_per_node, alloc.cpus_per_task) == (1, 8)


def test_gpu_count_not_multiple_of_node_suggests_valid_counts():
    with pytest.raises(UsageError, match="Ask for 4 or 8 GPUs"):
        resolve(Resources.from_kwargs(gpus=6), load_profile("dev"))


def test_limits_checked_before_network():
    with pytest.raises(UsageError, match="exceeds partition 'gpu'"):
        resolve(Resources.from_kwargs(gpus=1, time="3h"), load_profile("dev"))
    with pytest.raises(UsageError, match="not in profile"):
        resolve(Resources.from_kwargs(partition="nope"), load_profile("dev"))


def test_unknown_keyword_points_to_kwargs():
    with pytest.raises(UsageError, match=r"kwargs=\{"):
        Resources.from_kwargs(learning_rate=0.1)
    with pytest.raises(UsageError, match="gpus"):
        Resources.from_kwargs(gpus=-1)


def test_cluster_defaults_fill_unset_fields_only():
    req = Resources.from_kwargs(qos="debug").merged({"account": "acct", "qos": "normal"})
    assert (req.account, req.qos) == ("acct", "debug")
