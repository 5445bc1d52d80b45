"""A mirrored MLflow file store imported into the MLflow server this machine names.

The job logs to MLflow's file store in its folder (`MLFLOW_TRACKING_URI=file:...`, set on
the node); its metric files only grow, one `timestamp value step` line per point. Here,
where `MLFLOW_TRACKING_URI` names a server (http/https), each node run becomes one server
run (found again by its `hpcui.source` tag: a second process, or a relay started again,
never makes a second), its params and tags are logged once, and each metric's new lines
are logged as they arrive. How many points the server already holds is asked of the
server itself (its history) the first time this process sees a metric: a relay cut
between a post and anything else posts nothing twice. MLflow's REST API only: no MLflow
install is needed here beyond the server.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcui.errors import HpcuiError
from hpcui.store.registry import JobRecord

if TYPE_CHECKING:
    from hpcui.trackers.site import Site

#: MLflow's log-batch takes at most 1000 metrics per call
BATCH = 1000
#: the file store's run status numbers (mlflow.entities.RunStatus)
STATUS = {1: "RUNNING", 2: "SCHEDULED", 3: "FINISHED", 4: "FAILED", 5: "KILLED"}

_lock = threading.Lock()
#: (server, server run id, metric key) -> points the server holds (this process's count)
_posted: dict[tuple[str, str, str], int] = {}
#: (server, source) -> server run id; runs whose end was said; params already logged
_runs: dict[tuple[str, str], str] = {}
_ended: set[tuple[str, str]] = set()
_params: set[tuple[str, str, str]] = set()


def server() -> str:
    uri = os.environ.get("MLFLOW_TRACKING_URI", "")
    return uri.rstrip("/") if uri.startswith(("http://", "https://")) else ""


def _call(base: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    url = f"{base}/api/2.0/mlflow/{path}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            return json.loads(res.read() or b"{}")
    except urllib.error.HTTPError as exc:
        said = exc.read().decode(errors="replace")[:300]
        if exc.code == 404 and "RESOURCE_DOES_NOT_EXIST" in said:
            return None
        raise HpcuiError(f"MLflow at {base} refused {path} ({exc.code}: {said}).") from None
    except (OSError, ValueError) as exc:
        raise HpcuiError(
            f"MLflow at {base} did not answer ({exc}): the mirror is kept here and the next "
            "pass imports what it has not yet."
        ) from None


def read_meta(path: Path) -> dict[str, str]:
    """A file store's meta.yaml, top-level `key: value` lines (all it writes there)."""
    out = {}
    for line in path.read_text(errors="replace").splitlines():
        key, sep, value = line.partition(":")
        if sep and not line.startswith((" ", "-")):
            out[key.strip()] = value.strip().strip("'\"")
    return out


def _experiment(base: str, name: str) -> str:
    query = urllib.parse.urlencode({"experiment_name": name})
    for _ in range(2):  # created meanwhile by another relay: found the second time
        got = _call(base, "GET", f"experiments/get-by-name?{query}")
        if got:
            return str(got["experiment"]["experiment_id"])
        try:
            return str(_call(base, "POST", "experiments/create", {"name": name})["experiment_id"])
        except HpcuiError as exc:
            if "RESOURCE_ALREADY_EXISTS" not in str(exc):
                raise
    raise HpcuiError(f"MLflow at {base}: experiment {name!r} neither found nor made.")


#: in a mirror: the server runs its node runs became ({source: [server, experiment, run]})
LINKS = ".hpcui-mlflow.json"


def links(local: Path) -> list[str]:
    """The MLflow pages of a mirror's runs (`hpcui track list`, `show`)."""
    try:
        known = json.loads((local / LINKS).read_text())
    except (OSError, ValueError):
        return []
    return [f"{b}/#/experiments/{e}/runs/{r}" for b, e, r in known.values()]


def _remember(local: Path, source: str, base: str, experiment: str, run_id: str) -> None:
    path = local / LINKS
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    known[source] = [base, experiment, run_id]
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(known))
    os.replace(tmp, path)


def _run(base: str, experiment: str, source: str, meta: dict[str, str], job: str) -> str:
    if (base, source) in _runs:
        return _runs[(base, source)]
    found = _call(base, "POST", "runs/search", {
        "experiment_ids": [experiment], "max_results": 1,
        "filter": f"tags.`hpcui.source` = '{source}'",
    })  # fmt: skip
    runs = (found or {}).get("runs") or []
    if runs:
        run_id = str(runs[0]["info"]["run_id"])
    else:
        made = _call(base, "POST", "runs/create", {
            "experiment_id": experiment, "run_name": meta.get("run_name", ""),
            "start_time": int(meta.get("start_time") or 0) or None,
            "tags": [{"key": "hpcui.source", "value": source}, {"key": "hpcui.job", "value": job}],
        })  # fmt: skip
        run_id = str(made["run"]["info"]["run_id"])
    _runs[(base, source)] = run_id
    return run_id


def _count(base: str, run_id: str, key: str) -> int:
    """The points of `key` the server holds (its history, page by page)."""
    n, token = 0, ""
    while True:
        query = {"run_id": run_id, "metric_key": key, "max_results": 25000}
        if token:
            query["page_token"] = token
        got = _call(base, "GET", f"metrics/get-history?{urllib.parse.urlencode(query)}") or {}
        n += len(got.get("metrics") or [])
        token = got.get("next_page_token") or ""
        if not token:
            return n


def _points(path: Path) -> list[dict[str, Any]]:
    """The whole lines of a metric file (a line still being written waits)."""
    text = path.read_text(errors="replace")
    lines = text.split("\n")[:-1]  # the part after the last newline is not whole yet
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 2:
            out.append({"timestamp": int(parts[0]), "value": float(parts[1]),
                        "step": int(parts[2]) if len(parts) > 2 else 0})  # fmt: skip
    return out


def export(cluster: Site, record: JobRecord, local: Path, ended: bool = False) -> None:
    """Import what is new in this job's mirrored store (nothing where no server is named);
    a run's end is its own meta.yaml's, so `ended` changes nothing here."""
    base, store = server(), local / "mlruns"
    if not base or not store.is_dir():
        return
    job = f"{cluster.name}:{record.job_id}"
    with _lock:
        for exp_dir in sorted(p for p in store.iterdir() if (p / "meta.yaml").is_file()):
            name = read_meta(exp_dir / "meta.yaml").get("name") or "Default"
            experiment = ""
            for run_dir in sorted(p for p in exp_dir.iterdir() if (p / "meta.yaml").is_file()):
                experiment = experiment or _experiment(base, name)
                _import_run(base, experiment, run_dir, job, local)


def _import_run(base: str, experiment: str, run_dir: Path, job: str, local: Path) -> None:
    meta = read_meta(run_dir / "meta.yaml")
    source = f"{job}:{run_dir.name}"
    known = (base, source) in _runs
    run_id = _run(base, experiment, source, meta, job)
    if not known:
        _remember(local, source, base, experiment, run_id)
    params = [
        {"key": p.relative_to(run_dir / "params").as_posix(), "value": p.read_text()}
        for p in sorted((run_dir / "params").rglob("*")) if p.is_file()
    ]  # fmt: skip
    new_params = [p for p in params if (base, run_id, p["key"]) not in _params]
    tags = [
        {"key": t.relative_to(run_dir / "tags").as_posix(), "value": t.read_text()}
        for t in sorted((run_dir / "tags").rglob("*")) if t.is_file()
    ]  # fmt: skip
    if new_params:
        _call(
            base, "POST", "runs/log-batch", {"run_id": run_id, "params": new_params, "tags": tags}
        )
        _params.update((base, run_id, p["key"]) for p in new_params)
    for path in sorted((run_dir / "metrics").rglob("*")):
        if not path.is_file():
            continue
        key = path.relative_to(run_dir / "metrics").as_posix()
        if (base, run_id, key) not in _posted:
            _posted[(base, run_id, key)] = _count(base, run_id, key)
        points = _points(path)[_posted[(base, run_id, key)] :]
        for i in range(0, len(points), BATCH):
            batch = [{"key": key, **p} for p in points[i : i + BATCH]]
            try:
                _call(base, "POST", "runs/log-batch", {"run_id": run_id, "metrics": batch})
            except HpcuiError:  # it may have landed: the server is asked again next pass
                del _posted[(base, run_id, key)]
                raise
            _posted[(base, run_id, key)] += len(batch)
    status = STATUS.get(int(meta.get("status") or 1), "RUNNING")
    if status not in ("RUNNING", "SCHEDULED") and (base, run_id) not in _ended:
        _call(base, "POST", "runs/update", {
            "run_id": run_id, "status": status, "end_time": int(meta.get("end_time") or 0) or None,
        })  # fmt: skip
        _ended.add((base, run_id))
