"""The environments a cluster holds (built by env=, hpcui.submission.environments): listed
with their size and inode count (inode quotas are the tightest limit at JSC and MN5),
shown, removed (never one a waiting or running job of this machine uses), and built ahead
of any job (`hpcui env build`). `hpcui env list|show|rm|build` and `Cluster.environments`."""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from hpcui.backends.model import Model
from hpcui.errors import HpcuiError, UsageError
from hpcui.profiles import Profile
from hpcui.store.registry import Registry
from hpcui.store.remote import RemoteInfo
from hpcui.submission import environments
from hpcui.transport.base import Transport
from hpcui.transport.quoting import quote_bytes

#: touched by each job that runs the environment, as it starts (backends' batch scripts)
USED = ".hpcui-used"


class EnvInfo(Model):
    """One environment on the cluster (`hpcui env list --json`)."""

    key: str
    python: str
    requirements: list[str]
    size_bytes: int
    inodes: int
    built_at: datetime | None = None
    #: when a job last started with it (any machine's), or this machine last submitted one
    used_at: datetime | None = None
    #: waiting or running jobs of this machine that run it
    in_use_by: list[str] = []


def list_command(envs: str) -> str:
    """Per ready environment: key, KiB, inodes, built and last used (epoch; a job touches
    USED as it starts, from any machine), its requirements (a line)."""
    e = quote_bytes(envs).decode()
    return (
        f'for d in {e}/*/; do d=${{d%/}}; [ -e "$d/{environments.READY}" ] || continue; '
        's=$(du -sk "$d" 2>/dev/null | cut -f1); n=$(find "$d" 2>/dev/null | wc -l); '
        f'b=$(stat -c %Y "$d/{environments.READY}"); '
        f'u=$(stat -c %Y "$d/{USED}" 2>/dev/null || echo -); '
        "r=$(tr '\\n' ' ' < \"$d.requirements.txt\" 2>/dev/null); "
        'printf \'ENV\\t%s\\t%s\\t%s\\t%s\\t%s\\t%s\\n\' "${d##*/}" "${s:-0}" "$n" "$b" "$u" "$r"; '
        "done; true"
    )


def parse_list(text: str, envs: str) -> list[EnvInfo]:
    out = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) != 7 or parts[0] != "ENV" or not parts[2].isdigit():
            continue
        _, key, kib, inodes, built, used, reqs = parts
        out.append(
            EnvInfo(
                key=key,
                python=f"{envs}/{key}/bin/python",
                requirements=reqs.split(),
                size_bytes=int(kib or 0) * 1024,
                inodes=int(inodes.strip() or 0),
                built_at=datetime.fromtimestamp(int(built)) if built.isdigit() else None,
                used_at=datetime.fromtimestamp(int(used)) if used.isdigit() else None,
            )
        )
    return out


def _latest(there: datetime | None, here: float | None) -> datetime | None:
    seen = [t for t in (there, datetime.fromtimestamp(here) if here else None) if t is not None]
    return max(seen) if seen else None


def key_of(python: str) -> str | None:
    """The environment a job's Python is in (`.../envs/<key>/bin/python`), if any."""
    head, sep, tail = python.rpartition("/envs/")
    key = tail.split("/", 1)[0]
    return key if sep and head and len(key) == 16 else None


class EnvStore:
    """One cluster's environments."""

    def __init__(
        self,
        *,
        name: str,
        transport: Transport,
        registry: Registry,
        info: Callable[[], RemoteInfo],
        profile: Profile,
        python: str,
        setup: Sequence[str],
    ) -> None:
        self.name, self.transport, self.registry = name, transport, registry
        self._info, self.profile, self.python, self.setup = info, profile, python, setup

    @property
    def folder(self) -> str:
        return f"{self._info().base}/envs"

    def list(self) -> list[EnvInfo]:
        """Every ready environment with its size, inodes, and this machine's use of it."""
        envs = self.folder
        res = self.transport.run(list_command(envs)).check(f"listing environments on {self.name}")
        found = parse_list(res.stdout, envs)
        used: dict[str, float] = {}
        live: dict[str, list[str]] = {}
        for rec in self.registry.list(self.name, limit=100_000):
            key = rec.meta.get("env")
            if not key:
                continue
            used[key] = max(used.get(key, 0.0), rec.submitted_at)
            if not rec.state.is_final and rec.job_id:
                live.setdefault(key, []).append(rec.job_id)
        return [
            e.model_copy(update={"used_at": _latest(e.used_at, used.get(e.key)),
                                 "in_use_by": live.get(e.key, [])})
            for e in found
        ]  # fmt: skip

    def show(self, key: str) -> EnvInfo:
        return self._find(self.list(), key)

    def _find(self, envs: Sequence[EnvInfo], key: str) -> EnvInfo:
        """The environment of this key, or of this prefix (4 characters at least)."""
        for env in envs:
            if env.key == key or (env.key.startswith(key) and len(key) >= 4):
                return env
        raise UsageError(
            f"No environment {key!r} on {self.name}: `hpcui env list -c {self.name}` lists them."
        )

    def remove(self, keys: Sequence[str]) -> builtins.list[str]:
        """Remove these environments (their folder, requirements, build logs); refused for
        one a waiting or running job of this machine runs. Returns the keys removed."""
        envs = self.list()  # one listing: every key and prefix is found in it
        return self._remove([self._find(envs, k) for k in keys])

    def _remove(self, picked: Sequence[EnvInfo]) -> builtins.list[str]:
        busy = [f"{e.key} ({', '.join(e.in_use_by)})" for e in picked if e.in_use_by]
        if busy:
            raise UsageError(
                f"Not removed: {'; '.join(busy)} still run it. Remove it when they end."
            )
        keys = list(dict.fromkeys(e.key for e in picked))
        folder = quote_bytes(self.folder).decode()
        for k in keys:  # keys are 16 hex digits: listed by the cluster, not typed here
            if not k.isalnum():
                raise UsageError(f"{k!r} is not an environment's key.")
        targets = " ".join(f"{folder}/{k} {folder}/{k}.*" for k in keys)
        self.transport.run(f"rm -rf {targets}").check(f"removing environments on {self.name}")
        info = self._info()
        for k in keys:
            with contextlib.suppress(KeyError):
                info.envs.remove(k)
        return keys

    def clean(self, older_than: timedelta, *, dry_run: bool = False) -> builtins.list[EnvInfo]:
        """`hpcui clean --older-than`: every environment neither built nor used (a job's
        start, from any machine; a submit from this one) within `older_than`, and run by
        no waiting or running job of this machine. Returns those removed (or, dry run,
        that would be)."""
        cutoff = datetime.now() - older_than
        idle = [
            e for e in self.list()
            if not e.in_use_by and max(t for t in (e.built_at, e.used_at, datetime.min) if t)
            < cutoff
        ]  # fmt: skip
        if idle and not dry_run:
            self._remove(idle)
        return idle

    def build(self, env: Sequence[str]) -> str:
        """An environment of these requirements (or a requirements file), built now or
        found ready: its Python. "auto" needs a call: it is refused here."""
        if [e.strip() for e in env] == [environments.AUTO]:
            raise UsageError(
                "env build needs the requirements: `auto` is what a call uses, known only at "
                "its submit (submit with --env auto)."
            )
        spec = environments.spec_of(env, [])
        if spec.existing:
            raise UsageError(f"{spec.existing} is an environment already: nothing to build.")
        info = self._info()
        if info.python_version is None:
            raise HpcuiError(f"{self.name}'s Python did not answer: cannot build for it.")
        return environments.ensure(
            self.transport, info, spec, cluster=self.name, python=self.python, setup=self.setup,
            profile=self.profile, cache=environments.wheel_cache(),
        )  # fmt: skip
