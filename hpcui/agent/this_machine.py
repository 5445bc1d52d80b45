"""Which calls the agent leaves to the caller: those about this machine.

The agent is shared by every shell of one user and config, and holds one environment:
the first caller's PATH, CUDA_VISIBLE_DEVICES, working directory. A cluster without a
`host` is this machine (plain processes, or the Slurm whose sbatch is on PATH, on the GPUs
CUDA_VISIBLE_DEVICES leaves), so what the agent would answer for it is what the first
shell saw. Such calls share no login either: the caller runs them itself, with its own
environment. Remote clusters depend on the environment only through the config, data
and home the agent is keyed on (hpcui.transport.agent.paths.KEY_VARS).
"""

from __future__ import annotations

from collections.abc import Sequence

from hpcui.errors import HpcuiError


def _option_values(argv: Sequence[str]) -> list[str]:
    """The values of `-c`/`--cluster` wherever they stand."""
    values: list[str] = []
    words = iter(argv)
    for word in words:
        if word == "--":
            break
        if word in ("-c", "--cluster"):
            values.append(next(words, ""))
        elif word.startswith("--cluster="):
            values.append(word.split("=", 1)[1])
        elif word.startswith("-c") and len(word) > 2:
            values.append(word[2:])
    return values


def local_clusters(argv: Sequence[str]) -> list[str]:
    """The clusters without a host that `hpcui ARGV` would use (none: the agent serves it).

    Named with `-c a,b`, as `CLUSTER:JOB`, or the config's default when none is named.
    `-c all` stays with the agent (its remote clusters share the login; the local one is
    listed as the agent sees this machine). A config that does not load leaves the call to
    the agent, whose run of it reports the error as a direct run would.
    """
    from hpcui.config import (
        load_config,
    )

    try:
        cfg = load_config()
    except HpcuiError:
        return []
    names: set[str] = set()
    values = _option_values(argv)
    for value in values:
        names |= {n for n in value.split(",") if n and n != "all"}
    words = list(argv[: argv.index("--")] if "--" in argv else argv)
    if "exec" not in words:  # exec's words are a remote command line, not job references
        names |= {w.split(":", 1)[0] for w in words if w.split(":", 1)[0] in cfg.clusters}
    if not names and not values:
        try:
            names = {cfg.cluster(None).name}
        except HpcuiError:
            return []
    return sorted(n for n in names if n in cfg.clusters and cfg.clusters[n].host is None)
