"""Will it finish? How far a training run is, read from what its log printed, and whether
it ends before the job's time limit — said with its basis, never guessed.

Progress comes from what training loops print: tqdm bars (also Lightning's and Hugging
Face Trainer's, whose `n/total [elapsed<remaining, rate]` carry the loop's own clock),
`step 300/5000`, `Epoch 3/10`, `iter 40 of 100`. A log without a total says nothing (an
ETA needs to know where the end is). Without the bar's own rate, the rate is what was
done since the job started (`elapsed`), and the answer says so."""

from __future__ import annotations

import re
from dataclasses import dataclass

from hpcui.common.formatting import hms

#: tqdm's `n/total [elapsed<remaining, 12.3it/s` (or `4.56s/it`); `?` while unknown
_TQDM = re.compile(
    r"(?P<n>\d+)/(?P<total>\d+)\s*\[(?P<elapsed>[\d:]+)<(?P<left>[\d:]+|\?),\s*"
    r"(?P<rate>[\d.]+|\?)\s*(?P<rate_unit>it/s|s/it)"
)
#: Lightning's Rich bar: `Epoch 2/9  ━━━━ 50/50 0:00:03 • 0:00:01 79.64it/s` (drawn once,
#: at the end, when its output is a file rather than a terminal)
_RICH = re.compile(
    r"(?P<n>\d+)/(?P<total>\d+)\s+(?P<elapsed>[\d:]+)\s+•\s+(?P<left>[\d:]+|-:--:--)\s+"
    r"(?P<rate>[\d.]+)it/s"
)
#: the epoch a Lightning bar is in: `Epoch 3:` (tqdm: of how many, unsaid) or `Epoch 3/9`
#: (Rich: the last epoch's index, so 10 in all)
_EPOCH = re.compile(r"\bEpoch (?P<e>\d+)(?:/(?P<last>\d+))?")
#: `step 300/5000`, `Step [3/10]`, `epoch 3 of 10`, `iter: 40/100`, `Epoch 3/10` ...
_COUNTED = re.compile(
    r"\b(?P<unit>step|steps|iter|iteration|iterations|epoch|batch|it)\b\s*[:=#]?\s*\[?\s*"
    r"(?P<n>\d+)\s*(?:/|of)\s*(?P<total>\d+)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Progress:
    """Where the run is: `done` of `total` (in `unit`s); the loop's own rate and time
    left where its bar printed them."""

    done: float
    total: float
    unit: str
    rate_per_s: float | None = None
    left_s: float | None = None
    source: str = ""  # "tqdm", "rich" or "counted"
    #: what `total` covers when less than the run: "epoch 3" (Lightning's tqdm bar, which
    #: never says how many epochs there are); "" for the whole run
    scope: str = ""


def _seconds(clock: str) -> float | None:
    parts = clock.split(":")
    if not all(p.isdigit() for p in parts) or len(parts) > 3:
        return None
    total = 0.0
    for p in parts:
        total = total * 60 + int(p)
    return total


def read_progress(text: str) -> Progress | None:
    """The newest progress the log shows (bars are redrawn with \\r: the last draw
    counts), or None when it shows none with a total."""
    found: Progress | None = None
    for line in re.split(r"[\r\n]", text):
        bar = _TQDM.search(line) or _RICH.search(line)
        if bar is not None:
            found = _bar(bar, line) or found
        elif (m := _COUNTED.search(line)) is not None:
            total = int(m["total"])
            if 0 < total and int(m["n"]) <= total:
                unit = m["unit"].lower().rstrip("s")
                unit = {"iteration": "iter", "it": "iter"}.get(unit, unit)
                found = Progress(int(m["n"]), total, unit, source="counted")
    return found


def _bar(m: re.Match[str], line: str) -> Progress | None:
    """A drawn progress bar: its count, rate and time left; within a Lightning epoch, the
    whole run where the bar says how many epochs (else that epoch alone, said so)."""
    n, total = int(m["n"]), int(m["total"])
    if total <= 0 or n > total:
        return None
    rate = None if m["rate"] == "?" else float(m["rate"])
    if rate is not None and m.groupdict().get("rate_unit") == "s/it":
        rate = 1 / rate if rate else None
    left = None if m["left"] in ("?", "-:--:--") else _seconds(m["left"])
    source = "tqdm" if m.re is _TQDM else "rich"
    epoch = _EPOCH.search(line[: m.start()])
    if epoch is None:
        return Progress(n, total, "it", rate, left, source)
    e = int(epoch["e"])
    if epoch["last"] is None:
        return Progress(n, total, "it", rate, left, source, scope=f"epoch {e}")
    epochs = int(epoch["last"]) + 1
    whole_left = None if rate is None else (epochs * total - (e * total + n)) / rate
    return Progress(e * total + n, epochs * total, "it", rate, whole_left, source)


@dataclass(frozen=True)
class Finish:
    """The answer: time still needed, time left of the limit, and on what it rests."""

    needed_s: float | None
    limit_left_s: float | None
    basis: str
    progress: Progress

    @property
    def will_finish(self) -> bool | None:
        if self.needed_s is None or self.limit_left_s is None or self.progress.scope:
            return None
        return self.needed_s <= self.limit_left_s

    def cell(self) -> str:
        """The queue table's few words: `no: needs 3:04:00, 1:10:00 left`."""
        if self.needed_s is None:
            return "no ETA yet"
        need = hms(int(self.needed_s), pad_hours=False)
        if self.will_finish is None:
            return f"needs {need}"
        if self.will_finish:
            return f"yes: {need} more"
        return f"NO: needs {need}, {hms(int(max(self.limit_left_s or 0, 0)), pad_hours=False)} left"

    def line(self, job_id: str = "JOB") -> str:
        p = self.progress
        where = f"{p.done:,.0f}/{p.total:,.0f} {p.unit}" + (f" of {p.scope}" if p.scope else "")
        if self.needed_s is None:
            return f"{where}: no ETA yet ({self.basis})"
        need = f"needs {hms(int(self.needed_s))} more ({self.basis})"
        if self.limit_left_s is None:
            return f"{where}: {need}; no time limit known"
        left = f"{hms(int(max(self.limit_left_s, 0)))} left of its limit"
        if self.progress.scope:  # only this epoch is known: no verdict on the run
            return f"{where}: {need}; {left} (the log does not say how many epochs follow)"
        if self.will_finish:
            return f"{where}: {need}; {left}: it should finish"
        return (
            f"{where}: {need}; {left}: it will NOT finish — raise the limit (`hpcui update "
            f"{job_id} --time`, where the site allows it), stop and resume from a checkpoint "
            f"(`hpcui stop {job_id}`), or chain jobs"
        )


def will_finish(
    progress: Progress | None, *, elapsed_s: float | None, limit_s: float | None
) -> Finish | None:
    """Whether the run ends before the limit: from the bar's own rate, else from what was
    done since the job started. None without progress (no guess)."""
    if progress is None:
        return None
    left = None if limit_s is None or elapsed_s is None else limit_s - elapsed_s
    remaining = max(progress.total - progress.done, 0)
    if progress.rate_per_s and not progress.scope and progress.source != "rich":
        # the rate, not the bar's whole-second "remaining": finer, the same measurement
        return Finish(
            remaining / progress.rate_per_s, left, "the progress bar's own rate", progress
        )
    if progress.left_s is not None:
        return Finish(progress.left_s, left, "the progress bar's own estimate", progress)
    if elapsed_s and progress.done > 0:
        rate = progress.done / elapsed_s
        basis = (
            f"{progress.done:,.0f} {progress.unit} in the {hms(int(elapsed_s))} since it started"
        )
        return Finish(remaining / rate, left, basis, progress)
    return Finish(None, left, "nothing done yet to time", progress)
