"""Which options a batch directive sets, read the way sbatch and qsub read it (getopt).

The reserved-option guard must see `--arr=0-3` as `--array` (getopt_long takes any
unambiguous prefix), `-Ha0-3` as `-H` then `-a 0-3` (short options cluster; one that
takes an argument ends the cluster), and `--array 0-3` as `--array`. Anything the
scheduler would read as a reserved option is found here; what it would reject anyway
(an ambiguous prefix) may be reported too, which only refuses a directive sbatch refuses.
"""

from __future__ import annotations

from collections.abc import Iterable


def options_set(directive: str, *, long_names: Iterable[str], no_arg: str) -> set[str]:
    """Options (``--name`` or ``-x``) a directive may set. `long_names`: the long options
    to match prefixes against (the reserved ones suffice); `no_arg`: the short option
    letters that take no argument (any other letter takes one, maybe optional, and the
    rest of the word is it)."""
    text = directive.strip()
    if text.startswith("--"):
        name = (text[2:].split("=", 1)[0].split(None, 1) or [""])[0]
        if not name:
            return {"--"}
        return {f"--{full}" for full in long_names if full.startswith(name)} or {f"--{name}"}
    if not text.startswith("-"):
        return set()
    found = set()
    for letter in (text[1:].split(None, 1) or [""])[0]:
        found.add(f"-{letter}")
        if letter not in no_arg:
            break
    return found
