"""PBS job status (PBS Pro / OpenPBS, Torque, Slurm's Torque wrappers) as PbsJob records.

``qstat -f -F json`` (PBS Pro), ``qstat -f`` text (Torque, PBS Pro, the wrapper) and the
``qstat`` / ``qstat -a`` tables all land in one model, so the status service needs one
code path whatever the site runs. Ids live in ``pbs_ids``, letters and exit statuses in
``pbs_dialect``, the model in ``pbs_job``; this module re-exports them: one import for PBS.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from hpcui.backends.pbs.dialect import PbsDialect, decode_exit_status, detect_pbs_dialect, pbs_state
from hpcui.backends.pbs.ids import PbsJobId, parse_pbs_id, parse_qsub_output, pbs_id_matches
from hpcui.backends.pbs.job import PbsJob, array_index, duration_s, job_from_attrs
from hpcui.backends.states import JobState

__all__ = [
    "PbsDialect",
    "PbsJob",
    "PbsJobId",
    "PbsParseError",
    "decode_exit_status",
    "detect_pbs_dialect",
    "parse_pbs_id",
    "parse_qstat_json",
    "parse_qstat_table",
    "parse_qsub_output",
    "parse_torque_qstat_f",
    "pbs_id_matches",
    "pbs_state",
]

log = logging.getLogger(__name__)


class PbsParseError(ValueError):
    """qstat printed something that is neither jobs nor "no jobs": never read as empty."""


def _refuse(text: str, expected: str) -> PbsParseError:
    lines = [line for line in text.splitlines() if line.strip()]
    return PbsParseError(
        f"qstat printed {len(lines)} line(s) hpcui cannot read as {expected} (first: "
        f"{lines[0].strip()[:120]!r}). A site's own qstat may print another layout: "
        "tell hpcui which PBS it is with `pbs_dialect` in the cluster's profile, or report "
        "the output."
    )


# --- JSON: qstat -f -F json (PBS Pro >= 18; pretty-printed one attribute per line) ------


def parse_qstat_json(text: str) -> list[PbsJob]:
    """All jobs in a ``qstat [-x] -f -F json`` output; no ``Jobs`` key (no jobs) -> [].

    PBS prints invalid JSON in known cases (openpbs #2049, #1255, #830, #2675: escapes
    such as ``\\'`` and ``\\,`` in Variable_List, all-digit values printed bare as ``005``,
    unescaped quotes, the ``-a`` table before the JSON with ``-u``), so a failed parse is
    retried with escapes repaired, then line by line, dropping only the unreadable lines.
    """
    if text.strip() and "{" not in text:
        raise _refuse(text, "qstat -F json")
    docs = [_load_json(doc) for doc in _documents(text)]
    if text.strip() and not any(
        isinstance(d.get("Jobs"), dict) or {"pbs_version", "pbs_server", "timestamp"} & set(d)
        for d in docs
    ):
        raise _refuse(text, "qstat -F json")
    return [job_from_attrs(job_id, attrs, "pbspro") for job_id, attrs in json_jobs(text).items()]


def json_jobs(text: str) -> dict[str, dict[str, Any]]:
    """Every job of one or more ``qstat -f -F json`` documents (one per qstat: OpenPBS
    prints only the first id's jobs when given several, see pbs_script._EACH)."""
    found: dict[str, dict[str, Any]] = {}
    for doc in _documents(text):
        jobs = _load_json(doc).get("Jobs")
        if isinstance(jobs, dict):
            found.update({k: v for k, v in jobs.items() if isinstance(v, dict)})
    return found


def _documents(text: str) -> list[str]:
    """The JSON documents in ``text``: PBS starts each with ``{`` alone on a line (nested
    objects are indented); anything before the first (the ``-a`` table) is dropped."""
    starts = [m.start() for m in re.finditer(r"^\{[ \t]*$", text, flags=re.M)]
    if not starts:
        return [text] if "{" in text else []
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)])]


_JSON_ESCAPES = frozenset('"\\/bfnrtu')
_JSON_ATTR = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:\s*(.*?),?\s*$')


def _load_json(text: str) -> dict[str, Any]:
    body = text[text.find("{") :] if "{" in text else "{}"
    try:
        return json.loads(body, strict=False)
    except json.JSONDecodeError as err:
        log.warning("qstat printed invalid JSON (%s); reading it leniently", err)
    body = re.sub(r"\\(.)", lambda m: m[0] if m[1] in _JSON_ESCAPES else m[1], body, flags=re.S)
    try:
        return json.loads(body, strict=False)
    except json.JSONDecodeError:
        return _salvage_json(body)


def _salvage_json(body: str) -> dict[str, Any]:
    """Read PBS's one-attribute-per-line layout, keeping every line that makes sense alone."""
    root: dict[str, Any] = {}
    stack = [root]
    for line in body.splitlines():
        text = line.strip()
        if text.rstrip(",") == "}":
            if len(stack) > 1:
                stack.pop()
            continue
        m = _JSON_ATTR.match(text)
        if m is None:
            continue
        key, raw = m[1], m[2]
        if raw == "{":
            child: dict[str, Any] = {}
            stack[-1][key] = child
            stack.append(child)
            continue
        try:
            stack[-1][key] = json.loads(raw, strict=False)
        except json.JSONDecodeError:
            if raw[:1] != '"':
                stack[-1][key] = raw  # e.g. an all-digit value printed bare: 005
            elif len(raw) > 1 and raw.endswith('"'):
                stack[-1][key] = raw[1:-1]  # e.g. unescaped quotes inside a comment
    return root


# --- text: qstat -f (Torque, PBS Pro, Slurm's wrapper) ----------------------------------

_TEXT_ATTR = re.compile(r"\s*([^\s=]+) =(?: (.*))?$")


def parse_torque_qstat_f(text: str, *, dialect: PbsDialect | None = None) -> list[PbsJob]:
    """All ``Job Id:`` blocks of a ``qstat -f [-x]`` text output.

    Attribute lines are ``    key = value``; Torque and PBS Pro wrap long values onto
    lines that start with a tab. Slurm's wrapper instead indents every attribute with a
    tab and writes ``Job Id:<TAB>`` (its print_job_full), which is how its blocks are
    told apart; a block with PBS Pro's capitalised ``Exit_status`` decodes as PBS Pro,
    any other as Torque (lowercase ``exit_status``, state ``C``) unless `dialect` says
    (PBS Pro's history is read as text: its running jobs have no Exit_status yet).
    """
    jobs = []
    blocks = re.split(r"^(?=Job Id:)", text, flags=re.M)
    if blocks[0].strip() and not any(b.startswith("Job Id:") for b in blocks[1:]):
        raise _refuse(text, "qstat -f job blocks (`Job Id: ...`)")
    for block in blocks[1:]:
        head, _, body = block.partition("\n")
        wrapper = head.startswith("Job Id:\t")
        flat: dict[str, str] = {}
        key = None
        for line in body.splitlines():
            if line.startswith("\t") and not wrapper and key:
                flat[key] += line[1:]
            elif m := _TEXT_ATTR.match(line):
                key = m[1]
                flat[key] = m[2] or ""
        attrs: dict[str, Any] = {}
        for k, v in flat.items():
            top, dot, sub = k.partition(".")
            if dot and top in ("Resource_List", "resources_used"):
                attrs.setdefault(top, {})[sub] = v
            else:
                attrs[k] = v
        kind: PbsDialect = dialect or (
            "slurm-torque-wrapper" if wrapper else "pbspro" if "Exit_status" in attrs else "torque"
        )
        jobs.append(job_from_attrs(head[len("Job Id:") :].strip(), attrs, kind))
    return jobs


# --- tables: qstat (6 columns) and qstat -a (11 columns) ---------------------------------

_PLAIN = ("job_id", "name", "owner", "time_use", "state", "queue")
_ALT = ("job_id", "owner", "queue", "name", "sessid", "nds", "tsk", "mem", "time", "state", "elap")


def parse_qstat_table(text: str, *, dialect: PbsDialect = "pbspro") -> list[PbsJob]:
    """Jobs in a plain ``qstat`` or ``qstat -a`` table (any of the three dialects).

    Cells are cut at the dash ruler under the header, because names may hold spaces and
    ids may be cut (``1234.pbs01*``: match them with ``pbs_id_matches``). Tables carry no
    exit status, so a finished row (F, X, C) is UNKNOWN: ask ``qstat -x -f`` for the end.
    """
    jobs, starts = [], None
    for line in text.splitlines():
        if "-" in line and not line.strip(" -"):
            starts = [m.start() for m in re.finditer(r"-+", line)]
        elif starts and line[:1].isdigit():
            cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
            names = {len(_PLAIN): _PLAIN, len(_ALT): _ALT}.get(len(cells))
            if names:
                jobs.append(_table_job(dict(zip(names, cells, strict=True)), dialect))
    return jobs


def _table_job(row: dict[str, str], dialect: PbsDialect) -> PbsJob:
    letter = row["state"]
    requested = {k: row.get(c) for k, c in (("nodect", "nds"), ("ncpus", "tsk"), ("mem", "mem"))}
    return PbsJob(
        job_id=row["job_id"],
        name=row["name"] or None,
        owner=row["owner"] or None,
        queue=row["queue"] or None,
        state=JobState.UNKNOWN if letter in ("F", "X", "C") else pbs_state(letter, dialect=dialect),
        state_raw=letter,
        resources_requested={k: v for k, v in requested.items() if v and v != "--"},
        walltime_limit_s=_hhmm_s(row.get("time")),
        walltime_used_s=_hhmm_s(row.get("elap")),
        array_index=array_index(row["job_id"]),
    )


def _hhmm_s(value: str | None) -> int | None:
    """``qstat -a`` time columns: ``HH:MM`` (PBS Pro, the wrapper) or ``HH:MM:SS`` (Torque)."""
    if not value or ":" not in value:
        return None  # "--", or the wrapper's truncated "unlimited"
    return duration_s(value + ":00" if value.count(":") == 1 else value)
