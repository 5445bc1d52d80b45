"""Hydra's multirun as one hpcui sweep (`hydra/launcher=hpcui`): the laptop side.

The plugin class Hydra finds is hydra_plugins/hpcui_launcher (Hydra accepts plugins only
from that namespace); it hands each batch of overrides here. Each job's configuration is
composed here, where the config files are, and travels with its element (the sweep's
"keyed" mode: one configuration per task pickle); the element's key comes from its
overrides' values, so running the same multirun again under the same `name` submits
nothing that has a result. The jobs run Hydra's own `run_job` on the node
(hpcui/node/hydra_job.py); their output folders (`.hydra/`, the job's log, what the task
wrote there) are copied into this machine's sweep folder as Hydra's basic launcher would
have left them, and each job's JobReturn carries its return value or its error.

Imports hydra-core: only the plugin imports this module.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from hpcui.backends.states import JobState
from hpcui.clusters.api import connect
from hpcui.errors import HpcuiError, UsageError
from hpcui.node.hydra_job import HydraElement, HydraTask, output_dir
from hpcui.submission.pickling import by_value
from hpcui.sweeps import space
from hpcui.sweeps import sweep as sweeps
from hpcui.sweeps.store import NAME as SWEEP_NAME

log = logging.getLogger(__name__)

#: the launcher's own settings; every other non-null one is a resource keyword of submit
OWN = ("cluster", "name", "resources", "resume_failed", "wait_s")


def launch(
    params: Mapping[str, Any],
    *,
    hydra_context: HydraContext,
    task_function: TaskFunction,
    config: DictConfig,
    job_overrides: Sequence[Sequence[str]],
    initial_job_idx: int,
) -> list[JobReturn]:
    setup_globals()
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    sweep_dir = Path(str(config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    if "mode" in config.hydra.sweep and config.hydra.sweep.mode is not None:
        os.chmod(sweep_dir, int(str(config.hydra.sweep.mode), 8))
    jobs = [
        _compose(hydra_context, config, list(overrides), initial_job_idx + i)
        for i, overrides in enumerate(job_overrides)
    ]
    found = space.expand(configs=[j.columns for j in jobs])
    keys = [space.config_key(j.columns) for j in jobs]
    by_key = {key: HydraElement(key, j.config) for key, j in zip(keys, jobs)}
    name = params.get("name") or default_name(str(config.hydra.job.name), sweep_dir)
    cluster = connect(params.get("cluster"))
    resources = resources_of(params)
    task = HydraTask(task_function, node_context(hydra_context), node_state())
    with by_value(task_function):  # the user's own package travels as the task does
        sweep = sweeps.start(
            cluster, task, name=name, configs=[c for _, c in found], args=[by_key],
            mode="keyed", **resources,
        )  # fmt: skip
        submitted = list(sweep.last_submitted)
        if params.get("resume_failed", True):
            submitted += [j.job_id for j in sweep.resume()]
    log.info(
        f"hpcui: sweep {name!r} on {cluster.name}: {len(by_key)} configurations, "
        f"{len(submitted)} submitted now ({', '.join(submitted[:3]) or 'none'}"
        f"{', ...' if len(submitted) > 3 else ''}); `hpcui sweep show {name}` shows it"
    )
    try:
        sweep.wait(timeout=params.get("wait_s"))
    except KeyboardInterrupt:
        log.warning(
            f"hpcui: stopped waiting; the jobs go on. Run the same command with "
            f"hydra.launcher.name={name} to collect them (nothing with a result runs again)."
        )
        raise
    states = {e.key: e for e in sweep.elements()}
    return [
        _job_return(cluster, job, states[key], sweep_dir)
        for key, job in zip(keys, jobs, strict=True)
    ]


class _Composed:
    """One job of the multirun: its configuration, its table columns, its local folder."""

    def __init__(self, overrides: list[str], config: DictConfig, subdir: str) -> None:
        self.overrides = overrides
        self.config = config
        self.subdir = subdir
        self.columns = columns_of(overrides)


def _compose(
    hydra_context: HydraContext, config: DictConfig, overrides: list[str], idx: int
) -> _Composed:
    lst = " ".join(filter_overrides(overrides))
    log.info(f"\t#{idx} : {lst}")
    sweep_config = hydra_context.config_loader.load_sweep_config(config, overrides)
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"job_id_for_{idx}"
        sweep_config.hydra.job.num = idx
    with read_write(sweep_config.hydra), open_dict(sweep_config.hydra):
        # plain values: typed, the node would need this launcher's class to unpickle them
        sweep_config.hydra.launcher = OmegaConf.create(
            OmegaConf.to_container(sweep_config.hydra.launcher)
        )
    before = HydraConfig.instance().cfg
    HydraConfig.instance().set_config(sweep_config)  # ${hydra:...} in subdir resolves
    try:
        subdir = str(OmegaConf.select(sweep_config, "hydra.sweep.subdir"))
    finally:
        if before is not None:
            HydraConfig.instance().cfg = before
    return _Composed(overrides, sweep_config, subdir)


def node_context(hydra_context: HydraContext) -> HydraContext:
    """What run_job needs on the node: the callbacks. The config loader stays here - the
    node composes nothing, and the loader holds this launcher's typed config, whose class
    (in hydra_plugins, not on the node) the node could not unpickle."""
    no_loader: Any = None  # run_job reads only the callbacks
    return HydraContext(config_loader=no_loader, callbacks=hydra_context.callbacks)


def node_state() -> Any:
    """Hydra's global state as the node needs it (what Hydra's submitit launcher sends),
    less what refers to this launcher's config class: its ConfigStore entry, and the
    multirun's HydraConfig (run_job sets the job's own)."""
    state = Singleton.get_state()  # a deep copy
    state["instances"].pop(HydraConfig, None)
    store = state["instances"].get(ConfigStore)
    if store is not None:
        store.repo.get("hydra", {}).get("launcher", {}).pop("hpcui.yaml", None)
    return state


def columns_of(overrides: Sequence[str]) -> dict[str, Any]:
    """The sweep table's columns of one job: each override's key and its typed value
    (`lr=0.1` -> {"lr": 0.1}; `+model=big` -> {"model": "big"})."""
    out: dict[str, Any] = {}
    for o in OverridesParser.create().parse_overrides(list(filter_overrides(overrides))):
        key = re.sub(r"[^A-Za-z0-9_.-]", "_", o.get_key_element()).strip("_") or "override"
        if not space.NAME.match(key):
            key = f"p_{key}"[:64]
        value = None if o.is_delete() else o.value()
        try:
            space.canonical({key: value})
        except UsageError:
            value = str(value)
        out[key] = value
    return out


def default_name(job_name: str, sweep_dir: Path) -> str:
    """`hydra-<job name>-<the sweep folder's last two parts>`: one sweep per multirun,
    as Hydra makes one folder per multirun (`multirun/2026-12-07/10-11-12`)."""
    raw = "-".join(["hydra", job_name, *sweep_dir.parts[-2:]])
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", raw)[:64]
    return name if SWEEP_NAME.match(name) else "hydra-multirun"


def resources_of(params: Mapping[str, Any]) -> dict[str, Any]:
    """Submit's keywords from the launcher's config: its fields, then `resources`."""
    plain = {k: OmegaConf.to_container(v) if OmegaConf.is_config(v) else v
             for k, v in params.items()}  # fmt: skip
    extra = plain.get("resources") or {}
    if not isinstance(extra, Mapping):
        raise UsageError(
            f"hydra.launcher.resources must be a mapping of submit's keywords, got {extra!r}."
        )
    out: dict[str, Any] = {k: v for k, v in plain.items() if k not in OWN and v is not None}
    out.update({str(k): v for k, v in extra.items()})
    return out


def _job_return(cluster: Any, job: _Composed, state: Any, sweep_dir: Path) -> JobReturn:
    local = sweep_dir / job.subdir
    ret = JobReturn(overrides=job.overrides, working_dir=str(local),
                    task_name=str(job.config.hydra.job.name))  # fmt: skip
    task_cfg = job.config.copy()
    with open_dict(task_cfg):
        del task_cfg["hydra"]
    ret.cfg = task_cfg
    ret.hydra_cfg = OmegaConf.create({"hydra": job.config.hydra})
    if state.job_id is None:
        ret.status = JobStatus.FAILED
        ret.return_value = UsageError(f"{job.overrides} was never submitted.")
        return ret
    _fetch(cluster, state, local)
    ran = local / ".hydra" / "hydra.yaml"
    if ran.is_file():  # what the job ran with (its output_dir on the cluster)
        loaded = OmegaConf.load(ran)
        assert isinstance(loaded, DictConfig)
        ret.hydra_cfg = loaded
    try:
        ret.return_value = cluster.get_job(state.job_id).result(timeout=60)
        ret.status = JobStatus.COMPLETED
    except HpcuiError as exc:
        ret.return_value = exc
        ret.status = JobStatus.FAILED
    return ret


def _fetch(cluster: Any, state: Any, local: Path) -> None:
    """The job's Hydra folder into `local`; a job that never started has none."""
    try:
        remote = output_dir(cluster.files.folder(state.job_id), state.key)
        cluster.files.fetch(remote, local, into=False)
    except HpcuiError as exc:
        if state.state is JobState.COMPLETED:
            log.warning(f"hpcui: the output folder of {state.job_id} was not copied: {exc}")
