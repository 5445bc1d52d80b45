"""The dev-cluster benchmarks in their quick mode (`--quick`): each must run to its end and
print its figure lines, so a renamed API breaks a test, not a benchmark nobody runs. The
figures are not judged here (benchmarks print them beside their references)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.system.test_benchmarks import run_quick

pytestmark = pytest.mark.devcluster

#: benchmark -> (a line its output must hold, xdist group or None)
ON_CLUSTER = {
    "transport_bench": (r"upload +hpcui +\d+\.\d +scp", None),
    "submit_bench": (r"one submit +hpcui over SSH +\d+\.\d ms", None),
    "cli_bench": (r"hpcui jobs --json \(agent, warm\) +\d+\.\d+ms", None),
    "container_bench": (r"enroot +\d+\.\d\d +\d+\.\d\d", None),
    "end_bench": (r"pushed .* p95 +\d+\.\d\d s", None),
    "env_bench": (r"\n +uv +\d+\.\d\d s .*\n +pip +\d+\.\d\d s", "pbs"),
    "forward_bench": (r"through hpcui's forward +median +\d+\.\d MiB/s", None),
    "node_ssh_bench": (r"through hpcui proxy +\d+\.\d MiB/s", None),
    "folder_bench": (r"small +down again +\d+\.\d\d +\d+\.\d\d", None),
    "site_bench": (r"\[queue\] held array of 20: .* per refresh", None),
    "stall_bench": (r"stall noticed after \d+\.\d s", None),
    "usage_bench": (r"one look, 2-node job .* median +\d+\.\d ms", "distributed"),
    "scaling_bench": (r"\n +2 +\d +DDP +\d+\.\d{3}", "distributed"),
    "framework_start_bench": (r"lightning +\d+\.\d\ds +\d+\.\d\ds", "frameworks"),
    "map_bench": (r"hpcui map, packed \(call_s=\) +\d+ +\d+\.\d +\d+\.\d", None),
}


def _param(name: str):
    _pattern, group = ON_CLUSTER[name]
    marks = [pytest.mark.xdist_group(group)] if group else []
    return pytest.param(name, marks=marks, id=name)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", [_param(n) for n in sorted(ON_CLUSTER)])
def test_dev_cluster_benchmark_runs_quick(name: str, devcluster: Path, tmp_path: Path) -> None:
    env = {"HPCUI_CONFIG": str(devcluster), "XDG_RUNTIME_DIR": str(tmp_path)}
    if name != "cli_bench":  # cli_bench measures the agent itself, in its own folder
        env["HPCUI_AGENT"] = "off"
    out = run_quick(name, env, timeout=540)
    assert re.search(ON_CLUSTER[name][0], out), out
