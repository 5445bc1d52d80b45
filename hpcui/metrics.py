"""Training metrics read from a job's log: what a training loop prints, as series to plot.

Training loops print their numbers in a few forms, and hpcui reads them all without being
told: ``step=120 loss=0.53 lr=1e-4``, ``epoch: 3, loss: 0.25, acc: 91.2%``, ``Epoch 3/10``,
``step 3 loss 0.25`` (a bare number after a metric's usual name: loss, acc, lr, ppl, ...)
and a JSON object per line (``{"step": 120, "train/loss": 0.53}``). Each line with numbers
is one record; the x axis is the first of step/iteration/epoch the log has (carried
forward to later lines, so an ``Epoch 3`` line labels the lines under it), else the
record's number. A user regex adds one series for any other form (the app's regex box,
``hpcui metrics --pattern``). Lines of the runtime itself (submitit's INFO) are not read.

One reader for the Job screen (fed as lines arrive), the comparison of several jobs and
``hpcui metrics``; nothing here talks to a cluster except `read_metrics` and
`read_metrics_file`. A file a logger writes (Lightning's CSVLogger `metrics.csv`, any CSV
with a header, or JSON lines) is read the same way (``hpcui metrics --file PATH``).
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import Field

from hpcui.backends.job_paths import Stream
from hpcui.backends.model import Model
from hpcui.errors import UsageError
from hpcui.logs.follow import is_runtime_line

if TYPE_CHECKING:
    from hpcui.clusters.cluster import Cluster
    from hpcui.jobs.handle import JobHandle

#: x axes in order of preference; they label the other series and are not series themselves
X_KEYS = ("step", "global_step", "iteration", "iter", "epoch")
#: the x axis of a log with none of X_KEYS: the record's number (1, 2, ...)
INDEX = "index"
#: numbers that are identities or sizes, not metrics (``rank: 0``, ``world_size=8``)
NOT_METRICS = frozenset(
    {"rank", "local_rank", "global_rank", "world_size", "local_world_size", "node", "nodes",
     "pid", "port", "master_port", "seed", "gpu", "gpus", "task", "ntasks", "device",
     "version", "id", "job", "jobid", "job_id", "array_task_id", "exit", "exit_code",
     "v_num"}
)  # fmt: skip
#: the most points kept per series (the oldest go first: a plot, not an archive)
MAX_POINTS = 20_000

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"
# key=value / key: value / 'key': value (a Python dict, as Hugging Face's Trainer prints;
# since transformers 5 its values are quoted too: {'loss': '7.475'}; DeepSpeed's step line
# gives `lr=[0.01]`, one number in brackets); the number must end
# there (no 10:00:00, 2026-11-26, v1.2.3)
_PAIR = re.compile(
    rf"(?<![\w./-])['\"]?([A-Za-z_][\w./-]*)['\"]?\s*[:=]\s*(['\"\[])?({_NUMBER})(%?)(?(2)['\"\]])(?![\w.:/-])",
    re.IGNORECASE,
)
# ``loss 0.53`` without a sign, only for the words that are metrics in any log
_WORD = re.compile(
    rf"(?<![\w./-])(\w*loss|acc|accuracy|lr|ppl|perplexity|grad_norm|top1|top5)\s+({_NUMBER})(%?)(?![\w.:/-])",
    re.IGNORECASE,
)
# Epoch 3, Epoch [3/10], step 120/1000: an x key followed by its number without a sign
_X_WORD = re.compile(
    r"(?<![\w./-])(step|global_step|iteration|iter|epoch)\s+\[?(\d+)(?:\s*/\s*\d+)?\]?(?![\w.])",
    re.IGNORECASE,
)


class MetricSeries(Model):
    """One metric: its values against the log's x axis, in the order they were printed."""

    name: str
    x: list[float] = Field(default_factory=list)
    y: list[float] = Field(default_factory=list)

    @property
    def last(self) -> float | None:
        return self.y[-1] if self.y else None


class Metrics(Model):
    """The metrics of one job's log (`hpcui metrics --json` prints this)."""

    job: str = Field("", description="cluster:id")
    x_name: str = Field(INDEX, description="the x axis: step, epoch, ... or index")
    series: list[MetricSeries] = Field(default_factory=list)

    def get(self, name: str) -> MetricSeries | None:
        return next((s for s in self.series if s.name == name), None)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.series]


def parse_line(line: str) -> dict[str, float]:
    """The numbers one log line gives, by lower-case name (x keys included)."""
    text = line.strip()
    if not text:
        return {}
    if text.startswith("{") and text.endswith("}"):
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            return _flatten(obj)
    found: dict[str, float] = {}
    for m in _X_WORD.finditer(text):
        found.setdefault(m.group(1).lower(), float(m.group(2)))
    for m in _WORD.finditer(text):
        found[m.group(1).lower()] = float(m.group(2))
    for m in _PAIR.finditer(text):
        name = m.group(1).lower().rstrip("./-")
        if not name or name in NOT_METRICS or name.endswith("_id"):
            continue
        found[name] = float(m.group(3))
    return found


def _flatten(obj: dict[str, object], prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}".lower()
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            if name not in NOT_METRICS and not name.endswith("_id"):
                out[name] = float(value)
        elif isinstance(value, dict) and not prefix:  # one level: {"train": {"loss": ...}}
            out.update(_flatten(value, f"{name}/"))
    return out


def _regex(pattern: str) -> tuple[re.Pattern[str], str]:
    """A user pattern and the name of its series: a named group's name, else ``regex``."""
    regex = re.compile(pattern, re.IGNORECASE)
    if regex.groups < 1:
        regex = re.compile(f"({pattern})", re.IGNORECASE)
    names = list(regex.groupindex)
    return regex, (names[0].lower() if names else "regex")


class MetricReader:
    """Reads lines as they come (the app feeds each chunk) and gives the series so far."""

    def __init__(self, pattern: str = "") -> None:
        self._records: list[dict[str, float]] = []
        self._regex: re.Pattern[str] | None = None
        self._regex_name = ""
        if pattern:
            self._regex, self._regex_name = _regex(pattern)  # re.error for a bad one
        self._partial = ""

    @property
    def pattern(self) -> str:
        return self._regex.pattern if self._regex is not None else ""

    def feed_text(self, text: str) -> bool:
        """Text as it arrives (a line may be split across chunks); True when it added values."""
        text = self._partial + text
        lines = text.split("\n")
        self._partial = lines.pop()
        return self.feed(lines)

    def flush(self) -> bool:
        rest, self._partial = self._partial, ""
        return self.feed([rest]) if rest else False

    def feed(self, lines: Iterable[str]) -> bool:
        """Whole lines; True when they added values."""
        added = False
        for line in lines:
            if is_runtime_line(line):
                continue
            record = parse_line(line)
            if self._regex is not None:
                m = self._regex.search(line)
                if m is not None:
                    try:
                        record[self._regex_name] = float(m.group(1))
                    except (ValueError, IndexError, TypeError):
                        pass
            added = self._keep(record) or added
        return added

    def _keep(self, record: dict[str, float]) -> bool:
        """One record with values kept (the oldest go past MAX_POINTS); False if empty."""
        if not record:
            return False
        self._records.append(record)
        if len(self._records) > MAX_POINTS:
            del self._records[:-MAX_POINTS]
        return True

    def feed_csv(self, text: str) -> bool:
        """A CSV with a header row (Lightning's CSVLogger: `epoch,step,train_loss,...`, a
        cell empty where that row logged nothing); True when it added values."""
        rows = csv.reader(text.splitlines())
        header = [h.strip() for h in next(rows, [])]
        added = False
        for row in rows:
            record = {}
            for name, cell in zip(header, row):
                if not cell.strip() or name.lower() in NOT_METRICS:
                    continue
                try:
                    record[name] = float(cell)
                except ValueError:  # a text column (a run name): not a series
                    continue
            added = self._keep(record) or added
        return added

    def metrics(self, job: str = "") -> Metrics:
        """The series so far, against the first x key the log has (or the record number)."""
        present = {k for r in self._records for k in r}
        x_name = next((k for k in X_KEYS if k in present), INDEX)
        series: dict[str, MetricSeries] = {}
        x: float | None = None
        for number, record in enumerate(self._records, start=1):
            x = float(number) if x_name == INDEX else record.get(x_name, x)
            if x is None:  # lines before the first step/epoch have no place on its axis
                continue
            for name, value in record.items():
                if name in X_KEYS or not math.isfinite(value):
                    continue
                s = series.get(name) or series.setdefault(name, MetricSeries(name=name))
                s.x.append(x)
                s.y.append(value)
        return Metrics(job=job, x_name=x_name, series=list(series.values()))


def read_metrics(
    cluster: Cluster,
    job: JobHandle | str,
    *,
    stream: Stream = "stdout",
    rank: int = 0,
    pattern: str = "",
) -> Metrics:
    """A job's metrics from its log as it is now (one read; the local spool is reused)."""
    reader = MetricReader(pattern)
    handle = cluster.job(job) if isinstance(job, str) else job
    for chunk in cluster.logs(handle, stream, rank):
        reader.feed_text(chunk.text)
    reader.flush()
    return reader.metrics(f"{cluster.name}:{handle.job_id}")


#: the most of a metrics file read (its header and last lines beyond that)
FILE_LINES = 50_000


def read_metrics_file(cluster: Cluster, job: JobHandle | str, path: str) -> Metrics:
    """A job's metrics from a file its logger writes on the cluster: `path` absolute, or
    relative to the home there (where jobs start, so Lightning's default
    `lightning_logs/version_N/metrics.csv` is relative to it). `.csv`: a header row and
    rows; anything else is read as a log (JSON lines, key=value)."""
    handle = cluster.job(job) if isinstance(job, str) else job
    rel = path[2:] if path.startswith("~/") else path  # the home is where the command runs
    script = 'test -f "$1" || { echo "no such file" >&2; exit 3; }; head -n 1 -- "$1"; tail -n +2 -- "$1" | tail -n "$2"'
    res = cluster.run(["sh", "-c", script, "sh", rel, str(FILE_LINES)])
    if res.exit_status != 0:
        raise UsageError(
            f"{cluster.name}: cannot read {path} for job {handle.job_id} "
            f"({(res.stderr.strip() or 'exit ' + str(res.exit_status))}). A relative path is "
            "from your home there, where jobs start; Lightning's CSVLogger writes "
            "<default_root_dir>/lightning_logs/version_N/metrics.csv (give the Trainer a "
            "default_root_dir or the logger a save_dir on a shared file system)."
        )
    reader = MetricReader()
    if path.lower().endswith(".csv"):
        reader.feed_csv(res.stdout)
    else:
        reader.feed(res.stdout.splitlines())
    return reader.metrics(f"{cluster.name}:{handle.job_id}")


def read_ranks(
    cluster: Cluster, job: JobHandle | str, *, stream: Stream = "stdout", pattern: str = ""
) -> list[Metrics]:
    """Each rank's metrics of a multi-task job (DDP), labelled `cluster:id rank N`: rank 0
    beside the others, where a straggler or a diverging rank shows."""
    handle = cluster.job(job) if isinstance(job, str) else job
    found = []
    for rank in range(max(1, handle.num_tasks)):
        m = read_metrics(cluster, handle, stream=stream, rank=rank, pattern=pattern)
        found.append(m.model_copy(update={"job": f"{m.job} rank {rank}"}))
    return found
