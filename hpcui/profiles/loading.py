"""Finding profiles: the built-in TOML files and the user's ``[profiles.NAME]`` tables."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from hpcui.errors import ConfigError
from hpcui.profiles.model import Profile, _deep_merge, _validate


def builtin_profiles() -> list[str]:
    """Names of the profiles shipped with hpcui."""
    return sorted(
        p.name[:-5] for p in resources.files(__package__).iterdir() if p.name.endswith(".toml")
    )


@cache
def _builtin(name: str) -> Profile:
    import tomllib  # Python 3.11+ (requires-python)

    path = resources.files(__package__).joinpath(f"{name}.toml")
    if not path.is_file():
        raise ConfigError(
            f"No built-in profile {name!r} (known: {', '.join(builtin_profiles())}). "
            "Fix `profile = ...` in your cluster config."
        )
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return Profile(name=name, **data)


def load_profile(name: str, overrides: dict[str, Any] | None = None) -> Profile:
    """A built-in profile by name, with the cluster config's `profile_overrides` applied."""
    return _builtin(name).with_overrides(overrides)


def resolve_profile(
    name: str,
    user_profiles: dict[str, dict[str, Any]] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Profile:
    """The profile `name`: the user's `[profiles.NAME]` table, else the built-in one, with a
    cluster's `profile_overrides` applied last.

    A user table is a full profile, or `base = "<profile>"` plus the values that differ
    (deep-merged like `profile_overrides`: tables merge, other values replace). A base is
    a built-in or another user profile. A user table may take a built-in's name only as
    `base = "<that name>"`: it then changes the built-in for every cluster that uses it.
    Unknown bases, cycles and bad values are `ConfigError`s naming the table.
    """
    return _resolve(name, user_profiles or {}, ()).with_overrides(overrides)


def _resolve(name: str, user: dict[str, dict[str, Any]], chain: tuple[str, ...]) -> Profile:
    builtins = builtin_profiles()
    if name in chain:
        loop = " -> ".join((*chain[chain.index(name) :], name))
        raise ConfigError(
            f"[profiles.{chain[-1]}]: the `base` profiles form a cycle ({loop}). Base one of "
            "them on a built-in profile, or write it out in full without `base`."
        )
    table = user.get(name)
    if table is None:
        if name in builtins:
            return _builtin(name)
        yours = f"; yours: {', '.join(sorted(user))}" if user else ""
        where = f"[profiles.{chain[-1]}]: base = {name!r}" if chain else f"profile {name!r}"
        fix = (
            "Fix `base` in that table"
            if chain
            else f"Fix `profile = ...` in your cluster config, or add a [profiles.{name}] table"
        )
        raise ConfigError(
            f"No built-in or user profile {name!r} for {where} "
            f"(known: {', '.join(builtins)}{yours}). {fix}."
        )
    where = f"[profiles.{name}]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table of profile values. Fix your config.")
    data = dict(table)
    base = data.pop("base", None)
    data.pop("name", None)  # the table key is the name
    if base is None:
        if name in builtins:
            raise ConfigError(
                f"{where} has the name of a built-in profile. To change the built-in for every "
                f'cluster, add base = "{name}" to the table; for a profile of your own, pick '
                "another name."
            )
        return _validate({**data, "name": name}, where)
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{where}: base must be a profile name, not {base!r}. Fix `base`.")
    if base == name:
        if name not in builtins:
            raise ConfigError(
                f"{where}: base = {name!r} names the table itself and no built-in profile has "
                "that name. Name a built-in or another user profile, or drop `base`."
            )
        parent = _builtin(name)  # deliberately changing the built-in of the same name
    else:
        parent = _resolve(base, user, (*chain, name))
    merged = _deep_merge(parent.model_dump(exclude_defaults=False), data)
    return _validate({**merged, "name": name}, where)
