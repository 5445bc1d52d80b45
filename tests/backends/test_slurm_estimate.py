"""`sbatch --test-only` read from real captured answers (tests/fixtures/slurm-test-only)."""

from __future__ import annotations

from datetime import datetime

from hpcui.backends.slurm.estimate import END, estimate_command, parse_test_only
from tests.conftest import ROOT

FIX = ROOT / "tests" / "fixtures" / "slurm-test-only"


def test_an_estimate_and_a_refusal_in_one_answer():
    text = (
        (FIX / "started.txt").read_text() + f"{END} gpu\n"
        + (FIX / "refused.txt").read_text() + f"{END} nope\n"
    )  # fmt: skip
    ok, refused = parse_test_only(text)
    assert ok.partition == "gpu" and ok.nodes == "node1"
    assert ok.start == datetime(2026, 11, 27, 21, 16, 39)
    assert ok.said.startswith("to start at 2026-11-27T21:16:39 using 4 processors")
    assert refused.partition == "nope" and refused.start is None
    assert refused.said == "Slurm would not queue it: invalid partition specified: nope"


def test_the_command_carries_each_script_without_quoting_its_text():
    cmd = estimate_command({"gpu": "#!/bin/bash\necho '$HOME' \"x\"\n", "": "#!/bin/sh\n"})
    assert cmd.count("sbatch --test-only") == 2 and "'$HOME'" not in cmd
    assert f"echo {END} gpu" in cmd and f"echo {END} -" in cmd
