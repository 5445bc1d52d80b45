"""A sweep's results side by side: configuration, state, return value, metrics, usage.

One row per element, in the sweep's order: its configuration's columns, `state`, `job_id`,
`attempts`, the return value (`result`, or `result.<key>` for each key of a returned dict,
nested keys joined by dots), `error` (the last line of what it raised), the last value of
each metric its log printed (`metric.<name>`, hpcui.metrics' reading) and what sacct says
it used (`elapsed_s`, `cpu_eff`, `mem_eff`, `max_rss`). One scheduler call answers usage
for all; each result and log is read once and then kept on this machine.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from hpcui.common.formatting import hms, size
from hpcui.errors import HpcuiError, JobError, UsageError
from hpcui.metrics import MetricReader

if TYPE_CHECKING:
    from hpcui.clusters.cluster import Cluster
    from hpcui.sweeps.element import ElementState

log = logging.getLogger(__name__)

#: columns every row has, after the configuration's
FIXED = ("state", "job_id", "attempts")


def flatten(value: Any, prefix: str = "result") -> dict[str, Any]:
    """A returned dict becomes one column per (nested) key; anything else is one column."""
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}"))
        return out
    return {prefix: value}


def _error_line(exc: BaseException) -> str:
    said = getattr(exc, "remote_traceback", "") or str(exc)
    lines = [line.strip() for line in str(said).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def _outcome(cluster: Cluster, e: ElementState) -> dict[str, Any]:
    if e.job_id is None or e.state is None or not e.state.is_final:
        return {}
    job = cluster.get_job(e.job_id)
    try:
        value = job.result(timeout=60)
        if e.position is not None:  # a packed task: this element's (kind, value) pair
            kind, value = value[e.position]
            if kind != "success":
                lines = [ln.strip() for ln in str(value).splitlines() if ln.strip()]
                return {"error": lines[-1] if lines else "failed"}
        return flatten(value)
    except JobError as exc:
        return {"error": _error_line(exc)}
    except HpcuiError as exc:  # the result could not be read now: said, the row stays
        return {"error": f"result not read: {exc}"}


def _metrics(cluster: Cluster, name: str, e: ElementState) -> dict[str, Any]:
    if e.job_id is None or e.state is None or e.position is not None:
        return {}  # a packed task's log is all its elements' one after another
    reader = MetricReader()
    try:
        for chunk in cluster.logs(cluster.get_job(e.job_id), "stdout", 0):
            reader.feed_text(chunk.text)
    except HpcuiError as exc:
        log.info("sweep %s: no metrics for %s: %s", name, e.job_id, exc)
        return {}
    reader.flush()
    found = reader.metrics(e.job_id)
    return {f"metric.{s.name}": s.last for s in found.series if s.last is not None}


def _usage(cluster: Cluster, name: str, job_ids: list[str]) -> dict[str, dict[str, Any]]:
    if not job_ids:
        return {}
    try:
        history = cluster.site.history(None, job_ids=job_ids)
    except HpcuiError as exc:  # accounting off, or not answering: the table without it
        log.info("sweep %s: no usage: %s", name, exc)
        return {}
    return {
        h.job_id: {
            "elapsed_s": h.elapsed_s,
            "cpu_eff": None if h.cpu_efficiency is None else round(h.cpu_efficiency, 3),
            "mem_eff": None if h.mem_efficiency is None else round(h.mem_efficiency, 3),
            "max_rss": h.max_rss_bytes,
        }
        for h in history
    }


def rows(
    cluster: Cluster, name: str, elements: list[ElementState], *, metrics: bool = True
) -> list[dict[str, Any]]:
    ended = [e.job_id for e in elements if e.job_id and e.state and e.state.is_final]
    usage = _usage(cluster, name, ended)
    out = []
    for e in elements:
        row: dict[str, Any] = {"key": e.key, **e.config}
        row["state"] = e.state.value if e.state else "NOT_SUBMITTED"
        row["job_id"], row["attempts"] = e.job_id, e.attempts
        row.update(_outcome(cluster, e))
        if metrics:
            row.update(_metrics(cluster, name, e))
        row.update(usage.get(e.job_id or "", {}))
        out.append(row)
    return out


def columns(table: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every column in first-seen order (rows differ: a failed one has no result)."""
    seen: dict[str, None] = {}
    for row in table:
        seen.update(dict.fromkeys(row))
    return list(seen)


def sort_rows(table: list[dict[str, Any]], column: str) -> list[dict[str, Any]]:
    """By `column` (`-column`: descending); rows without it last, either way."""
    desc = column.startswith("-")
    name = column.lstrip("-")
    if table and name not in columns(table):
        raise UsageError(
            f"No column {name!r} to sort by; the columns: {', '.join(columns(table))}."
        )
    have = [r for r in table if r.get(name) is not None]
    missing = [r for r in table if r.get(name) is None]

    def key(row: dict[str, Any]) -> tuple[int, Any]:
        v = row[name]
        return (0, v) if isinstance(v, int | float) and not isinstance(v, bool) else (1, str(v))

    return sorted(have, key=key, reverse=desc) + missing


def to_csv(table: list[dict[str, Any]]) -> str:
    cols = columns(table)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for row in table:
        w.writerow({c: _cell(row.get(c)) for c in cols})
    return buf.getvalue()


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, list | dict):
        return json.dumps(v)
    return v


def cell_text(column: str, v: Any, width: int = 40) -> str:
    """A cell as people read it, the same in `hpcui sweep show` and the app: `-` when
    empty, floats to 4 digits, bytes and seconds as sizes and clock times."""
    if v is None:
        return "-"
    if column == "max_rss" and isinstance(v, int | float):
        return size(v)
    if column == "elapsed_s" and isinstance(v, int | float):
        return hms(v, pad_hours=False)
    if isinstance(v, float):
        return f"{v:.4g}"
    text = v if isinstance(v, str) else json.dumps(v)
    return text if len(text) <= width else text[: width - 1] + "…"


def filter_rows(table: list[dict[str, Any]], query: str) -> list[dict[str, Any]]:
    """The rows every word of `query` matches: `COLUMN=TEXT` (that cell contains TEXT),
    `COLUMN>N` / `COLUMN<N` (a number), or TEXT (any cell contains it); case-insensitive."""
    words = query.split()
    if not words:
        return list(table)
    tests = [_word_test(w) for w in words]
    return [r for r in table if all(t(r) for t in tests)]


def _word_test(word: str) -> Any:
    for op in ("=", ">", "<"):
        name, sep, want = word.partition(op)
        if sep and name and want:
            return _column_test(name, op, want)
    low = word.lower()
    return lambda r: any(low in cell_text(c, v, width=10**6).lower() for c, v in r.items())


def _column_test(name: str, op: str, want: str) -> Any:
    if op == "=":
        low = want.lower()
        return lambda r: low in cell_text(name, r.get(name), width=10**6).lower()
    try:
        bound = float(want)
    except ValueError:
        raise UsageError(f"{name}{op}{want}: after {op!r} comes a number, e.g. "
                         f"{name}{op}0.5.") from None  # fmt: skip

    def test(r: dict[str, Any]) -> bool:
        v = r.get(name)
        if not isinstance(v, int | float) or isinstance(v, bool):
            return False
        return v > bound if op == ">" else v < bound

    return test


def state_counts(table: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in table:
        out[row["state"]] = out.get(row["state"], 0) + 1
    return out
