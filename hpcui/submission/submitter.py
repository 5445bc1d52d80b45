"""Submitting callables: a request becomes a plan, pickles, a batch script, one upload and
one sbatch round trip, records and tracking.

`Submitter` is handed the parts it needs (transport, scheduler, registry, a way to track
ids, the profile's choices) and returns what it submitted; `hpcui.clusters.cluster.Cluster`
composes it and stays the public front (it turns the ids into `Job`s). `plan` and
`preview_script` need no connection and no Submitter.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from hpcui.backends.containers import ContainerLaunch
from hpcui.backends.job_paths import CALLS_PACK, RESULT_KEY, SCRIPT, pack_calls, pickle_name
from hpcui.backends.shell import PREVIEW_DIGEST
from hpcui.config import ClusterConfig
from hpcui.errors import (
    CommandTimeout,
    ConnectionLost,
    HpcuiError,
    RemotePythonError,
    RemoteWriteError,
    SchedulerError,
    SubmitOutcomeUnknown,
    SubmitRejected,
    UsageError,
)
from hpcui.profiles import Profile
from hpcui.request.allocation import Allocation
from hpcui.request.plan import batch_spec, explain, resolve
from hpcui.request.resources import Resources
from hpcui.schedulers.base import Scheduler
from hpcui.store import remote as remote_side
from hpcui.store.registry import JobRecord, Registry, segment_index
from hpcui.store.signing import job_key
from hpcui.submission import arrays, containers, env_layers, environments, frameworks
from hpcui.submission import recovery as submit_recovery
from hpcui.submission.env_store import key_of
from hpcui.submission.needs import Need, check_needs
from hpcui.submission.pickling import pickle_calls
from hpcui.submission.runtime_bundle import build_bundle, bundle_sha256
from hpcui.transport.base import Transport

log = logging.getLogger(__name__)

#: cut-off submissions are looked for at most this often by the polls (forced on a miss)
RECONCILE_S = 30.0


@dataclass(frozen=True)
class ScriptPreview:
    allocation: Allocation
    summary: str  # explain(): the shape, then advice lines
    script: str


@dataclass(frozen=True)
class Submitted:
    """One submit's outcome: the scheduler's ids (one per array element) and what a `Job`
    is made of."""

    ids: list[str]
    folder: str
    num_tasks: int
    name: str
    result_key: bytes
    #: the ids are a chain's segments, in order (hpcui.jobs.chain); the trackers relayed
    chain: bool = False
    track: str = ""


def plan(config: ClusterConfig, profile: Profile, req: Resources, default_name: str) -> Allocation:
    """Validate a request against the profile (the config's defaults under it), no network."""
    alloc = resolve(merged := req.merged(config.defaults), profile, default_name=default_name)
    return frameworks.with_module_advice(alloc, profile, config, merged.python)


def preview_script(
    config: ClusterConfig,
    profile: Profile,
    scheduler: Scheduler,
    *,
    python: str,
    setup: list[str],
    array_size: int | None = None,
    **resource_kwargs: Any,
) -> ScriptPreview:
    """The batch script a submit with these resources would send, and the plan's summary.

    No network: the job folder, token and runtime bundle exist only at submit time, so
    the script names them ``HOME/.hpcui/jobs/TOKEN`` and ``.../runtime/BUNDLE.zip``.
    """
    req = Resources.from_kwargs(**resource_kwargs)
    alloc = plan(config, profile, req, "hpcui")
    base = config.remote_base.rstrip("/").replace("~", "HOME", 1).replace("$HOME", "HOME")
    image = None
    if alloc.container:  # named as the submit will, nothing prepared offline
        image = containers.preview_launch(alloc, profile, base)
    spec = batch_spec(
        alloc,
        folder=f"{base}/jobs/TOKEN",
        token="TOKEN",
        array_size=array_size,
        python=python,
        setup=setup,
        pythonpath=(f"{base}/runtime/BUNDLE.zip",),
        verified=((f"{base}/runtime/BUNDLE.zip", PREVIEW_DIGEST),),
        container=image,
        chain=req.merged(config.defaults).chain > 1,  # each segment's script, as submitted
    )
    return ScriptPreview(
        allocation=alloc, summary=explain(alloc), script=scheduler.render_script(spec)
    )


def _image_key(alloc: Allocation) -> tuple[str, str]:
    return alloc.container_runtime or "", alloc.container or ""


class Submitter:
    """One cluster's submissions: the remote environment probed once, the runtime bundle
    installed once, each submit idempotent across a dropped link."""

    def __init__(
        self,
        *,
        name: str,
        config: ClusterConfig,
        profile: Profile,
        python: str,
        setup: list[str],
        transport: Transport,
        scheduler: Scheduler,
        registry: Registry,
        track: Callable[[list[str]], None],
        on_submitted: Callable[[], None],
        missing_setup_modules: Callable[[], list[str]],
    ) -> None:
        self.name = name
        self.config = config
        self.profile = profile
        self.python = python
        self.setup = setup
        self.transport = transport
        self.scheduler = scheduler
        self.registry = registry
        self._track = track
        self._on_submitted = on_submitted
        self._missing_setup_modules = missing_setup_modules
        self._remote: dict[str, remote_side.RemoteInfo] = {}  # by Python
        self._shared_base_said = False
        self._setup_checked = False
        self._reconciled_at: float | None = None
        self._lock = threading.Lock()
        self._images: dict[tuple[str, str], containers.Prepared] = {}
        #: tasks one array may have here (hpcui.submission.arrays.ArrayLimit)
        self.array_limit = arrays.ArrayLimit(lambda: self.profile.max_array_size, scheduler)

    # -- remote environment ----------------------------------------------------------------

    def remote_info(
        self,
        *,
        local_version: tuple[int, int] | None = None,
        check_python: bool = True,
        python: str | None = None,
        needs: Sequence[Need] = (),
    ) -> remote_side.RemoteInfo:
        """Home, job base and Python of the cluster, probed once in one round trip. Refuses
        when the remote Python's minor version differs from ours: cloudpickle cannot carry
        a function across it. (A job in a container image runs the image's Python instead:
        `check_python=False`, and `containers.prepare` checks that one.)"""
        python = python or self.python  # a submit's own python= is probed once too
        modules = {n.module: n.dist for n in needs}  # asked in the same round trip
        with self._lock:
            if python not in self._remote:
                self._remote[python] = remote_side.probe_remote(
                    self.transport, self.config, python=python, setup=self.setup, modules=modules
                )
            info = self._remote[python]
        if info.unsafe_base:
            raise UsageError(
                f"remote_base {info.shared_base} on {self.name} is writable by others, and "
                f"your private folder in it, {info.unsafe_base}, is not yours alone (another "
                "owner, or others may write it): hpcui puts no job there, since a file "
                "someone else can write would run as you. Remove or fix that folder "
                f"(chmod 700, owned by you), or set remote_base to a folder of your own."
            )
        if info.shared_base and not self._shared_base_said:
            self._shared_base_said = True
            sticky = (
                f" Without the sticky bit on {info.shared_base} a group member can still "
                "rename that folder away: ask its owner for `chmod +t`."
                if info.shared_not_sticky
                else ""
            )
            log.warning(
                "remote_base %s on %s is writable by others: your jobs and runtime bundles go "
                "into %s (0700, yours alone).%s",
                info.shared_base,
                self.name,
                info.base,
                sticky,
            )
        want = local_version or sys.version_info[:2]
        if not check_python:
            return info
        if info.python_version is None:
            raise RemotePythonError(
                f"No usable Python on {self.name}: `{python}` failed "
                f"({info.python_error.strip() or 'no output'}). Set `python = ...` (and `setup` "
                "lines such as `module load python/3.X`) in this cluster's config, or give "
                "the submit a python= that exists there."
            )
        if info.python_version[:2] != tuple(want):
            have = ".".join(map(str, info.python_version[:2]))
            local = ".".join(map(str, want))
            raise RemotePythonError(
                f"{self.name}'s Python is {have} (`{python}`), this machine runs "
                f"{local}: cloudpickle cannot carry functions across minor versions. Load a "
                f'Python {local} on the cluster (e.g. setup = ["module load python/{local}"] and '
                f'python = "python3", or a venv\'s python), or run hpcui locally with Python {have}.'
            )
        return info

    def _check_setup_modules(self) -> None:
        """Before the first submit: every module the `setup` lines load must exist here.

        `module load` of a missing module only prints an error and the job would run
        without it (or fail much later); say so now, with the fix. Once per process.
        """
        if self._setup_checked:
            return
        missing = self._missing_setup_modules()
        if missing:
            raise UsageError(
                f"setup of cluster {self.name!r} loads {', '.join(missing)}, which "
                f"{self.name} does not have. Fix `setup` in the cluster config; "
                f"`hpcui modules -c {self.name} --search NAME` lists what exists."
            )
        self._setup_checked = True

    def container_launch(
        self, alloc: Allocation, info: remote_side.RemoteInfo
    ) -> ContainerLaunch | None:
        """The request's image made ready on the login node (once per image and process),
        as the batch script starts it; None without a container."""
        if alloc.container is None:
            return None
        with self._lock:
            ready = self._images.get(_image_key(alloc))
        if ready is None:
            ready = self._prepare(alloc, info)
        return containers.launch(
            alloc, self.profile, node_image=ready.node_image, base=info.base, home=info.home,
            file=ready.file, name=ready.name,
        )  # fmt: skip

    def image_imports(self, req: Resources, module: str) -> bool:
        """Whether the request's image imports `module` (JupyterLab before `hpcui jupyter`);
        the image is made ready on the way, as a submit would."""
        alloc = plan(self.config, self.profile, req, "hpcui")
        ready = self._prepare(alloc, self.remote_info(check_python=False), check_import=module)
        return bool(ready.has_module)

    def _prepare(
        self, alloc: Allocation, info: remote_side.RemoteInfo, check_import: str | None = None
    ) -> containers.Prepared:
        """The login-node round trip for the request's image, kept for this process."""
        ready = containers.prepare(
            self.transport, alloc, self.profile, cluster=self.name, base=info.base,
            setup=self.setup, check_import=check_import,
        )  # fmt: skip
        with self._lock:
            self._images[_image_key(alloc)] = ready
        return ready

    def ensure_bundle(self, info: remote_side.RemoteInfo) -> tuple[str, str]:
        """The bundle's path on the cluster and its SHA-256, which every job checks before
        it imports it (a file there is never trusted by its name alone)."""
        digest, data = build_bundle()
        path = f"{info.base}/runtime/{digest}.zip"
        if digest not in info.bundles:
            remote_side.install_file(
                self.transport, path, data, mode=0o644, what="the runtime bundle"
            )
            info.bundles.add(digest)
        return path, bundle_sha256()

    # -- submit ----------------------------------------------------------------------------

    def submit(self, fn: Callable[..., Any], calls: list[tuple[tuple, dict]], req: Resources,
               is_array: bool, call_meta: list[dict[str, Any]] | None = None) -> Submitted:  # fmt: skip
        """`fn` once per call: one job, or one job array (one sbatch either way); call i's
        record holds `call_meta[i]` from before sbatch (a sweep's key, found after a crash)."""
        if not callable(fn):
            raise UsageError(f"submit() needs a callable, got {type(fn).__name__}.")
        req, code = frameworks.resolve_launcher(req, self.config.defaults, fn, calls)
        alloc = plan(self.config, self.profile, req, getattr(fn, "__name__", "hpcui"))
        launcher_files = frameworks.launcher_files(req, alloc, code)  # refused before any network
        segments = (merged := req.merged(self.config.defaults)).chain
        if segments > 1 and is_array:
            raise UsageError("chain= runs one long call in segments; map() runs many calls "
                             "at once: submit each call with submit(fn, x, chain=N) instead.")  # fmt: skip
        needs: list[Need] = []  # pickling fails early on unpicklable input
        pickles = pickle_calls(fn, calls, time_s=alloc.time_s, needs=needs)
        python = req.python or self.python
        in_image = alloc.container is not None  # the image's Python: its own packages
        wanted = environments.spec_of(merged.env, needs) if merged.env else None
        python = wanted.existing if wanted and wanted.existing else python
        info = self.remote_info(check_python=not in_image, python=python, needs=needs)
        wanted, setup = env_layers.layer(self.transport, wanted, needs, info, python=python,
                                         setup=self.setup, modules=alloc.modules, image=in_image)  # fmt: skip
        if wanted and not wanted.existing:  # the environment's Python, built once or found
            python = environments.use(
                self.transport, info, wanted, needs, python=python, setup=setup,
                cluster=self.name, profile=self.profile, in_image=in_image,
                probe=lambda p: self.remote_info(python=p, needs=needs),
            )  # fmt: skip
        elif not in_image:  # what the call imports, there: refused before anything is queued
            check_needs(self.transport, info, needs, python, self.setup, cluster=self.name,
                        modules=alloc.modules)  # fmt: skip
        in_env = key_of(python)  # an environment env= made: its folder, its key
        self.reconcile_quietly()
        self._check_setup_modules()
        image = self.container_launch(alloc, info)
        bundle, bundle_sha = self.ensure_bundle(info)
        token = uuid.uuid4().hex[:16]
        folder = f"{info.base}/jobs/{token}"
        spec = batch_spec(
            alloc, folder=folder, token=token, array_size=len(calls) if is_array else None,
            python=python, setup=self.setup, pythonpath=(bundle,),
            verified=((bundle, bundle_sha),), container=image, chain=segments > 1,
            env_folder=python.rsplit("/bin/", 1)[0] if in_env else "",
        )  # fmt: skip
        script = self.scheduler.render_script(spec)
        key = job_key(token)
        # the key in a file of the upload (0700 folder), never in a command's text
        files = {SCRIPT: script.encode(), RESULT_KEY: key.hex().encode() + b"\n"}
        files.update(launcher_files)
        if is_array:
            files[CALLS_PACK] = pack_calls(pickles)
        else:
            files[pickle_name()] = pickles[0]
        records = [
            JobRecord(
                cluster=self.name,
                token=token,
                array_index=segment_index(i) if segments > 1 else (i if is_array else -1),
                name=alloc.name,
                folder=folder,
                num_tasks=alloc.num_tasks,
                meta={
                    **(
                        {"script": script, "submitter": submit_recovery.submitter()}
                        if i == 0
                        else {}
                    ),
                    "signed": True,
                    # what runs: how hpcui knows its own services (never by a job's name)
                    "function": function_name(fn),
                    # the image the job runs in, as asked (the Job screen and `hpcui show` say it)
                    **({"container": f"{image.runtime} {image.asked}"} if image else {}),
                    **({"track": merged.track} if merged.track else {}),  # relayed here
                    **({"env": in_env} if in_env else {}),  # env_store: in use, used at
                    # segment i of a chain of `segments` (hpcui.jobs.chain)
                    **({"chain": [i, segments]} if segments > 1 else {}),
                    **(call_meta[i] if call_meta and segments == 1 else {}),
                },
            )
            for i in range(segments if segments > 1 else len(calls))
        ]
        with submit_recovery.in_flight(self.name, token):
            self.registry.add(records)  # before sbatch: a crash leaves a findable record
            try:
                got = self._submit_idempotent(folder, token, files, segments, alloc.after_ok)
            except (SubmitRejected, RemoteWriteError):  # nothing was submitted, for certain
                self.registry.remove_token(self.name, token)
                with contextlib.suppress(HpcuiError):
                    self.transport.run(["rm", "-rf", folder])
                raise
            except (ConnectionLost, CommandTimeout, SchedulerError) as exc:
                got = self._outcome_unknown(token, exc)
        # anything else (KeyboardInterrupt...) leaves the record to submit_recovery
        if segments > 1:
            self.registry.set_chain_ids(self.name, token, got)
            ids = got
        else:
            base_id = got[0]
            self.registry.set_job_ids(self.name, token, base_id, is_array)
            ids = [f"{base_id}_{i}" for i in range(len(calls))] if is_array else [base_id]
        self._track(ids)
        self._on_submitted()
        return Submitted(ids, folder, alloc.num_tasks, alloc.name, key, segments > 1, merged.track)

    def _submit_idempotent(
        self, folder: str, token: str, files: dict[str, bytes], segments: int, after: tuple
    ) -> list[str]:
        """Upload and sbatch in one round trip; after a drop, find the job before retrying.
        The scheduler's id(s): one (an array's base id), or every segment's of a chain."""
        sched, chained = self.scheduler, segments > 1
        cmd = sched.chain_submit_command(SCRIPT, segments, after) if chained else None
        submit = remote_side.guarded_submit_command(cmd or sched.submit_command(SCRIPT))
        claim = remote_side.submit_claim()
        try:
            res = self.transport.put_files(folder, files, then=submit, first=claim)
        except ConnectionLost as exc:
            log.warning("connection dropped during submit of %s; recovering", token)
            found = self._recover_submit(folder, token, chained)
            if found is not None:
                return found
            log.warning("token %s not found on %s: submitting again", token, self.name)
            try:
                res = self.transport.put_files(folder, files, then=submit, first=claim)
            except ConnectionLost:
                raise exc from None
        if not res.ok:
            said = (res.stderr or res.stdout).strip()
            if remote_side.disk_full(said):
                # a write failed: before the claim or the unpack (nothing submitted), or the
                # job id's (sbatch ran): the token decides, never a guess
                found = self._recover_submit(folder, token, chained)
                if found is not None:
                    return found
                raise RemoteWriteError(
                    f"Submitting to {self.name} failed: the disk or quota under "
                    f"{folder.rsplit('/jobs/', 1)[0]} is full ({said}). Nothing was submitted. "
                    "Free space there (`hpcui quota` shows usage) or set remote_base to a "
                    "filesystem with room, then submit again."
                )
            raise SubmitRejected(
                f"{self.name} rejected the job: {said}. {sched.submit_advice(said)}"
            )
        return sched.parse_chain_submit(res.stdout) if chained else [sched.parse_submit(res.stdout)]

    def _outcome_unknown(self, token: str, exc: HpcuiError) -> list[str]:
        """The submit was cut off after its claim: finished now if its folder already holds
        the answer, else the record stays for `reconcile` (never deleted while the job may
        exist, never submitted again)."""
        with contextlib.suppress(HpcuiError):
            found = self._finish_cut_off([token]).ids
            if token in found:
                return found[token]
        raise SubmitOutcomeUnknown(
            f"Submitting to {self.name} was cut off: {exc} Whether the job reached the "
            f"scheduler is not known yet. hpcui kept its record (token {token}) and finds the "
            f"job by that token on the next poll or `hpcui jobs -c {self.name}` - do not "
            "submit it again.",
            token=token,
        ) from exc

    def _recover_submit(self, folder: str, token: str, chained: bool) -> list[str] | None:
        res = self.transport.run(remote_side.recover_command(folder))
        if res.ok and res.stdout.strip():
            if chained:
                return self.scheduler.parse_chain_submit(res.stdout)
            return [self.scheduler.parse_submit(res.stdout)]
        found = self.scheduler.find_token(token)  # a chain: its first segment at least
        return None if found is None else [found]

    # -- cut-off submissions (hpcui.submission.recovery) ----------------------------------------

    def _finish_cut_off(self, tokens: Iterable[str] | None = None) -> submit_recovery.Recovered:
        return submit_recovery.finish_cut_off(
            self.name, self.registry, self.transport, self.scheduler, self._track, tokens=tokens
        )

    def reconcile(self, *, force: bool = False) -> submit_recovery.Recovered:
        """Finish submissions cut off earlier (a killed client, a lost link, a timeout).

        Costs a local registry query; the cluster is asked only when one is unfinished, and
        at most every RECONCILE_S unless forced.
        """
        now = time.monotonic()
        last = self._reconciled_at
        if not force and last is not None and now - last < RECONCILE_S:
            return submit_recovery.Recovered()
        self._reconciled_at = now
        return self._finish_cut_off()

    def reconcile_quietly(self) -> None:
        try:
            self.reconcile()
        except HpcuiError as exc:  # a look-up for later must not fail what the user asked
            log.warning("could not finish cut-off submissions on %s: %s", self.name, exc)


def function_name(fn: Callable[..., Any]) -> str:
    """`module.qualname` of a submitted callable ('' when it has none: a partial)."""
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    return f"{module}.{name}" if module and name else ""
