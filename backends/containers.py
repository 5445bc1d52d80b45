"""Running the job's Python inside a container image: how each runtime is told.

Four runtimes, each as its own documentation writes it (docs/containers.md quotes them):

- ``apptainer`` / ``singularity``: ``apptainer exec --nv -B SRC[:DST[:ro]],... IMAGE CMD``.
  The host's variables pass in by default (not PATH, LD_LIBRARY_PATH); a variable set for
  the container alone is ``APPTAINERENV_NAME`` (``SINGULARITYENV_NAME``).
- ``enroot``: ``enroot start --conf FILE -m SRC:DST:none:x-create=auto,rbind NAME CMD``.
  enroot passes no host variable unless told: the conf file's ``environ()`` passes the
  job's (Slurm's and PBS's rank variables, hpcui's, PYTHONPATH...), as pyxis does.
- ``pyxis``: srun options ``--container-image=IMAGE --container-mounts=SRC:DST,...``;
  every exported variable passes, and ``--container-env=NAME`` makes the host's value win
  over the image's.

The container is prepared on the login node before the first submit (``prepare_script``:
the runtime is there, the image opens, a registry image is imported once into the user's
cache, an enroot container is created once, and the image's Python is read); the batch
script then only starts it. Pure functions: no hpcui import.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from hpcui.backends.shell import quote

RUNTIMES = ("apptainer", "singularity", "enroot", "pyxis")
#: an image as the user writes it: a path, an enroot name or a registry reference
IMAGE = re.compile(r"[A-Za-z0-9._/:#@+~=-]{1,500}")
#: SRC[:DST[:ro|rw]] with absolute paths
BIND = re.compile(r"(/[A-Za-z0-9._/+@=-]*)(?::(/[A-Za-z0-9._/+@=-]*))?(?::(ro|rw))?")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
REGISTRY_PREFIXES = ("docker://", "library://", "oras://", "shub://", "dockerd://", "podman://")
#: variables the job's own host sets that must not reach the image (its own PATH wins)
_VERSION = 'import sys; print("%d.%d.%d" % sys.version_info[:3])'
_EXEC_ARGS = ' && exec "$@"'  # after an init line: run the command given as arguments
_NOT_PASSED = "PATH|LD_LIBRARY_PATH|PYTHONHOME|SHLVL|PWD|OLDPWD|_|BASH_FUNC_*|ENROOT_*"


def image_kind(image: str) -> str:
    """``registry`` (imported/pulled once), ``file`` (a path) or ``name`` (an enroot container)."""
    if image.startswith(REGISTRY_PREFIXES) or "#" in image:
        return "registry"
    if "/" in image or image.endswith((".sif", ".sqsh", ".squashfs", ".simg")):
        return "file"
    return "name"


def check_image(image: str, runtime: str) -> str | None:
    """What is wrong with this image for this runtime, or None."""
    if image.startswith("-"):
        return (
            f"{image!r} starts with '-', which the runtime would read as an option: "
            "name the image by its path or registry reference"
        )
    if not IMAGE.fullmatch(image):
        return (
            f"{image!r} is not an image hpcui can pass on: a path, an enroot container name or "
            "a registry reference (letters, digits and ._/:#@+~=- only, no spaces or quotes)"
        )
    kind = image_kind(image)
    if kind == "name" and runtime != "enroot":
        return (
            f"{image!r} looks like an enroot container name, which only runtime 'enroot' "
            f"starts; give {runtime} an image file (.sif, .sqsh) or a registry reference"
        )
    if image.endswith((".sif", ".simg")) and runtime in ("enroot", "pyxis"):
        return (
            f"{runtime} cannot run a SIF file ({image}): give it a squashfs image (.sqsh, "
            "`enroot import` makes one) or a registry reference"
        )
    if kind == "file" and not image.startswith(("/", "~/")):
        return f"image path {image!r} must be absolute (or start with ~/) on the cluster"
    return None


def parse_bind(text: str) -> str:
    """A bind as ``SRC[:DST[:ro|rw]]`` with absolute paths, or ValueError."""
    m = BIND.fullmatch(text)
    if not m:
        raise ValueError(
            f"bind {text!r}: write SRC, SRC:DST or SRC:DST:ro with absolute paths "
            "(letters, digits and ._/+@=- only)"
        )
    return text


@dataclass(frozen=True)
class ContainerLaunch:
    """How the batch script starts the job's Python inside the prepared image."""

    runtime: str
    image: str  # for the node: an image path (apptainer, pyxis) or enroot container name
    python: str = "python3"  # the image's interpreter
    binds: tuple[str, ...] = ()  # SRC[:DST[:ro]]; the job base first
    env: tuple[tuple[str, str], ...] = ()  # set inside the container only, runtime-natively
    gpu_flags: tuple[str, ...] = ()  # apptainer/singularity: --nv, --rocm
    init: str | None = None  # a shell line run inside first (LUMI: $WITH_CONDA)
    asked: str = ""  # the image as the user named it (shown by the faces)
    #: enroot: the squashfs file `image` (a container name) is created from on each node
    #: that lacks it (ENROOT_DATA_PATH is node-local on many sites)
    source: str | None = None
    #: pyxis: the container's name (`--container-name`): with pyxis's default global scope
    #: a node keeps it, and the next job there skips unpacking the image
    name: str | None = None


def _split_bind(bind: str) -> tuple[str, str, str | None]:
    """(SRC, DST, mode): `/data:ro` is /data at /data read-only (not at a folder "ro")."""
    parts = bind.split(":")
    mode = parts.pop() if len(parts) > 1 and parts[-1] in ("ro", "rw") else None
    src = parts[0]
    return src, parts[1] if len(parts) > 1 and parts[1] else src, mode


def _bind_text(bind: str) -> str:
    """As given, but `SRC:ro` spelled `SRC:SRC:ro`: every runtime reads that the same way
    (enroot and Apptainer would take "ro" for the destination)."""
    src, dst, mode = _split_bind(bind)
    return f"{src}:{dst}:{mode}" if mode and bind.count(":") == 1 else bind


def env_lines(launch: ContainerLaunch) -> list[str]:
    """The container's own variables, as its runtime takes them (every node runs these)."""
    lines: list[str] = [f"# container: {launch.runtime} {launch.asked or launch.image}"]
    prefix = {"apptainer": "APPTAINERENV_", "singularity": "SINGULARITYENV_"}.get(launch.runtime)
    for name, value in launch.env:
        lines.append(f"export {prefix or ''}{name}={quote(value)}")
    return lines


#: enroot: each task runs this (from the job folder): the container is created on a node
#: that lacks it, one task per node at a time, then the task starts inside it
ENROOT_START = """#!/bin/bash
# generated by hpcui: the image's enroot container on this node, then this task inside it
name=$1 file=$2; shift 2
if [ -n "$file" ]; then
  # one create per node at a time, whatever job asks (a lock beside the job base's cache)
  lock="${HPCUI_JOB_FOLDER%/jobs/*}/containers/.enroot-$(hostname).lock"
  mkdir -p "${lock%/*}" && exec 9>"$lock" && flock 9
  if ! enroot list 2>/dev/null | grep -qx -- "$name"; then
    said=$(enroot create --name "$name" "$file" 2>&1) || { printf '%s\\n' "$said" >&2; exit 1; }
  fi
  exec 9>&-
fi
exec enroot start "$@"
"""


def conf_lines(launch: ContainerLaunch, folder: str) -> list[str]:
    """enroot: the start helper, and the conf file that passes the job's variables in
    (written by the first node before its tasks start); nothing for the others."""
    if launch.runtime != "enroot":
        return []
    return [
        *_whole(folder + "/enroot-start.sh", "HPCUI_ENROOT_START", ENROOT_START.splitlines()),
        *_whole(
            folder + "/enroot.conf",
            "HPCUI_ENROOT_CONF",
            [
                "environ() {  # the job's variables reach the process inside, as pyxis passes them",
                '  local v; for v in $(compgen -e); do case "$v" in',
                f"    {_NOT_PASSED}) ;;",
                """    *) printf '%s=%s\\n' "$v" "${!v//$'\\n'/ }" ;;""",
                "  esac; done",
                "}",
            ],
        ),
    ]


def _whole(path: str, mark: str, body: list[str]) -> list[str]:
    """`body` written to `path` by a rename, never seen half written: every element of an
    array writes the same files into the job folder while the others' tasks read them (a
    `cat >` truncated the helper under a starting task, which then ran nothing, exit 0)."""
    tmp = f'{quote(path)}."$(hostname).$$"'
    return [f"cat > {tmp} <<'{mark}'", *body, mark, f"mv -f {tmp} {quote(path)}"]


def script_lines(launch: ContainerLaunch, folder: str) -> list[str]:
    """Both of the above, for a script that runs once (Slurm's batch step)."""
    return env_lines(launch) + conf_lines(launch, folder)


def srun_options(launch: ContainerLaunch) -> str:
    """pyxis's srun options (with a trailing space), empty for the other runtimes."""
    if launch.runtime != "pyxis":
        return ""
    mounts = ",".join(
        f"{src}:{dst}" + (f":{mode}" if mode else "")
        for src, dst, mode in map(_split_bind, launch.binds)
    )
    opts = [f"--container-image={quote(launch.image)}"]
    if launch.name:
        opts.append(f"--container-name={quote(launch.name)}")
    if mounts:
        opts.append(f"--container-mounts={quote(mounts)}")
    if launch.env:
        opts.append(f"--container-env={','.join(name for name, _ in launch.env)}")
    return " ".join(opts) + " "


def wrap(launch: ContainerLaunch, args: str) -> str:
    """The task's command line inside the container: `args` are the interpreter's arguments
    (already shell text), the image's Python runs them."""
    inner = f"{quote(launch.python)} {args}"
    if launch.init:
        inner = f"bash -c {quote(launch.init + _EXEC_ARGS)} bash {inner}"
    if launch.runtime == "pyxis":
        return inner
    if launch.runtime == "enroot":
        mounts = " ".join(
            f"-m {quote(f'{src}:{dst}:none:x-create=auto,rbind' + (',ro' if mode == 'ro' else ''))}"
            for src, dst, mode in map(_split_bind, launch.binds)
        )
        start = (
            f'bash "$HPCUI_JOB_FOLDER/enroot-start.sh" {quote(launch.image)} '
            f"{quote(launch.source or '')}"
        )
        conf = '"$HPCUI_JOB_FOLDER/enroot.conf"'
        return f"{start} --conf {conf} {mounts} {quote(launch.image)} {inner}".replace("  ", " ")
    flags = " ".join(launch.gpu_flags)
    binds = f"-B {quote(','.join(map(_bind_text, launch.binds)))} " if launch.binds else ""
    return (
        f"{launch.runtime} exec {flags + ' ' if flags else ''}{binds}{quote(launch.image)} {inner}"
    )


# --- preparing on the login node ---------------------------------------------------------

#: the line the prepare script prints last: `HPCUI_CONTAINER <key>=<value> ...`
MARK = "HPCUI_CONTAINER"


def cache_key(runtime: str, image: str) -> str:
    return hashlib.sha256(f"{runtime}\0{image}".encode()).hexdigest()[:16]


def _safe(image: str) -> str:
    """A file name for an imported registry image: `nvcr.io#nvidia/pytorch:24.12` ->
    `nvcr.io+nvidia+pytorch+24.12` (enroot import's own naming), plus a short hash."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "+", image.split("://", 1)[-1]).strip("+")[:80]
    return f"{stem}-{cache_key('', image)[:8]}"


def prepare_script(
    runtime: str,
    image: str,
    *,
    python: str,
    cache: str,
    init: str | None,
    check_import: str | None = None,
    progress_log: str | None = None,
) -> str:
    """ONE bash script for the login node: the runtime exists, the image opens (a registry
    image imported once into `cache`, an enroot container created once), and the image's
    Python version, remembered per image in `cache` until the image file changes.

    A registry import writes its progress (the runtime's own lines) to `progress_log`, a
    file the caller reads while the script runs; logs over an hour old are removed.

    Prints `HPCUI_CONTAINER status=ok image=<for the node> python=3.11.2` or
    `HPCUI_CONTAINER status=<problem>` after the runtime's own words.
    """
    key = cache_key(runtime, image)
    kind = image_kind(image)
    q = quote
    exe = "enroot" if runtime == "pyxis" else runtime

    def py(code: str) -> str:  # the image's Python running `code` (after the init line)
        run = f"{q(python)} -c {q(code)}"
        return f"bash -c {q(init + _EXEC_ARGS)} bash {run}" if init else run

    lines = [
        "set -u",
        f"cache={q(cache)}; img={q(image)}",
        'case "$img" in "~/"*) img="$HOME/${img#\\~/}";; esac',
        'mkdir -p "$cache" && chmod 700 "$cache" || { echo "' + MARK + ' status=cache"; exit 0; }',
        f'say() {{ echo "{MARK} status=$1 file=${{img:-}}"; exit 0; }}',
    ]
    # one prepare of an image at a time (two hpcui processes, or two runtimes of it); an
    # import by another process holds the lock for minutes: said where progress is read
    lock = f'exec 9>"$cache/.lock-{cache_key("enroot", image)}"'
    if progress_log:
        waiting = "waiting for another hpcui process that prepares this image"
        lines.append(
            f'{lock} && {{ flock -n 9 || {{ echo "{waiting}" >>{q(progress_log)}; flock 9; }}; }}'
        )
    else:
        lines.append(f"{lock} && flock 9")
    if runtime == "pyxis":
        lines.append(
            "command -v srun >/dev/null 2>&1 && srun --help 2>&1 | grep -q -- --container-image"
            " || say no-pyxis"
        )
    lines.append(f"command -v {exe} >/dev/null 2>&1 || say no-runtime")
    if kind == "registry":
        ext = "sif" if runtime in ("apptainer", "singularity") else "sqsh"
        # written under a temporary name and renamed when whole: a killed import never
        # leaves a file that looks cached (the lock is held: no other import of it runs)
        fetch = (
            f'{runtime} pull "$part" -- "$img"'
            if ext == "sif"
            else 'enroot import -o "$part" -- "$img"'
        )
        plog = q(progress_log) if progress_log else '"$cache/.import-last.log"'
        lines += [
            f'file="$cache/{_safe(image)}.{ext}"; part="$cache/.part-{_safe(image)}.{ext}"; '
            f"plog={plog}",
            "find \"$cache\" -maxdepth 1 -name '.import-*.log' -mmin +60 -delete 2>/dev/null",
            'if [ ! -s "$file" ]; then rm -f "$part";'
            ' echo "importing $img into $file (once: later submits reuse it)" >>"$plog";'
            f' {{ {fetch} >>"$plog" 2>&1 && mv -f "$part" "$file"; }} ||'
            ' { tail -n +2 "$plog" | tail -n 20 >&2; rm -f "$part"; say import; }; fi',
            'img="$file"',
        ]
    if kind in ("registry", "file"):
        lines += [
            '[ -e "$img" ] || say missing',
            '[ -r "$img" ] && [ -f "$img" ] || say unreadable',
            'stamp=$(stat -c %s-%Y "$img")',
        ]
    else:
        lines.append("stamp=name")
    # the node's view: an enroot container for enroot; the image file for the others
    if runtime in ("enroot", "pyxis") and kind != "name":
        name = f"hpcui-{cache_key('enroot', image)}"  # one container for enroot and pyxis
        lines += [
            f'name="{name}-$stamp"',
            'enroot list 2>/dev/null | grep -qx "$name" || {'
            ' enroot list 2>/dev/null | grep "^'
            + name
            + '-" | xargs -r enroot remove -f >/dev/null 2>&1;'
            ' enroot create --name "$name" -- "$img" >/dev/null 2>"$cache/create.err" ||'
            ' { tail -n 5 "$cache/create.err" >&2; say unusable; }; }',
            'run_in() { enroot start "$name" "$@"; }',
        ]
    elif runtime == "enroot":
        lines += [
            'name="$img"',
            'enroot list 2>/dev/null | grep -qx "$name" || say no-container',
            'run_in() { enroot start "$name" "$@"; }',
        ]
    else:
        lines.append(f'run_in() {{ {runtime} exec "$img" "$@"; }}')
    node_image = '"$name"' if runtime == "enroot" else '"$img"'
    lines += [
        f'memo="$cache/{key}.python"',
        'if [ -s "$memo" ] && [ "$(head -n 1 "$memo")" = "$stamp" ]; then py=$(sed -n 2p "$memo")',
        f"else py=$(run_in {py(_VERSION)} 2>&1) ||"
        ' { printf "%s\\n" "$py" | tail -n 5 >&2; say no-python; }',
        '  py=$(printf "%s\\n" "$py" | tail -n 1)',
        '  printf "%s\\n%s\\n" "$stamp" "$py" > "$memo"',
        "fi",
        "has=",
    ]
    if check_import:  # a module the job needs (JupyterLab): asked each time, not remembered
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", check_import):
            raise ValueError(f"not a module name: {check_import!r}")
        lines.append(f"run_in {py(f'import {check_import}')} >/dev/null 2>&1 && has=yes || has=no")
    lines += [
        f'echo "{MARK} status=ok image={node_image.strip(chr(34))} python=$py file=${{img:-}} '
        'name=${name:-} has=$has"',
    ]
    return "\n".join(lines)


def parse_prepare(text: str) -> dict[str, str]:
    """The `HPCUI_CONTAINER k=v ...` line's fields (the last such line), {} if none."""
    for line in reversed(text.splitlines()):
        if line.startswith(MARK + " "):
            return dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    return {}
