"""A sweep's configurations: a grid, a list or random draws, each with a stable key.

The key is the configuration's canonical JSON hashed, so the same configuration is the same
element in every process and every resubmission: what makes a sweep resumable by name and
never doubled. Pure (no I/O): the API, the CLI and the tests expand the same way.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random as random_module
import re
from collections.abc import Mapping, Sequence
from typing import Any

from hpcui.errors import UsageError

#: a parameter's name: a column, a keyword argument and a `--name=value` option
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
#: more configurations than this is a typo in a grid, not a sweep
MAX_CONFIGS = 100_000


def canonical(config: Mapping[str, Any]) -> str:
    """The one JSON text of a configuration: sorted keys, no spaces, no NaN."""
    try:
        return json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UsageError(
            f"A sweep's values must be JSON (numbers, strings, booleans, None, lists, dicts) "
            f"and finite: {exc} in {config!r}."
        ) from None


def config_key(config: Mapping[str, Any]) -> str:
    """12 hex digits of the canonical JSON's sha256: the element's name for good."""
    return hashlib.sha256(canonical(config).encode()).hexdigest()[:12]


def _names(params: Mapping[str, Any], what: str) -> None:
    for name in params:
        if not isinstance(name, str) or not NAME.match(name):
            raise UsageError(
                f"{what}: {name!r} is not a parameter name (letters, digits, _ . -; starting "
                "with a letter or _)."
            )


def _grid(grid: Mapping[str, Any]) -> list[dict[str, Any]]:
    _names(grid, "grid")
    values = []
    for name, options in grid.items():
        if isinstance(options, str | bytes) or not isinstance(options, Sequence):
            raise UsageError(f"grid[{name!r}] must be a list of values, got {options!r}.")
        if not options:
            raise UsageError(f"grid[{name!r}] is empty: a grid needs at least one value each.")
        values.append(list(options))
    size = math.prod(len(v) for v in values)
    if size > MAX_CONFIGS:
        raise UsageError(f"The grid has {size} configurations (at most {MAX_CONFIGS}).")
    return [dict(zip(grid, combo)) for combo in itertools.product(*values)]


def _draw(rng: random_module.Random, name: str, how: Any) -> Any:
    if isinstance(how, list):
        if not how:
            raise UsageError(f"random[{name!r}] is an empty list of choices.")
        return rng.choice(how)
    if isinstance(how, tuple) and len(how) == 2 and all(isinstance(v, int | float) for v in how):
        low, high = how
        if isinstance(low, int) and isinstance(high, int):
            return rng.randint(low, high)
        return rng.uniform(low, high)
    if isinstance(how, dict) and set(how) == {"log"} and len(how["log"]) == 2:
        low, high = how["log"]
        if not (isinstance(low, int | float) and isinstance(high, int | float) and 0 < low < high):
            raise UsageError(f"random[{name!r}]: log needs two numbers 0 < low < high.")
        return math.exp(rng.uniform(math.log(low), math.log(high)))
    raise UsageError(
        f"random[{name!r}] = {how!r}: give a list (one of its values), a (low, high) tuple "
        "(uniform; integers when both are) or {'log': [low, high]} (log-uniform)."
    )


def _random(space: Mapping[str, Any], seed: int | None) -> list[dict[str, Any]]:
    params = {k: v for k, v in space.items() if k != "n"}
    n = space.get("n")
    if not isinstance(n, int) or isinstance(n, bool) or not 0 < n <= MAX_CONFIGS:
        raise UsageError(f"random needs 'n': how many draws (1 to {MAX_CONFIGS}), got {n!r}.")
    _names(params, "random")
    rng = random_module.Random(0 if seed is None else seed)  # the same draws every time
    return [{name: _draw(rng, name, how) for name, how in params.items()} for _ in range(n)]


def expand(
    *,
    grid: Mapping[str, Any] | None = None,
    configs: Sequence[Mapping[str, Any]] | None = None,
    random: Mapping[str, Any] | None = None,
    seed: int | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """(key, configuration) for each element, in order; a configuration given twice is one
    element (its first place)."""
    given = [what for what in (grid, configs, random) if what is not None]
    if len(given) != 1:
        raise UsageError("A sweep takes exactly one of grid=, configs= or random=.")
    if grid is not None:
        found = _grid(grid)
    elif configs is not None:
        found = []
        for c in configs:
            if not isinstance(c, Mapping):
                raise UsageError(f"configs= holds dicts of parameters, got {c!r}.")
            _names(c, "configs")
            found.append(dict(c))
        if len(found) > MAX_CONFIGS:
            raise UsageError(f"{len(found)} configurations (at most {MAX_CONFIGS}).")
    else:
        found = _random(random or {}, seed)
    if not found:
        raise UsageError("The sweep has no configurations.")
    out: dict[str, dict[str, Any]] = {}
    for config in found:
        # JSON's own values: a tuple becomes the list it is stored as, so keys never differ
        plain = json.loads(canonical(config))
        out.setdefault(config_key(plain), plain)
    return list(out.items())


def argv_of(config: Mapping[str, Any]) -> list[str]:
    """A configuration as a script's options: `--lr=0.001 --layers=[64,64] --flag`."""
    argv = []
    for name, value in config.items():
        if value is True:
            argv.append(f"--{name}")
        elif value is False or value is None:
            continue
        elif isinstance(value, str):
            argv.append(f"--{name}={value}")
        else:
            argv.append(f"--{name}={json.dumps(value, separators=(',', ':'))}")
    return argv


def parse_grid_option(text: str) -> tuple[str, list[Any]]:
    """`--grid lr=1e-3,1e-4`: a name and its values, each JSON where it parses
    (1e-3 -> 0.001, true -> True), else the text itself."""
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep or not NAME.match(name) or not values.strip():
        raise UsageError(f"--grid takes NAME=V1,V2,... (e.g. lr=1e-3,1e-4), got {text!r}.")
    out = []
    for raw in values.split(","):
        raw = raw.strip()
        try:
            out.append(json.loads(raw))
        except json.JSONDecodeError:
            out.append(raw)
    return name, out
