"""A job's container image, made ready on the login node before the first submit.

One round trip per image and process (`prepare`): the runtime is there, the image opens, a
registry image is imported once into ``<remote_base>/containers`` (reused by name), an
enroot container is created once per image file version, and the image's Python version is
read (remembered beside the cache until the image file changes) and checked against this
machine's, as the cluster's own Python is (cloudpickle cannot cross minor versions). Every
problem is said here, before any sbatch/qsub. The runtimes' command lines live in
``hpcui.backends.containers``; docs/containers.md says what each site documents.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import threading
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

from hpcui.backends.containers import (
    ContainerLaunch,
    cache_key,
    image_kind,
    parse_prepare,
    prepare_script,
)
from hpcui.errors import RemotePythonError, UsageError
from hpcui.profiles import Profile
from hpcui.request.allocation import Allocation
from hpcui.request.plan import job_setup
from hpcui.transport.base import Transport

log = logging.getLogger(__name__)

#: the runtime's own words about a problem are cut to this many characters in a message
_SAID = 600

#: who hears a registry import's progress, a line at a time, while it runs (an import of an
#: NGC image takes minutes); None: stderr, as `hpcui: <line>`. The app sets its own.
import_progress: ContextVar[Callable[[str], None] | None] = ContextVar(
    "hpcui_import_progress", default=None
)


def on_stderr(line: str) -> None:
    print(f"hpcui: {line}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Prepared:
    """A ready image: what the node's runtime is given, and the image's Python."""

    node_image: str
    python_version: tuple[int, int, int]
    #: the image file on the cluster (an imported registry image's cache file); "" for an
    #: enroot container name
    file: str = ""
    #: whether the image imports the module asked for (None: not asked)
    has_module: bool | None = None
    #: the enroot container made of it ("" for apptainer/singularity)
    name: str = ""


def _settings(alloc: Allocation, profile: Profile) -> tuple[str, str | None]:
    site = profile.container
    return (site.python if site else "python3"), (site.init if site else None)


def prepare(
    transport: Transport,
    alloc: Allocation,
    profile: Profile,
    *,
    cluster: str,
    base: str,
    setup: list[str],
    local_version: tuple[int, int] | None = None,
    check_import: str | None = None,
) -> Prepared:
    """Make `alloc.container` ready on the login node, or raise with the fix.
    `check_import`: also say whether the image's Python imports this module."""
    runtime, image = alloc.container_runtime, alloc.container
    assert runtime is not None and image is not None
    python, init = _settings(alloc, profile)
    plog = None
    if image_kind(image) == "registry":
        plog = f"{base}/containers/.import-{uuid.uuid4().hex[:12]}.log"
    script = prepare_script(
        runtime,
        image,
        python=python,
        cache=f"{base}/containers",
        init=init,
        check_import=check_import,
        progress_log=plog,
    )
    # the cluster's setup lines and the job's modules (MN5: `singularity`) come first
    first = list(job_setup(setup, alloc.modules))
    if first:
        script = "\n".join([*first, script])
    say = import_progress.get() or on_stderr
    with following(transport, plog, say) if plog else contextlib.nullcontext():
        res = transport.run(["bash", "-c", script], timeout=1800)
    fields = parse_prepare(res.stdout)
    said = (res.stderr.strip() or res.stdout.strip())[-_SAID:]
    status = fields.get("status")
    where = f"on {cluster}"
    if status != "ok":
        exe = "enroot" if runtime == "pyxis" else runtime
        problems = {
            "no-runtime": (
                f"{runtime} is not on {cluster}'s login node (`command -v {exe}` found "
                "nothing). Load it in the cluster's setup (e.g. setup = [\"module load "
                f'{exe}"]) or pick the runtime the site documents with container_runtime= '
                "(docs/containers.md)."
            ),
            "no-pyxis": (
                f"srun {where} has no --container-image option: pyxis is not installed. Use "
                "container_runtime='enroot' (or 'apptainer') there."
            ),
            "missing": (
                f"Image {image} does not exist {where}. Check the path there (`ls -l` it on "
                "the login node) or copy the image there first."
            ),
            "unreadable": (
                f"Image {image} {where} is not a file you may read. Check its permissions "
                "(`chmod a+r`) or use a copy of your own."
            ),
            "import": (
                f"Importing {image} {where} failed: {said or 'no output'}. Check the reference "
                "and that the login node reaches the registry, or import it yourself and pass "
                "the image file."
            ),
            "unusable": (
                f"{runtime} could not unpack {image} {where}: {said or 'no output'}. "
                + (
                    f"The image hpcui imported earlier ({fields.get('file')}) is damaged: "
                    f"remove it (`hpcui -c {cluster} exec -- rm {fields.get('file')}`) and "
                    "submit again, which imports it afresh."
                    if image_kind(image) == "registry" and fields.get("file")
                    else "Is it a squashfs image (`enroot import` or mksquashfs makes one)?"
                )
            ),
            "no-container": (
                f"No enroot container named {image} {where} (`enroot list`). Create it with "
                f"`enroot create --name {image} IMAGE.sqsh`, or pass the .sqsh file."
            ),
            "no-python": (
                f"The image {image} has no working `{python}`: {said or 'no output'}. hpcui "
                "runs your function with the image's Python: use an image with Python, or "
                "set the profile's [container] python."
            ),
            "cache": f"Cannot create {base}/containers {where}: {said or 'no output'}.",
        }
        if status in problems:
            raise UsageError(problems[status])
        raise UsageError(
            f"Preparing the {runtime} image {image} {where} failed before it could say why "
            f"(exit {res.exit_status}): {said or 'no output'}."
        )
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", fields.get("python", ""))
    if m is None:
        raise UsageError(
            f"The image {image} answered `{python} -c ...` with {fields.get('python')!r}, "
            "not a version: does the image start Python that way?"
        )
    version = (int(m[1]), int(m[2]), int(m[3]))
    want = local_version or sys.version_info[:2]
    if version[:2] != tuple(want):
        have = f"{version[0]}.{version[1]}"
        mine = ".".join(map(str, want))
        raise RemotePythonError(
            f"This image has Python {have}; your client is {mine}: cloudpickle cannot carry "
            f"functions across minor versions. Use an image with Python {mine}, or run hpcui "
            f"from a Python {have} environment. (Image {image} on {cluster}, {runtime}.)"
        )
    file = fields.get("file", "") if image_kind(image) != "name" else ""
    has = {"yes": True, "no": False}.get(fields.get("has", ""))
    return Prepared(
        node_image=fields.get("image", image),
        python_version=version,
        file=file,
        has_module=has,
        name=fields.get("name", ""),
    )


class following:
    """Read `log` every `every` s while the prepare script runs, and say each new line (a
    redrawn progress line at most once per read); a last read after it ended."""

    def __init__(
        self, transport: Transport, log: str, say: Callable[[str], None], every: float = 1.0
    ) -> None:
        from hpcui.logs.follow import ProgressLines  # the one place that collapses \r redraws

        self.transport, self.log, self.say, self.every = transport, log, say, every
        self.lines, self.offset, self.shown = ProgressLines(), 0, ""
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="hpcui-import-progress", daemon=True)

    def __enter__(self) -> None:
        self.thread.start()

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)

    def _run(self) -> None:
        try:
            while True:
                ended = self.stop.wait(self.every)
                self._read()
                if ended:
                    for line in self.lines.feed("\n"):
                        if line.strip() and line != self.shown:
                            self.say(line)
                    return
        except Exception:  # a listener that fails (an app closing) ends the following only
            log.debug("import progress listener failed", exc_info=True)

    def _read(self) -> None:
        try:
            data = self.transport.read_file(self.log, offset=self.offset)
        except Exception:  # not written yet (no import: the image is cached), or a hiccup
            return
        self.offset += len(data)
        for line in self.lines.feed(data.decode("utf-8", "replace")):
            if line.strip() and line != self.shown:
                self.say(line)
            self.shown = ""
        now = self.lines.current
        if now.strip() and now != self.shown:
            self.say(now)  # a bar redrawn with \r: its state now
            self.shown = now


def launch(
    alloc: Allocation,
    profile: Profile,
    *,
    node_image: str,
    base: str,
    home: str = "",
    file: str = "",
    name: str = "",
) -> ContainerLaunch:
    """The batch script's view: the job base bound first (the runtime bundle and the job's
    files live there), then the profile's binds, then the request's."""
    runtime = alloc.container_runtime
    assert runtime is not None and alloc.container is not None
    site = profile.container
    python, init = _settings(alloc, profile)
    gpu_flags: tuple[str, ...] = ()
    if site and runtime in ("apptainer", "singularity") and alloc.gpus_per_node:
        gpu_flags = tuple(site.gpu_flags)
    binds = dict.fromkeys([base, *(site.binds if site else ()), *alloc.binds])
    if node_image.startswith("~/") and home:
        node_image = f"{home}/{node_image[2:]}"
    return ContainerLaunch(
        runtime=runtime,
        image=node_image,
        python=python,
        binds=tuple(binds),
        env=tuple(alloc.container_env.items()),
        gpu_flags=gpu_flags,
        init=init,
        asked=alloc.container,
        source=(file or None) if runtime == "enroot" else None,
        name=(name or None) if runtime == "pyxis" else None,
    )


def preview_launch(alloc: Allocation, profile: Profile, base: str) -> ContainerLaunch:
    """The launch a preview shows (nothing is prepared offline): the names a submit would
    give, with STAMP and IMPORTED where the login node fills them in."""
    runtime, image = alloc.container_runtime or "", alloc.container or ""
    kind = image_kind(image)
    name = f"hpcui-{cache_key('enroot', image)}-STAMP"  # created from the image file
    imported = f"{base}/containers/IMPORTED"
    node_image = image
    if runtime == "enroot" and kind != "name":
        node_image = name
    elif kind == "registry":
        node_image = f"{imported}.{'sif' if runtime in ('apptainer', 'singularity') else 'sqsh'}"
    file = {"file": image, "registry": f"{imported}.sqsh"}.get(kind, "")
    return launch(alloc, profile, node_image=node_image, base=base, file=file, name=name)
