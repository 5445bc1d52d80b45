"""Slurm hostlists, task counts and PBS node files: the compute side's view of the job."""

from __future__ import annotations

import pytest

from hpcui.backends.nodelist import expand_nodelist, expand_tasks_per_node, nodefile_hosts


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("vm", ["vm"]),
        ("gpu[001-004,007],login1", ["gpu001", "gpu002", "gpu003", "gpu004", "gpu007", "login1"]),
        ("as01r1b[01-02]", ["as01r1b01", "as01r1b02"]),  # MN5 style
        ("jwb[0001,0097-0098]", ["jwb0001", "jwb0097", "jwb0098"]),  # JUWELS Booster style
        ("nid[005000-005001]", ["nid005000", "nid005001"]),  # LUMI style
        ("n[8-10]", ["n8", "n9", "n10"]),  # no padding when the low end has none
        ("r[1-2]n[01-02]", ["r1n01", "r1n02", "r2n01", "r2n02"]),  # several bracket groups
        ("a[1-2]-ib,b", ["a1-ib", "a2-ib", "b"]),
        (" c1 , c2 ", ["c1", "c2"]),
    ],
)
def test_expand_nodelist(text, hosts):
    assert expand_nodelist(text) == hosts


@pytest.mark.parametrize("bad", ["", "gpu[1-", "gpu1]", "gpu[a-b]", "gpu[3-1]", "x[1-2"])
def test_expand_nodelist_rejects_malformed(bad):
    with pytest.raises(ValueError):
        expand_nodelist(bad)


def test_expand_tasks_per_node():
    assert expand_tasks_per_node("4") == [4]
    assert expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    with pytest.raises(ValueError):
        expand_tasks_per_node("2(x)")


def test_nodefile_hosts_keeps_first_seen_order():
    text = "x1000c0s0b0n0\nx1000c0s0b0n0\nx1000c0s1b0n0\n\nx1000c0s0b0n0\n"
    assert nodefile_hosts(text) == ["x1000c0s0b0n0", "x1000c0s1b0n0"]
