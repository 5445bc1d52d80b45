"""Environments built on the cluster (`env=`): the user's packages, once per content hash.

`env="auto"` is what the call uses (hpcui.submission.needs) at this machine's versions, the
installer resolving their requirements; a list of requirements, or a requirements file
read here, is taken as written; a path on the cluster (a venv or an interpreter) is used as
it is. A built environment lives in `<remote base>/envs/<hash>` (the hash of the cluster's
Python version, the requirements, the index and the options), is built once on the login
node (compute nodes usually reach no index) under a lock (a second process waits, then
uses it), under a temporary name, checked (every pinned distribution at its version), and
only then renamed into place and marked: a build killed half way, or one that failed, is
never used. The probe lists the ready ones, so a later process uses one without a round
trip of its own. The installer is uv: the login node's own, else uv's Linux binary from its
PyPI wheel, uploaded once (checked by its SHA-256 before each build); pip where neither.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcui.errors import UsageError
from hpcui.jobs.upload import upload
from hpcui.profiles import Profile
from hpcui.store.remote import RemoteInfo, install_file
from hpcui.submission import containers
from hpcui.submission.needs import Need, check_needs
from hpcui.transport.base import Transport
from hpcui.transport.quoting import quote_bytes

AUTO = "auto"
#: in the key in place of an index: the wheels came from this machine
OFFLINE = "offline"
#: how long a build may take on the login node (a big resolver run, slow file systems)
BUILD_TIMEOUT_S = 1800
#: a requirement as pip writes it: a name, extras, version clauses (no URLs, no options)
REQUIREMENT = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?"
    r"(\s*(==|>=|<=|~=|!=|<|>|===)\s*[A-Za-z0-9.*+!_-]+(\s*,\s*(==|>=|<=|~=|!=|<|>)\s*[A-Za-z0-9.*+!_-]+)*)?"
    # an environment marker (pyproject's `; python_version < "3.12"`): a file's line, quoted
    r"(\s*;\s*(python_version|python_full_version|sys_platform|platform_machine|"
    r"platform_system|platform_python_implementation|implementation_name|os_name|extra)"
    r"\b[A-Za-z0-9_.<>=!~\"' ()-]*)?$"
)
#: what a built environment holds once it was checked (its absence: never used)
READY = ".hpcui-ready"


@dataclass(frozen=True)
class EnvSpec:
    """What to run the job with: an existing environment there, or requirements to build."""

    requirements: tuple[str, ...] = ()
    existing: str = ""
    #: pinned distributions the check verifies (name, version)
    pins: tuple[tuple[str, str], ...] = ()
    #: made from what the call uses (env="auto"): it holds every need by construction
    auto: bool = False
    #: layered over the job's own modules (a site's `pytorch`): their packages stay visible
    #: and only what they lack is installed; `provided` is what they gave (in the key)
    over: tuple[str, ...] = ()
    provided: tuple[tuple[str, str], ...] = ()


def _existing_python(path: str) -> str:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return path if name.startswith("python") else f"{path.rstrip('/')}/bin/python"


def spec_of(env: Sequence[str], needs: Sequence[Need]) -> EnvSpec:
    """The request's `env` as a spec (UsageError for what cannot be one)."""
    items = [e.strip() for e in env if e.strip()]
    if len(items) == 1 and items[0] == AUTO:
        wanted = sorted((n.dist, n.version) for n in needs if not n.optional)
        if not wanted:
            raise UsageError(
                "env='auto' found no installed package this call uses: it needs nothing "
                "beyond the cluster's Python. Leave env out, or list what it needs."
            )
        return EnvSpec(tuple(f"{d}=={v}" for d, v in wanted), pins=tuple(wanted), auto=True)
    if (
        len(items) == 1
        and items[0].startswith(("/", "~", "$"))
        and not items[0].endswith((".txt", ".in", "pyproject.toml", "uv.lock"))
    ):
        return EnvSpec(existing=_existing_python(items[0]))
    if len(items) == 1 and items[0].endswith(("pyproject.toml", "uv.lock")):
        return _from_project(Path(items[0]).expanduser())
    if len(items) == 1 and items[0].endswith((".txt", ".in")):
        path = Path(items[0]).expanduser()
        try:
            text = path.read_text()
        except OSError as exc:
            raise UsageError(
                f"env={items[0]!r}: cannot read that requirements file: {exc}."
            ) from None
        items = [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
        items = [ln for ln in items if ln]
    bad = [i for i in items if not REQUIREMENT.match(i)]
    if bad or not items:
        raise UsageError(
            f"env: {', '.join(map(repr, bad)) or 'nothing'} is not a requirement hpcui "
            "installs (write `name`, `name==1.2.3`, `name[extra]>=1.0`; or env='auto', a "
            "requirements file, or the path of an environment on the cluster)."
        )
    pins = tuple(
        (m[1], m[2]) for i in items if (m := re.fullmatch(r"([A-Za-z0-9._-]+)\s*==\s*([^,\s]+)", i))
    )
    return EnvSpec(tuple(items), pins=pins)


def _from_project(path: Path) -> EnvSpec:
    """A pyproject.toml's `[project] dependencies` as written, or a uv.lock's resolved
    packages pinned (what came from an index: not the project itself, not local paths)."""
    import tomllib  # only where env= names a project file

    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"env={str(path)!r}: cannot read it as TOML: {exc}.") from None
    if path.name == "uv.lock":
        items = [
            f"{p['name']}=={p['version']}"
            for p in data.get("package", [])
            if "registry" in p.get("source", {}) and p.get("version")
        ]
    else:
        items = list(data.get("project", {}).get("dependencies", []))
    if not items:
        raise UsageError(f"env={str(path)!r} names no dependency to install.")
    return spec_of(items, [])


def env_key(
    spec: EnvSpec, python_version: str, index_url: str, proxy: str, pack: bool = False
) -> str:
    """The environment's folder name: what decides its content, hashed."""
    layout = ["packed"] if pack else []
    # over modules: their names and what they gave (a module updated in place: a new key)
    over = (
        [f"over {' '.join(spec.over)}", *(f"{d} {v}" for d, v in spec.provided)]
        if spec.over
        else []
    )
    text = "\n".join([python_version, index_url, proxy, *layout, *over, *sorted(spec.requirements)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: the check run by the new environment's Python: each pin at its version
_CHECK = (
    "import sys, importlib.metadata as m\n"
    "bad = []\n"
    "for a in sys.argv[1:]:\n"
    "    d, _, v = a.partition('==')\n"
    "    try: have = m.version(d)\n"
    "    except m.PackageNotFoundError: have = 'missing'\n"
    "    if have != v: bad.append(f'{d} {have} (asked {v})')\n"
    "print('HPCUI_CHECK=' + ('ok' if not bad else '; '.join(bad)))\n"
)


def build_script(
    *,
    folder: str,
    python: str,
    setup: Sequence[str],
    spec: EnvSpec,
    index_url: str = "",
    proxy: str = "",
    wheels: str = "",
    uv: str = "",
    uv_sha: str = "",
    pack: bool = False,
    log: str,
) -> str:
    """The login node's bash: under `folder.lock`, build in `folder.part-PID`, check it,
    rename it into place and mark it READY; print `HPCUI_ENV=ready|built|failed:WHY`.
    The installer's words go to `log` (followed as progress) and, on failure, stdout."""
    q = lambda s: quote_bytes(s).decode()  # noqa: E731 - one quoting for every word here
    reqs = " ".join(q(r) for r in spec.requirements)
    requirements_file = '"$final.requirements.txt"'
    index = f" --index-url {q(index_url)}" if index_url else ""
    if wheels:  # offline: the wheels uploaded from here, no index at all
        index = f" --no-index --find-links {q(wheels)}"
    pins = " ".join(q(f"{d}=={v}") for d, v in spec.pins)
    proxy_env = f"export http_proxy={q(proxy)} https_proxy={q(proxy)}; " if proxy else ""
    return "\n".join(
        [
            "set -u",
            f'final={q(folder)}; tmp="$final.part-$$"; log={q(log)}',
            'mkdir -p "$(dirname "$final")" && exec 9>"$final.lock" || { echo HPCUI_ENV=failed:lock; exit 0; }',
            "flock 9",
            "pth=/nonexistent",  # a packed environment's .pth file (set by _PACK)
            f'if [ -e "$final/{READY}" ]; then echo HPCUI_ENV=ready; exit 0; fi',
            'rm -rf "$final" "$final".part-*',  # a build killed half way: never used
            f"printf '%s\\n' {reqs} >\"$final.requirements.txt\"",
            *setup,
            proxy_env + "export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1",
            'say() { echo "hpcui: $*" >>"$log"; }',
            f"uv={q(uv) if uv else ''}",
            # an uploaded uv runs only with the bytes hpcui sent (its SHA-256), else pip
            *(
                [
                    f'echo "{uv_sha}  $uv" | sha256sum -c --status 2>/dev/null || {{ say "uv at $uv is not the one hpcui sent: pip instead"; uv=; }}'
                ]
                if uv_sha
                else []
            ),
            *(_OVER_NO_UV if spec.over else ()),
            'if [ -n "$uv" ]; then',
            f'  say "creating the environment with uv ({q(python)})"',
            f'  "$uv" venv --quiet --no-cache --python {q(python)} "$tmp" >>"$log" 2>&1 || {{ echo HPCUI_ENV=failed:venv; tail -n 20 "$log"; exit 0; }}',
            f'  say "installing with uv"; "$uv" pip install --no-cache --python "$tmp/bin/python"{index} -r {requirements_file} >>"$log" 2>&1',
            "else",
            f'  say "creating the environment ({q(python)} -m venv)"',
            f'  {q(python)} -m venv{" --system-site-packages" if spec.over else ""} "$tmp" >>"$log" 2>&1 || {{ echo HPCUI_ENV=failed:venv; tail -n 20 "$log"; exit 0; }}',
            *(_over_pth(q(python), spec.over) if spec.over else ()),
            f'  say "installing with pip"; "$tmp/bin/python" -m pip install --no-cache-dir --progress-bar off{index} -r {requirements_file} >>"$log" 2>&1',
            "fi",
            'if [ $? -ne 0 ]; then echo HPCUI_ENV=failed:install; tail -n 30 "$log"; rm -rf "$tmp"; exit 0; fi',
            *(_PACK if pack and not spec.over else ()),
            f'"$tmp/bin/python" -c {q(_CHECK)} {pins} >"$tmp/.check" 2>&1',
            'c=$(grep HPCUI_CHECK= "$tmp/.check" | cut -d= -f2-); if [ "$c" != ok ]; then echo "HPCUI_ENV=failed:check $c"; cat "$tmp/.check" | tail -n 20; rm -rf "$tmp"; exit 0; fi',
            # a packed environment names its zip by the final path (checked above by $tmp's)
            f'[ ! -e "$pth" ] || echo "$final/{PACKED}" >"$pth"',
            'mv "$tmp" "$final" && touch "$final/' + READY + '" && echo HPCUI_ENV=built',
        ]
    )


#: over modules pip installs: it counts the modules' packages as installed (they are on
#: its sys.path), where uv would install their requirements again (torch: gigabytes)
_OVER_NO_UV = ('[ -z "$uv" ] || say "over modules: pip installs (it sees their packages)"', "uv=")


def _over_pth(python: str, modules: Sequence[str]) -> tuple[str, ...]:
    """After the venv is made: a .pth naming the modules' Python's own site folders, so a
    module that is itself a venv (not just an interpreter) stays visible to the layer."""
    return (
        f'  say "over module(s) {" ".join(modules)}: their packages stay visible"',
        f'  sites=$({python} -c "import site; print(chr(10).join(site.getsitepackages()))")',
        '  sp=$("$tmp/bin/python" -c "import sysconfig; print(sysconfig.get_paths()[\'purelib\'])")',
        '  printf \'%s\\n\' "$sites" >"$sp/hpcui-over.pth"',
    )


#: a packed environment's packages, one zip on sys.path (a .pth file in its empty
#: site-packages names it): one file instead of thousands, for inode quotas
PACKED = "site-packages.zip"
#: after the install, before the check: pack site-packages into one zip where nothing in it
#: is compiled (an extension module cannot load from a zip; a squashfs image would need
#: root, or squashfuse on every node: docs/environments.md)
_PACK = (
    'sp=$("$tmp/bin/python" -c "import sysconfig; print(sysconfig.get_paths()[\'purelib\'])")',
    'pth="$sp/hpcui-packed.pth"',
    'n=$(find "$sp" -name "*.so" | wc -l)',
    'if [ "$n" -gt 0 ]; then say "not packed into one file: $n compiled extension file(s) '
    'cannot load from a zip"; pth=/nonexistent; else',
    f'  say "packing $(find "$sp" | wc -l) files into $final/{PACKED}"',
    f'  (cd "$sp" && "$tmp/bin/python" -m zipfile -c "$tmp/{PACKED}" $(ls -A)) >>"$log" 2>&1'
    ' || { echo HPCUI_ENV=failed:pack; tail -n 20 "$log"; rm -rf "$tmp"; exit 0; }',
    f'  find "$sp" -mindepth 1 -delete && echo "$tmp/{PACKED}" >"$pth"',
    "fi",
)


def failure(said: str, *, cluster: str, python: str) -> str:
    """A failed build, in the installer's own words, and what to change."""
    first, _, rest = said.partition("\n")
    why = first.removeprefix("HPCUI_ENV=failed:")
    words = rest.strip()[-2500:] or "no output"
    if why.startswith("check"):
        return (
            f"The environment built on {cluster} does not hold what was asked "
            f"({why.removeprefix('check').strip()}): nothing was submitted. The installer "
            f"said:\n{words}"
        )
    if why == "venv":
        return (
            f"{cluster}'s Python ({python}) could not make a virtual environment: {words}. "
            "Load a Python with venv (setup lines), or point python= at one."
        )
    return (
        f"Building the environment on {cluster} failed ({why}); nothing was submitted. The "
        f"installer said:\n{words}\nFix the requirement it names (a version the index has, a "
        "name as published), or build it yourself and pass env='/path/to/venv'."
    )


def platforms(machine: str, glibc: str) -> list[str]:
    """The wheel platform tags a cluster's Python installs: manylinux up to its glibc."""
    m = re.fullmatch(r"2\.(\d+)", glibc)
    top = int(m[1]) if m else 17
    return [f"manylinux_2_{minor}_{machine}" for minor in range(17, top + 1)] + [
        f"manylinux2014_{machine}"
    ]


def download(
    spec: EnvSpec, info: RemoteInfo, dest: Path, say: Callable[[str], None], *, cluster: str
) -> None:
    """The requirements and everything they need, resolved HERE for the cluster's Python
    and platform (binary wheels only: nothing is built there), into `dest` (pip's cache
    and this machine's index settings, PIP_INDEX_URL and the like, apply)."""
    machine, glibc = info.platform
    version = ".".join(map(str, (info.python_version or (0, 0))[:2]))
    if not machine:
        raise UsageError(f"{cluster}'s Python did not say its platform: cannot pick wheels for it.")
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
           "--only-binary=:all:", "--python-version", version, "--implementation", "cp",
           *(f"--platform={p}" for p in platforms(machine, glibc)), "--dest", str(dest),
           *spec.requirements]  # fmt: skip
    dest.mkdir(parents=True, exist_ok=True)
    say(f"downloading wheels here for {cluster} (Python {version}, {machine}, glibc {glibc})")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    assert proc.stdout is not None  # a pipe was asked for
    for line in proc.stdout:
        if line.strip():
            say(line.rstrip())
            tail = [*tail[-29:], line.rstrip()]
    if proc.wait() != 0:
        raise UsageError(
            f"Downloading the wheels for {cluster} here failed; nothing was submitted. pip "
            "said:\n" + "\n".join(tail) + "\nFix the requirement it names (a version with "
            f"wheels for Python {version} on {machine}), or build the environment there yourself "
            "and pass env='/path/to/venv'."
        )


#: the uv hpcui uploads where a login node has none (a PyPI wheel holding one static binary)
UV_VERSION = "0.13.9"


def fetch_uv(machine: str, cache: Path, say: Callable[[str], None]) -> Path | None:
    """uv's Linux binary for `machine`, from its PyPI wheel (this machine's pip settings),
    kept in `cache`; None where it cannot be had (no index here): pip builds then."""
    binary = cache / "uv" / f"{UV_VERSION}-{machine}" / "uv"
    if binary.exists():
        return binary
    tmp = binary.parent / f"download-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
               "--quiet", "--no-deps", "--only-binary=:all:", "--dest", str(tmp),
               *(f"--platform={p}" for p in platforms(machine, "2.17")),
               f"uv=={UV_VERSION}"]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        wheels = list(tmp.glob("uv-*.whl"))
        if done.returncode != 0 or not wheels:
            said = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
            say(f"no uv {UV_VERSION} for {machine} here ({said}): pip builds the environment")
            return None
        with zipfile.ZipFile(wheels[0]) as whl:
            name = next(n for n in whl.namelist() if n.endswith(".data/scripts/uv"))
            part = binary.with_name(f"uv.part{uuid.uuid4().hex[:8]}")
            part.write_bytes(whl.read(name))
            part.chmod(0o755)
            part.replace(binary)
        return binary
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def remote_uv(
    transport: Transport, info: RemoteInfo, cache: Path | None, say: Callable[[str], None]
) -> tuple[str, str]:
    """(uv's path on the login node, its SHA-256 where hpcui uploaded it): the site's own,
    else the one uploaded once per content (runtime/uv-<sha>), else ("", "") for pip."""
    if info.uv:
        return info.uv, ""
    machine = info.platform[0]
    local = fetch_uv(machine, cache, say) if cache is not None and machine else None
    if local is None:
        return "", ""
    data = local.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    name = f"uv-{sha[:16]}"
    path = f"{info.base}/runtime/{name}"
    if name not in info.uv_bins:
        say(f"uploading uv {UV_VERSION} ({len(data) / 1e6:.0f} MB) to {path}, once")
        install_file(transport, path, data, mode=0o755, what="uv")
        info.uv_bins.add(name)
    return path, sha


def ensure(
    transport: Transport,
    info: RemoteInfo,
    spec: EnvSpec,
    *,
    cluster: str,
    python: str,
    setup: Sequence[str],
    profile: Profile,
    cache: Path | None = None,
) -> str:
    """The environment's Python on the cluster: built now (its progress said line by line,
    as an image import's: stderr, or the app's status line), or found ready (listed by
    the probe, or built earlier by this process: no round trip). Where it installs from,
    and how, is the profile's (`env_index_url`, `env_proxy`, `env_offline`, `env_pack`)."""
    if spec.existing:
        return spec.existing
    index_url, proxy, offline = profile.env_index_url, profile.env_proxy, profile.env_offline
    pack = profile.env_pack == "zip"
    version = ".".join(map(str, info.python_version or ()))
    key = env_key(spec, version, OFFLINE if offline else index_url, proxy, pack)
    folder = f"{info.base}/envs/{key}"
    if key not in info.envs:
        say = containers.import_progress.get() or containers.on_stderr
        wheels = ""
        if offline:  # the login node reaches no index: resolved here, uploaded, no index there
            local = (cache or Path(".")) / key
            download(spec, info, local, say, cluster=cluster)
            wheels = f"{info.base}/envs/wheels"
            got = upload(transport, local, wheels, into=False, note=say)
            say(f"uploaded {got.copied} wheel(s) to {wheels} ({got.skipped} there already)")
        uv, uv_sha = remote_uv(transport, info, cache, say)
        log_path = f"{folder}.build-{uuid.uuid4().hex[:8]}.log"
        script = build_script(folder=folder, python=python, setup=setup, spec=spec,
                              index_url=index_url, proxy=proxy, wheels=wheels, uv=uv,
                              uv_sha=uv_sha, pack=pack, log=log_path)  # fmt: skip
        say(f"building the environment {key} on {cluster}: {' '.join(spec.requirements)}")
        with containers.following(transport, log_path, lambda ln: say(ln.removeprefix("hpcui: "))):
            res = transport.run(["bash", "-c", script], timeout=BUILD_TIMEOUT_S)
        said = res.stdout[res.stdout.find("HPCUI_ENV=") :] if "HPCUI_ENV=" in res.stdout else ""
        state = said.split("\n", 1)[0]
        if state not in ("HPCUI_ENV=ready", "HPCUI_ENV=built"):
            raise UsageError(failure(said or res.stderr, cluster=cluster, python=python))
        say(f"environment {key} {'ready' if state.endswith('ready') else 'built'}: {folder}")
        info.envs.add(key)
    return f"{folder}/bin/python"


def use(
    transport: Transport,
    info: RemoteInfo,
    spec: EnvSpec,
    needs: list[Need],
    *,
    python: str,
    setup: Sequence[str],
    cluster: str,
    profile: Profile,
    in_image: bool,
    probe: Callable[[str], RemoteInfo],
) -> str:
    """The Python a submit with env= runs: the environment built (or found) on the
    cluster's; a list as written is checked to hold what the call imports (`probe`: that
    Python's info, asked once per process)."""
    if in_image:
        raise UsageError(
            "env= builds on the cluster's Python; a job in a container runs the image's "
            "Python and its packages: leave env out, or build an image that has them."
        )
    got = ensure(transport, info, spec, cluster=cluster, python=python, setup=setup,
                 profile=profile, cache=wheel_cache())  # fmt: skip
    if not spec.auto:  # "auto" holds every need by construction: nothing more to ask
        check_needs(transport, probe(got), needs, got, setup, cluster=cluster)
    return got


def wheel_cache() -> Path:
    """Where this machine keeps the wheels it downloaded for offline sites."""
    from platformdirs import user_cache_dir  # only where an offline site builds

    return Path(user_cache_dir("hpcui")) / "wheels"
