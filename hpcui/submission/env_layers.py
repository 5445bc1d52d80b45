"""env="auto" over a job's own modules: a layer, as the sites' guides extend theirs.

CSC's `module load pytorch` carries torch, Lightning, Accelerate, Transformers and
DeepSpeed built for its GPUs and network; the guides add packages with `python -m venv
--system-site-packages` over it. hpcui does the same: what the modules' Python imports is
used from them, only what they lack is built (hpcui.submission.environments builds it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hpcui.request.plan import job_setup
from hpcui.store import remote as remote_side
from hpcui.store.remote import RemoteInfo
from hpcui.submission import containers
from hpcui.submission.environments import EnvSpec
from hpcui.submission.needs import Need
from hpcui.transport.base import Transport


def over_modules(
    spec: EnvSpec,
    needs: Sequence[Need],
    there: Mapping[str, tuple[bool, str]],
    modules: Sequence[str],
) -> EnvSpec | None:
    """env="auto" for a job that loads modules, as the sites' guides extend theirs (CSC:
    `python -m venv --system-site-packages` over `module load pytorch`): what the modules'
    Python imports is taken from them, whatever its version (a site's torch is built for its
    GPUs and network; one from an index is not), and only what they lack is installed.
    None when they lack nothing: no environment is needed. `there`: that Python's answers."""
    provided = {n.dist: there[n.module][1] for n in needs if there.get(n.module, (False,))[0]}
    missing = [r for r in spec.requirements if r.split("==", 1)[0] not in provided]
    if not missing:
        return None
    pins = tuple(p for p in spec.pins if p[0] not in provided)
    return EnvSpec(tuple(missing), pins=pins, auto=True, over=tuple(modules),
                   provided=tuple(sorted(provided.items())))  # fmt: skip


def layer(
    transport: Transport,
    spec: EnvSpec | None,
    needs: Sequence[Need],
    info: RemoteInfo,
    *,
    python: str,
    setup: Sequence[str],
    modules: tuple[str, ...],
    image: bool = False,
) -> tuple[EnvSpec | None, tuple[str, ...]]:
    """The spec to build (layered over `modules` where env="auto" and the job loads some;
    None: nothing to build) and the setup lines its build runs (the job's, modules loaded).
    Their Python is asked once per process for each name."""
    if spec is None or not spec.auto or not modules or image:  # an image: its own Python
        return spec, tuple(setup)
    known = info.loaded.setdefault(modules, {})
    new = {n.module: n.dist for n in needs if n.module not in known}
    lines = job_setup(setup, modules)
    if new:
        known.update(remote_side.ask_modules(transport, python, lines, new))
    layered = over_modules(spec, needs, known, modules)
    say = containers.import_progress.get() or containers.on_stderr
    loads = f"`module load {' '.join(modules)}`"
    if layered is None:
        say(f"env='auto': {loads} gives everything this call uses: no environment built")
    else:
        given = ", ".join(f"{d} {v}" for d, v in layered.provided) or "nothing it uses"
        say(
            f"env='auto': over {loads} ({given} from it); installing {' '.join(layered.requirements)}"
        )
    return layered, lines
