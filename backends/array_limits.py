"""How many tasks one job array may have, as each scheduler says it: Slurm's
``MaxArraySize`` in ``scontrol show config`` (task indices 0 .. MaxArraySize-1; 0 turns
arrays off), PBS's ``max_array_size`` server attribute in ``qstat -Bf -F json`` (subjobs
per array). Fixtures: tests/fixtures/slurm-22.05.8-dev/scontrol_show_config.txt,
tests/fixtures/openpbs-23.06/qstat_Bf_json.json.
"""

from __future__ import annotations

import json
import re

SLURM_COMMAND = ("scontrol", "show", "config")
PBS_COMMAND = ("qstat", "-Bf", "-F", "json")
#: what each scheduler uses when its configuration says nothing (slurm.conf(5), PBS RG)
SLURM_DEFAULT = 1001
PBS_DEFAULT = 10000

_SLURM_LINE = re.compile(r"^MaxArraySize\s*=\s*(\d+)\s*$", re.M)


def parse_slurm(text: str) -> int:
    """MaxArraySize from `scontrol show config`; ValueError when the output is not that."""
    if "SLURM_VERSION" not in text and "Configuration data" not in text:
        raise ValueError(f"not `scontrol show config` output: {text[:200]!r}")
    m = _SLURM_LINE.search(text)
    return int(m.group(1)) if m else SLURM_DEFAULT


def parse_pbs(text: str) -> int:
    """max_array_size of the (first) server in `qstat -Bf -F json`."""
    try:
        servers = json.loads(text)["Server"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not `qstat -Bf -F json` output: {text[:200]!r}") from exc
    for attrs in servers.values():
        value = attrs.get("max_array_size")
        return int(value) if value is not None else PBS_DEFAULT
    raise ValueError("`qstat -Bf -F json` listed no server")
