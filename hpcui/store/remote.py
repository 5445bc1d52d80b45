"""The remote side of a submission: probing the cluster, guarded sbatch, finding results.

Everything here is one shell command through the persistent channel; the command
lines for the scheduler itself come from backends/.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from hpcui.backends.job_paths import JOB_ID_FILE, RESULT_GLOB, SUBMITTING, result_name
from hpcui.backends.states import JobState
from hpcui.config import ClusterConfig
from hpcui.errors import ConfigError
from hpcui.schedulers.base import JobStatus
from hpcui.transport.base import Command, Transport
from hpcui.transport.quoting import quote_bytes, to_command

_BASE_OK = re.compile(r"^[A-Za-z0-9_./~${}-]+$")
#: an import or distribution name that may travel as a shell word
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_PY = (
    "import sys, platform; print('PY=%d.%d.%d' % sys.version_info[:3]); "
    "print('PLAT=%s %s' % (platform.machine(), platform.libc_ver()[1] or '-'))"
)
#: after _PY, with `module=distribution` arguments: whether each imports (found, not run)
#: and the distribution's version there (hpcui.submission.needs)
_MODULES = (
    "\nimport importlib.util as u, importlib.metadata as m\n"
    "for a in sys.argv[1:]:\n"
    "    mod, _, dist = a.partition('=')\n"
    "    try: ok = u.find_spec(mod) is not None\n"
    "    except Exception: ok = False\n"
    "    try: v = m.version(dist)\n"
    "    except Exception: v = '-'\n"
    "    print('MOD=%s %d %s' % (mod, ok, v))\n"
)


@dataclass
class RemoteInfo:
    home: str
    base: str
    python_version: tuple[int, int, int] | None
    python_error: str = ""
    bundles: set[str] = field(default_factory=set)
    #: the configured base others can write: hpcui keeps this user's jobs in `base`, a
    #: private folder of its own inside it ("" when the configured base is private)
    shared_base: str = ""
    #: that private folder exists but is not this user's alone: nothing may go there
    unsafe_base: str = ""
    #: the shared base lacks the sticky bit: a group member can still rename folders in it
    shared_not_sticky: bool = False
    #: the Python's machine and glibc ("x86_64", "2.36"): which wheels it installs
    platform: tuple[str, str] = ("", "")
    #: environments built there (their folder names under `base`/envs)
    envs: set[str] = field(default_factory=set)
    #: the login node's own uv ("": none), and the uv binaries hpcui uploaded to runtime/
    uv: str = ""
    uv_bins: set[str] = field(default_factory=set)
    #: what this Python said of modules asked so far: {name: (imports, version or "-")}
    modules: dict[str, tuple[bool, str]] = field(default_factory=dict)
    #: the same, asked after a job's own `module load` (its modules' names as the key)
    loaded: dict[tuple[str, ...], dict[str, tuple[bool, str]]] = field(default_factory=dict)


def base_word(remote_base: str) -> str:
    """The configured job base as a shell word: `~` and `$VAR` expand, nothing else runs."""
    if not _BASE_OK.match(remote_base):
        raise ConfigError(
            f"remote_base {remote_base!r} may only use letters, digits, `_./-~` and $VARIABLES."
        )
    if remote_base == "~" or remote_base.startswith("~/"):
        remote_base = "$HOME" + remote_base[1:]
    return f'"{remote_base}"'


#: `mine DIR`: owned by this user and writable by nobody else (POSIX find, no GNU stat)
_MINE = (
    'mine() { [ -O "$1" ] && [ -z "$(find "$1" -prune \\( -perm -0020 -o -perm -0002 \\) '
    '-print 2>/dev/null)" ]; }; '
)


def python_command(python: str, modules: Mapping[str, str] = MappingProxyType({})) -> str:
    """`python -c` printing its version, and for each {module: distribution} whether it
    imports and the distribution's version there (`MOD=name 1 4.46.3`)."""
    bad = [n for pair in modules.items() for n in pair if not NAME.match(n)]
    if bad:
        raise ValueError(f"not a module or distribution name: {bad}")
    code = _PY + (_MODULES if modules else "")
    args = "".join(f" {m}={d}" for m, d in modules.items())  # names checked above
    return f"{quote_bytes(python).decode()} -c {quote_bytes(code).decode()}{args}"


def probe_command(
    cfg: ClusterConfig,
    *,
    python: str,
    setup: Sequence[str] = (),
    modules: Mapping[str, str] = MappingProxyType({}),
) -> str:
    """One shell line: make the job base, print home/base/bundles, run `python` after `setup`
    (and ask it about `modules`: python_command).

    `python`/`setup` are the effective ones (`Cluster.python`/`Cluster.setup`: the cluster
    config's, else its profile's), so they are passed, not read from `cfg`.
    """
    return (
        # a new base is private; an existing one (a shared project directory, 2775) keeps
        # the mode its owner gave it, and this user's jobs and runtime bundles go into a
        # private folder of their own in it: a file where others can write is never run
        f'b={base_word(cfg.remote_base)}; {{ [ -d "$b" ] || mkdir -p -m 700 "$b"; }} && '
        f"{_MINE}"
        'if ! mine "$b"; then printf \'SHARED=%s\\n\' "$b"; '
        '[ -k "$b" ] || echo NOT_STICKY=1; b="$b/$(id -un)"; '
        '[ -d "$b" ] || mkdir -m 700 "$b"; '
        'mine "$b" || { printf \'UNSAFE=%s\\n\' "$b"; b=/nonexistent; }; fi; '
        '[ "$b" = /nonexistent ] || mkdir -p "$b/jobs" "$b/runtime" && '
        'printf \'HOME=%s\\nBASE=%s\\n\' "$HOME" "$(cd "$b" && pwd)"; '
        'for f in "$b"/runtime/*.zip; do [ -e "$f" ] && printf \'BUNDLE=%s\\n\' "${f##*/}"; done; '
        # environments built and checked (hpcui.submission.environments): used with no
        # round trip of their own
        'for f in "$b"/envs/*/.hpcui-ready; do [ -e "$f" ] && { f=${f%/*}; printf \'ENV=%s\\n\' "${f##*/}"; }; done; '
        # the site's uv, else the one hpcui uploaded (its name holds its SHA-256)
        "command -v uv >/dev/null 2>&1 && printf 'UV=%s\\n' \"$(command -v uv)\"; "
        'for f in "$b"/runtime/uv-*; do [ -x "$f" ] && printf \'UVBIN=%s\\n\' "${f##*/}"; done; '
        + python_part(python, setup, modules)
    )


def python_part(python: str, setup: Sequence[str], modules: Mapping[str, str]) -> str:
    """The probe's question to the cluster's Python (after `setup`), each line of its
    answer marked PYOUT=: in the probe, or alone for names a later submit needs."""
    setup_line = "; ".join(setup)
    py = python_command(python, modules)
    return f"( {setup_line + '; ' if setup_line else ''}{py} ) 2>&1 | sed 's/^/PYOUT=/'"


def ask_modules(
    transport: Transport, python: str, setup: Sequence[str], modules: Mapping[str, str]
) -> dict[str, tuple[bool, str]]:
    """What the cluster's Python says of these modules, in one round trip."""
    res = transport.run(python_part(python, setup, modules))
    return parse_modules([line.removeprefix("PYOUT=") for line in res.stdout.splitlines()])


def install_file(transport: Transport, path: str, data: bytes, *, mode: int, what: str) -> None:
    """Put `data` at `path` whole or not at all: written under a name of this process's
    own (two processes may install the same file at once), then renamed into place."""
    transport.run(["mkdir", "-p", path.rsplit("/", 1)[0]]).check(f"creating the folder of {what}")
    tmp = f"{path}.part{uuid.uuid4().hex[:8]}"
    transport.write_file(tmp, data, mode=mode)
    transport.run(["mv", "-f", tmp, path]).check(f"installing {what}")


def parse_modules(lines: Sequence[str]) -> dict[str, tuple[bool, str]]:
    """`MOD=name 1 4.46.3` lines -> {name: (imports, version or "-")}."""
    out = {}
    for line in lines:
        key, _, value = line.partition("=")
        parts = value.split()
        if key == "MOD" and len(parts) == 3:
            out[parts[0]] = (parts[1] == "1", parts[2])
    return out


def probe_remote(
    transport: Transport,
    cfg: ClusterConfig,
    *,
    python: str,
    setup: Sequence[str] = (),
    modules: Mapping[str, str] = MappingProxyType({}),
) -> RemoteInfo:
    cmd = probe_command(cfg, python=python, setup=setup, modules=modules)
    res = transport.run(cmd).check(f"probing {cfg.name}")
    values: dict[str, str] = {}
    bundles, pyout, envs, uv_bins = set(), [], set(), set()
    for line in res.stdout.splitlines():
        key, _, value = line.partition("=")
        if key == "BUNDLE":
            bundles.add(value.removesuffix(".zip"))
        elif key == "ENV":
            envs.add(value)
        elif key == "UVBIN":
            uv_bins.add(value)
        elif key == "PYOUT":
            pyout.append(value)
        else:
            values[key] = value
    version: tuple[int, int, int] | None = None
    plat = next((ln[5:].split() for ln in pyout if ln.startswith("PLAT=")), [])
    for line in pyout:
        m = re.fullmatch(r"PY=(\d+)\.(\d+)\.(\d+)", line.strip())
        if m:
            version = (int(m[1]), int(m[2]), int(m[3]))
    return RemoteInfo(
        home=values.get("HOME", ""),
        base=values.get("BASE", ""),
        shared_base=values.get("SHARED", ""),
        unsafe_base=values.get("UNSAFE", ""),
        shared_not_sticky=values.get("NOT_STICKY") == "1",
        python_version=version,
        platform=(plat[0], plat[1]) if len(plat) == 2 else ("", ""),
        python_error="\n".join(pyout) if version is None else "",
        bundles=bundles,
        envs=envs,
        uv=values.get("UV", ""),
        uv_bins=uv_bins,
        modules=parse_modules(pyout),
    )


_DISK_FULL = re.compile(r"No space left on device|Disk quota exceeded|quota exceeded", re.I)


def disk_full(said: str) -> bool:
    """A remote command's error text names a full disk or quota (ENOSPC, EDQUOT)."""
    return _DISK_FULL.search(said) is not None


def submit_claim() -> bytes:
    """Run first in the job folder, before the upload is unpacked: claims the submit.

    The shell that will unpack and submit records its pid and host in `.submitting` and
    ignores SIGHUP from here on (a dropped SSH link must not stop it half way). A reconnect
    that finds the marker waits for that pid and reads its answer (`recover_command`)
    instead of submitting again, also while tar is still extracting many pickles on a slow
    file system; a later process reads it with `reconcile_command`. Builtins only: the
    guard costs no extra process on the hot path. (The result key travels as a file of the
    upload, never in a command: command text ends up in error messages.)
    """
    # "pid host": a look from another login node behind the same name cannot test the
    # pid, and goes by the marker's age instead (`reconcile_command`)
    return f"echo \"${{BASHPID:-$$}} ${{HOSTNAME:-}}\" > {SUBMITTING} && trap '' HUP".encode()


def guarded_submit_command(submit: Command) -> bytes:
    """The submit itself, after `submit_claim` and the unpacking: its answer lands in
    `job_id` and is printed. Under umask 077 (in a subshell): the scheduler creates the
    job's logs with the submitter's umask, and a service's log may hold its token; the
    job script puts the user's own umask (HPCUI_UMASK) back before the user's code runs."""
    return (
        b"( HPCUI_UMASK=$(umask) && export HPCUI_UMASK && umask 077 && "
        + to_command(submit)
        + f'; ) > {JOB_ID_FILE} && while read -r l; do echo "$l"; done < {JOB_ID_FILE}'.encode()
    )


def recover_command(folder: str, wait_s: int = 60) -> bytes:
    """After a drop: wait while the submitting shell lives, then print the job id it got."""
    return (
        b"cd "
        + quote_bytes(folder)
        + f" 2>/dev/null && [ -e {SUBMITTING} ] || exit 0; ".encode()
        + f'read -r p h < {SUBMITTING}; n=0; while [ ! -s {JOB_ID_FILE} ] && kill -0 "$p" '
        f"2>/dev/null && [ $n -lt {wait_s * 10} ]; do sleep 0.1; n=$((n+1)); done; "
        f"cat {JOB_ID_FILE} 2>/dev/null; true".encode()
    )


#: a claim this old whose shell cannot be tested (another login node) is taken as dead:
#: no sbatch/qsub takes ten minutes to answer
CLAIM_TTL_MIN = 10


@dataclass(frozen=True)
class FolderVerdict:
    """Where a cut-off submission got to, read from its job folder.

    state: "ID" (the scheduler answered: `answer` is its output, lines joined by commas:
    a chain prints one id per segment), "NOFOLDER"/"UNCLAIMED"
    (the claim never ran: nothing was submitted), "LIVE" (the submitting shell still runs:
    look again later), "DEAD" (claimed, no answer, shell gone: only the token can tell).
    """

    state: str
    answer: str = ""


def reconcile_command(folders: Sequence[str]) -> bytes:
    """One command that says, per job folder, how far its submission got (`FolderVerdict`)."""
    return (
        b"for d in "
        + b" ".join(quote_bytes(f) for f in folders)
        + b'; do if [ ! -d "$d" ]; then s=NOFOLDER; a=-; '
        + f'elif [ -s "$d/{JOB_ID_FILE}" ]; then s=ID; a=$(paste -sd, "$d/{JOB_ID_FILE}"); '
        f'elif [ ! -e "$d/{SUBMITTING}" ]; then s=UNCLAIMED; a=-; '
        f'else a=-; read -r p h < "$d/{SUBMITTING}"; '
        'if [ "$h" = "${HOSTNAME:-}" ]; then '
        'if kill -0 "$p" 2>/dev/null; then s=LIVE; else s=DEAD; fi; '
        f'elif [ -n "$(find "$d/{SUBMITTING}" -mmin -{CLAIM_TTL_MIN} 2>/dev/null)" ]; '
        "then s=LIVE; else s=DEAD; fi; fi; "
        # the folder last: it is the only field that may hold spaces
        'printf \'%s %s %s\\n\' "$s" "${a:--}" "$d"; done; true'.encode()
    )


def parse_reconcile(text: str) -> dict[str, FolderVerdict]:
    out = {}
    for line in text.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] in {"ID", "NOFOLDER", "UNCLAIMED", "LIVE", "DEAD"}:
            state, answer, folder = parts
            out[folder] = FolderVerdict(state, "" if answer == "-" else answer)
    return out


def list_results(transport: Transport, folders: list[str]) -> dict[str, bool]:
    """Result pickles in the given job folders -> whether each holds a success (one command).

    submitit writes ("success", value) or ("error", traceback); the tag sits in the
    first bytes of the pickle, so `head -c 64` tells them apart without a download.
    """
    res = transport.run(
        b"for d in "
        + b" ".join(quote_bytes(f) for f in folders)
        + f'; do for f in "$d"/{RESULT_GLOB}; do [ -e "$f" ] || continue; '.encode()
        + b'if head -c 64 "$f" | grep -q success; then s=1; else s=0; fi; '
        b'printf \'%s %s\\n\' "${f##*/}" "$s"; done; done; true'
    )
    out = {}
    for line in res.stdout.splitlines():
        name, _, ok = line.rpartition(" ")
        out[name] = ok == "1"
    return out


def judge_vanished(job_ids: list[str], results: dict[str, bool]) -> dict[str, JobStatus]:
    """A job the scheduler no longer lists, judged by the result its task 0 left (if any)."""
    out = {}
    for jid in job_ids:
        ok = results.get(result_name(jid, "0"))
        if ok is None:
            out[jid] = JobStatus(JobState.FAILED, "FAILED (vanished without a result)")
        elif ok:
            out[jid] = JobStatus(
                JobState.COMPLETED, "COMPLETED (from its result file)", reason="result"
            )
        else:
            out[jid] = JobStatus(JobState.FAILED, "FAILED (from its result file)", reason="result")
    return out
