"""Adding a cluster (`hpcui init` / `hpcui add`): connect, look at the site, suggest a
profile, find a Python whose minor version matches this one, write the config table.

Nothing is written until every check passed: a wrong host, key or missing Python leaves
the config file as it was. The table is appended as text, so the user's other tables and
their comments stay exactly as they were.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from hpcui.backends.model import Model
from hpcui.clusters.cluster import Cluster
from hpcui.config import CLUSTER_NAME, ClusterConfig, load_config
from hpcui.errors import ConfigError, UsageError
from hpcui.node.hello import hello
from hpcui.profiles.loading import builtin_profiles, load_profile

MARK = "@@hpcui-probe@@"
PYTHON_MODULES = re.compile(r"^(?:cray-)?python/[A-Za-z0-9._+-]+$", re.I)
_VERSION = re.compile(r"(\d+)\.(\d+)")


class SiteFacts(Model):
    """What one look at the login node showed."""

    hostname: str = ""
    scheduler: str | None = None  # "slurm", "pbs" or None
    #: partition -> (cores per node, GPUs per node) as sinfo reports its nodes
    partitions: dict[str, tuple[int | None, int | None]] = {}
    queues: list[str] = []
    #: executable path -> "3.11"
    pythons: dict[str, str] = {}
    #: module full names that provide Python ("python/3.11", "cray-python/3.11.7")
    python_modules: list[str] = []


class Proposal(Model):
    """The table `add` writes, and why each value was chosen."""

    name: str
    cluster: ClusterConfig
    profile_reason: str
    python_reason: str
    facts: SiteFacts
    tested: bool = False
    config_path: str = ""

    def table(self) -> str:
        return table_text(self.cluster)


# --- the look at the site -------------------------------------------------------------


def probe_command() -> str:
    """One login-shell round trip: host name, scheduler, partitions/queues, Pythons on
    PATH and the modules that provide Python."""
    pythons = " ".join(f"python3.{minor}" for minor in range(20, 5, -1))
    script = f"""
echo {MARK} host; hostname -f 2>/dev/null || hostname
echo {MARK} sched; command -v sbatch; command -v qsub
echo {MARK} sinfo; sinfo -h -o '%P|%c|%G' 2>/dev/null | head -100
echo {MARK} queues; command -v sbatch >/dev/null || qstat -Q 2>/dev/null | head -100
echo {MARK} python
for p in python3 {pythons} python; do
  q=$(command -v "$p" 2>/dev/null) || continue
  v=$("$q" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) && echo "$q $v"
done
echo {MARK} modules
{{ module --redirect -t avail 2>/dev/null || module -t avail 2>&1; }} | grep -i -E '^(cray-)?python/' | head -200
echo {MARK} end
"""
    return "bash -lc " + shlex.quote(script)


def parse_probe(text: str) -> SiteFacts:
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith(MARK):
            current = line[len(MARK) :].strip()
            sections[current] = []
        elif current is not None and line.strip():
            sections[current].append(line.strip())
    if "end" not in sections:
        raise UsageError(
            "The login node did not answer hpcui's look at the site (no end mark): is the "
            "login shell printing errors? Try `ssh HOST true` by hand."
        )
    sched = sections.get("sched", [])
    scheduler = (
        "slurm"
        if any(p.endswith("/sbatch") for p in sched)
        else "pbs"
        if any(p.endswith("/qsub") for p in sched)
        else None
    )
    partitions: dict[str, tuple[int | None, int | None]] = {}
    for line in sections.get("sinfo", []):
        parts = line.split("|")
        if len(parts) != 3:
            continue
        name, cores, gres = parts[0].rstrip("*"), parts[1].rstrip("+"), parts[2]
        gpus = sum(int(m[1]) for m in re.finditer(r"gpu(?::[^:,(]+)?:(\d+)", gres)) or (
            0 if gres in ("(null)", "") else None
        )
        partitions.setdefault(name, (int(cores) if cores.isdigit() else None, gpus))
    queues = [
        line.split()[0]
        for line in sections.get("queues", [])
        if line.split() and not line.startswith(("Queue", "-"))
    ]
    pythons: dict[str, str] = {}
    for line in sections.get("python", []):
        path, _, version = line.rpartition(" ")
        if path and _VERSION.fullmatch(version):
            pythons.setdefault(path, version)
    # only plain names: what is proposed becomes a setup line of every job
    modules = [m.split("(")[0] for m in sections.get("modules", [])]
    modules = [m for m in modules if PYTHON_MODULES.match(m)]
    return SiteFacts(
        hostname=(sections.get("host") or [""])[0],
        scheduler=scheduler,
        partitions=partitions,
        queues=queues,
        pythons=pythons,
        python_modules=list(dict.fromkeys(modules)),
    )


# --- a profile --------------------------------------------------------------------------


def suggest_profile(facts: SiteFacts, host: str) -> tuple[str, str]:
    """(profile name, why): the built-in profile that fits the site best."""

    best: tuple[int, str, str] = (0, "", "")
    names = {host.lower(), facts.hostname.lower(), facts.hostname.split(".")[0].lower()}
    for name in builtin_profiles():
        if name in ("local", "generic"):
            continue
        profile = load_profile(name)
        if profile.scheduler != facts.scheduler:
            continue
        score, why = 0, []
        if any(
            fnmatch.fnmatch(n, pattern.lower()) for n in names for pattern in profile.login_hosts
        ):
            score += 10
            why.append("login host")
        if profile.partitions and set(profile.partitions) <= set(facts.partitions):
            score += 3
            why.append(f"partitions {', '.join(sorted(profile.partitions))}")
        shapes = {shape for shape in facts.partitions.values()}
        if profile.cores_per_node and any(c == profile.cores_per_node for c, _ in shapes):
            score += 2
            why.append(f"{profile.cores_per_node} cores per node")
        if profile.gpus_per_node and any(g == profile.gpus_per_node for _, g in shapes):
            score += 2
            why.append(f"{profile.gpus_per_node} GPUs per node")
        if score > best[0]:
            best = (score, name, ", ".join(why))
    if best[0] >= 5:
        return best[1], f"matches {best[2]}"
    if facts.scheduler == "slurm":
        return "generic", "no built-in profile matches this Slurm site: nothing is assumed"
    raise UsageError(
        f"No built-in profile fits this {facts.scheduler or 'unknown'} site. Pass --profile "
        "NAME (see `hpcui profiles`) or write a [profiles.NAME] table (docs/profiles.md)."
    )


# --- a Python ----------------------------------------------------------------------------


def client_python() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def match_python(facts: SiteFacts, want: str | None = None) -> tuple[str, list[str], str]:
    """(python, setup lines, why) for a Python on the cluster whose minor version is
    `want` (this interpreter's): on PATH first, else a module. A mismatch is refused:
    results travel as pickles between the two interpreters."""
    want = want or client_python()
    for path, version in facts.pythons.items():
        if version == want:
            return path, [], f"{path} on the login node's PATH is Python {version}"
    for module in facts.python_modules:
        m = _VERSION.search(module.split("/", 1)[1])
        if m and f"{m[1]}.{m[2]}" == want:
            line = f"module load {shlex.quote(module)}"
            return "python3", [line], f"the module {module} is Python {want}"
    seen = [f"{p} ({v})" for p, v in facts.pythons.items()] + [
        f"module {m}" for m in facts.python_modules
    ]
    raise UsageError(
        f"No Python {want} on the cluster (this machine runs {want}; found: "
        f"{', '.join(seen) or 'none'}). Results and functions travel as pickles, so both "
        f"sides need the same minor version: install Python {want} there (e.g. `uv python "
        f"install {want}` in your home), or run hpcui here with one of those versions; "
        "then pass --python PATH (and --setup 'module load ...' if it needs one)."
    )


# --- the table ---------------------------------------------------------------------------


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return _toml_string(str(value))


def _toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and every control character escaped (a
    newline or ESC in a value is written as \\n / \\u001B and reads back as itself)."""
    out = []
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _key(name: str) -> str:
    """A table key: bare where TOML allows (letters, digits, _ and -), quoted otherwise
    (`a.b` unquoted would be a table `b` inside a table `a`)."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else _toml_string(name)


def table_text(cluster: ClusterConfig) -> str:
    lines = [f"[clusters.{_key(cluster.name)}]"]
    for key in ("host", "ssh_config", "user", "port", "identity_file", "proxy_jump",
                "profile", "python", "setup", "remote_base", "defaults"):  # fmt: skip
        value = getattr(cluster, key)
        if value not in (None, [], {}) and not (key == "remote_base" and value == "~/.hpcui"):
            lines.append(f"{key} = {_toml(value)}")
    return "\n".join(lines) + "\n"


def write_table(path: Path, cluster: ClusterConfig) -> None:
    """Append the table; the result is read back before it replaces the file, and the
    file is replaced in one rename (never half written). A config that is a symbolic link
    (dotfiles kept in a repository) stays one: its target is what gets replaced."""
    path = path.resolve() if path.is_symlink() else path
    old = path.read_text() if path.exists() else ""
    new = old + ("\n" if old and not old.endswith("\n\n") else "") + table_text(cluster)
    if not old.strip():
        new = f'default = "{cluster.name}"\n\n' + table_text(cluster)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".hpcui-config-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(new)
        try:
            load_config(tmp).cluster(cluster.name)  # what was written reads back
        except ConfigError as exc:  # a bug of ours: say it about the config, not the tmp
            raise UsageError(
                f"The table hpcui would add to {path} does not read back ("
                f"{str(exc).replace(tmp, str(path))}); {path} was left as it was."
            ) from None
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- the whole of it ----------------------------------------------------------------------


_DESTINATION = re.compile(
    r"(?:(?P<user>[^@\s]+)@)?(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^@:\s\[\]]+))"
    r"(?::(?P<port>\d{1,5}))?"
)


def split_destination(text: str) -> tuple[str | None, str, int | None]:
    """`[user@]host[:port]` (an IPv6 address in brackets) as (user, host, port), the way
    `ssh`/`scp` users write a login node; a plain host or ssh alias is (None, host, None)."""
    m = _DESTINATION.fullmatch(text.strip())
    if m is None:
        raise UsageError(
            f"{text!r} is not a login node: write host, user@host or host:port "
            "(an IPv6 address as [::1]:2222), or an ssh config alias."
        )
    port = int(m["port"]) if m["port"] else None
    if port is not None and not 0 < port < 65536:
        raise UsageError(f"Port {port} in {text!r} is not a TCP port (1-65535).")
    return m["user"], m["v6"] or m["host"], port


def check_name(name: str, config_path: Path) -> None:
    if not CLUSTER_NAME.fullmatch(name):
        raise UsageError(
            f"{name!r} cannot name a cluster: use letters, digits, '.', '_' or '-' "
            "(starting with a letter or digit)."
        )
    existing = load_config(config_path) if config_path.exists() else None
    if existing is not None and name in existing.clusters:
        raise UsageError(
            f"{config_path} has a cluster named {name!r} already: pick another name, or "
            "remove its table first (hpcui never rewrites your tables)."
        )


def propose(
    name: str,
    base: ClusterConfig,
    *,
    profile: str | None = None,
    python: str | None = None,
    setup: list[str] | None = None,
    account: str | None = None,
    ask_account: Callable[[str], str | None] | None = None,
    prompt: Callable[..., list[str]] | None = None,
    on_unknown_host: Callable[..., bool] | None = None,
) -> Proposal:
    """Connect with `base` (host, user, key...), look at the site and fill in the rest."""

    probe_cluster = base.model_copy(update={"name": name, "scheduler": "auto"})
    with Cluster(probe_cluster, prompt=prompt, on_unknown_host=on_unknown_host) as c:
        facts = parse_probe(c.run(probe_command()).stdout)
        if facts.scheduler is None and profile is None:
            raise UsageError(
                f"Neither Slurm (sbatch) nor PBS (qsub) is on the PATH of {base.host}'s login "
                "shell: is it a login node of a cluster? Pass --profile NAME if it is."
            )
        if profile is None:
            profile, profile_reason = suggest_profile(facts, base.host or "")
        else:
            profile_reason = "given"
        if python is None:
            python, found_setup, python_reason = match_python(facts)
            setup = [*(setup or []), *found_setup]
            if found_setup:  # the module must really give that Python
                check = c.run(
                    "bash -lc "
                    + shlex.quote(
                        "\n".join(found_setup)
                        + "\npython3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'"
                    )
                )
                if check.stdout.strip().splitlines()[-1:] != [client_python()]:
                    raise UsageError(
                        f"{found_setup[0]!r} did not give Python {client_python()} on "
                        f"{base.host} (python3 said {check.stdout.strip()[-40:]!r}, "
                        f"{check.stderr.strip()[-200:]!r}). Pass --python and --setup."
                    )
        else:
            python_reason = "given"

    chosen = load_profile(profile) if profile in builtin_profiles() else None
    defaults = dict(base.defaults)
    if chosen is not None and chosen.requires_account and not account and "account" not in defaults:
        account = ask_account(profile) if ask_account else None
        if not account:
            raise UsageError(
                f"The {profile} profile needs an account (project) to charge: pass "
                "--account NAME (your project's id at the site)."
            )
    if account:
        defaults["account"] = account
    cluster = base.model_copy(
        update={
            "name": name,
            "profile": profile,
            "python": python,
            "setup": setup or None,
            "defaults": defaults,
        }
    )
    return Proposal(
        name=name,
        cluster=cluster,
        profile_reason=profile_reason,
        python_reason=python_reason,
        facts=facts,
    )


def add_cluster(
    proposal: Proposal,
    config_path: Path,
    *,
    test: bool = True,
    prompt: Callable[..., list[str]] | None = None,
    on_unknown_host: Callable[..., bool] | None = None,
) -> Proposal:
    """Run the tiny test job (unless `test` is False), then write the table."""

    if test:
        with Cluster(proposal.cluster, prompt=prompt, on_unknown_host=on_unknown_host) as c:
            # seconds of work: a short limit lets the scheduler backfill it past a big job
            # that waits, instead of queueing behind it
            job = c.submit(hello, time="2m", name="hpcui-init-test")
            answer = job.result(timeout=600)
        if answer != hello():
            raise UsageError(f"The test job answered {answer!r}; the config was not written.")
    check_name(proposal.name, config_path)  # nothing changed it meanwhile
    write_table(config_path, proposal.cluster)
    return proposal.model_copy(update={"tested": test, "config_path": str(config_path)})


__all__ = [
    "Proposal",
    "SiteFacts",
    "add_cluster",
    "check_name",
    "match_python",
    "parse_probe",
    "probe_command",
    "propose",
    "suggest_profile",
    "table_text",
    "write_table",
]
