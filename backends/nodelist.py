"""Host lists as schedulers hand them to a job: Slurm hostlists and PBS node files.

Pure functions (no `scontrol`): the compute side must find the first node and the
per-node task counts without a subprocess, and on sites where `scontrol` is not on
the compute nodes' PATH.
"""

from __future__ import annotations

import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_TASKS = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets: `a[1,3],b` -> [`a[1,3]`, `b`]."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in hostlist {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise ValueError(f"unbalanced '[' in hostlist {text!r}")
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _expand_ranges(body: str, text: str) -> list[str]:
    """`001-003,007` -> ['001', '002', '003', '007'], keeping zero padding."""
    out: list[str] = []
    for item in body.split(","):
        m = _RANGE.match(item.strip())
        if not m:
            raise ValueError(f"bad range {item!r} in hostlist {text!r}")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise ValueError(f"descending range {item!r} in hostlist {text!r}")
        out += [str(i).zfill(len(lo)) for i in range(int(lo), int(hi) + 1)]
    return out


def _expand_one(host: str, text: str) -> list[str]:
    """One hostlist element, possibly with several bracket groups (`r[1-2]n[01-02]`)."""
    start = host.find("[")
    if start < 0:
        if "]" in host:
            raise ValueError(f"unbalanced ']' in hostlist {text!r}")
        return [host]
    end = host.find("]", start)
    prefix, body, rest = host[:start], host[start + 1 : end], host[end + 1 :]
    tails = _expand_one(rest, text) if rest else [""]
    return [prefix + mid + tail for mid in _expand_ranges(body, text) for tail in tails]


def expand_nodelist(text: str) -> list[str]:
    """Slurm hostlist -> hostnames in order: `gpu[001-004,007],login1` -> gpu001..gpu004, gpu007, login1.

    Same result as `scontrol show hostnames`, including zero padding and several
    bracket groups per name. Raises ValueError on a malformed list.
    """
    hosts: list[str] = []
    for part in _split_top(text.strip()):
        hosts += _expand_one(part, text)
    if not hosts:
        raise ValueError(f"empty hostlist {text!r}")
    return hosts


def expand_tasks_per_node(text: str) -> list[int]:
    """`SLURM_TASKS_PER_NODE` -> one count per node: `2(x3),1` -> [2, 2, 2, 1]."""
    out: list[int] = []
    for item in text.split(","):
        m = _TASKS.match(item.strip())
        if not m:
            raise ValueError(f"cannot read tasks per node {text!r}")
        out += [int(m.group(1))] * int(m.group(2) or 1)
    return out


def nodefile_hosts(text: str) -> list[str]:
    """A PBS `$PBS_NODEFILE` (one line per process slot) -> distinct hosts, first-seen order."""
    seen: dict[str, None] = {}
    for line in text.splitlines():
        host = line.strip()
        if host:
            seen.setdefault(host, None)
    return list(seen)
