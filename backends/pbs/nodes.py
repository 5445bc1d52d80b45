"""``pbsnodes -a -F json``: a PBS Pro server's hosts as hpcui's NodeInfo, per queue.

`hpcui free` asks what could start now: per host the ncpus and ngpus not assigned, and the
host's state; hosts that are down, offline or unknown are counted out. A PBS host serves
every execution queue unless it names one (its ``queue`` attribute), so a host is listed
once per queue it serves (the queues from ``qstat -Q`` in the same round trip, the
default queue from ``qstat -Bf``). Fixtures: tests/fixtures/openpbs-23.06 (COMMANDS.md).
"""

from __future__ import annotations

import json
import re
from typing import Any

from hpcui.backends.pbs.queues import parse_qstat_q
from hpcui.backends.records import NodeInfo
from hpcui.backends.required_fields import require
from hpcui.backends.usage import pbs_mem_mb

#: one round trip: the hosts, the queues, the server's default queue (markers between)
FREE_COMMAND = (
    "pbsnodes -a -F json; echo '@@hpcui-queues@@'; qstat -Q; "
    "echo '@@hpcui-server@@'; qstat -Bf -F json"
)
#: PBS host states that take no job (pbsnodes(8B)); "offline" is an administrator's act
_OUT = ("down", "offline", "state-unknown", "stale", "unresolvable", "maintenance")


def parse_free(text: str) -> list[NodeInfo]:
    """The hosts of FREE_COMMAND's output, once per execution queue they serve."""
    nodes_part, _, rest = text.partition("@@hpcui-queues@@")
    queues_part, _, server_part = rest.partition("@@hpcui-server@@")
    queues = [q for q in parse_qstat_q(queues_part) if q.kind == "exec"]
    default = _default_queue(server_part)
    return parse_pbsnodes_json(nodes_part, [q.partition for q in queues], default)


def parse_pbsnodes_json(text: str, queues: list[str], default: str = "") -> list[NodeInfo]:
    data = json.loads(text[text.find("{") :] if "{" in text else "{}")
    hosts = data.get("nodes")
    if not isinstance(hosts, dict):
        raise ValueError(f"no `nodes` in pbsnodes -F json output: {text.strip()[:200]!r}")
    out = []
    for name, attrs in hosts.items():
        if not isinstance(attrs, dict):
            continue
        require(attrs, ("state",), f"pbsnodes' record of {name}")
        avail = attrs.get("resources_available") or {}
        used = attrs.get("resources_assigned") or {}
        cpus, gpus = _int(avail.get("ncpus")), _int(avail.get("ngpus"))
        cpus_used, gpus_used = _int(used.get("ncpus")), _int(used.get("ngpus"))
        raw = str(attrs.get("state", ""))
        words = set(raw.split(","))
        if words & set(_OUT):
            state = "drained" if "offline" in words else "down"
        elif "job-exclusive" in words or (cpus and cpus_used >= cpus):
            state = "allocated"  # as sinfo says it: no core left (GPUs alone: mixed)
        elif cpus_used or gpus_used or "job-busy" in words:
            state = "mixed"
        else:
            state = "idle"
        own = attrs.get("queue")
        for queue in [own] if isinstance(own, str) and own else queues:
            out.append(
                NodeInfo(
                    node=name,
                    partition=queue,
                    is_default=queue == default,
                    state=state,
                    responding="down" not in words and "state-unknown" not in words,
                    cpus_alloc=min(cpus_used, cpus),
                    cpus_idle=max(cpus - cpus_used, 0),
                    cpus_total=cpus,
                    gpus_total=gpus,
                    gpus_used=min(gpus_used, gpus),
                    mem_mb=_mb(avail.get("mem")),
                    # PBS leaves resources_assigned.mem out while nothing holds memory
                    mem_alloc_mb=_mb(used.get("mem", "0kb" if avail.get("mem") else None)),
                )
            )
    return out


def _default_queue(text: str) -> str:
    m = re.search(r'"default_queue"\s*:\s*"([^"]+)"', text)
    return m.group(1) if m else ""


def _mb(value: Any) -> int | None:
    mb = pbs_mem_mb(str(value)) if value is not None else None
    return None if mb is None else int(mb)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
