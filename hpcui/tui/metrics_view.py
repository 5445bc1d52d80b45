"""Plots of training metrics with axes (textual-plotext): a job's metrics side by side on the
Job screen, and one metric across several jobs (the Jobs screen's selection, `M`)."""

from __future__ import annotations

from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static
from textual_plotext import PlotextPlot

from hpcui.metrics import Metrics, read_metrics, read_ranks
from hpcui.tui.markup import escape  # every "[": Textual drops [UPPER] tags

#: metrics drawn side by side; the label names the rest (at 80 columns four is already tight)
MAX_PANELS = 4


class MetricsPlot(PlotextPlot):
    """Several metrics of one job (one panel each, its own y axis), or one metric of
    several jobs on shared axes (one line per job)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.drawn: list[str] = []  # panel or line titles as drawn (tests read them)

    def show_job(self, metrics: Metrics, first: str = "") -> None:
        """Up to MAX_PANELS metrics of one job, `first` (a name) leading."""
        plt = self.plt
        plt.clear_figure()
        series = sorted(metrics.series, key=lambda s: (s.name != first, s.name != "loss"))
        shown = series[:MAX_PANELS]
        self.drawn = [s.name for s in shown]
        if shown:
            plt.subplots(1, len(shown))
            for i, s in enumerate(shown, start=1):
                sub = plt.subplot(1, i)
                sub.plot(s.x, s.y, marker="braille")
                sub.title(f"{s.name} {s.y[-1]:.4g}")
                sub.xlabel(metrics.x_name)
        self.refresh()

    def show_compare(
        self, name: str, found: list[Metrics], labels: dict[str, str] | None = None
    ) -> None:
        """Metric `name` of each job on one pair of axes, labelled by job (or by
        `labels[job]`: a sweep's configuration)."""
        plt = self.plt
        plt.clear_figure()
        self.drawn = []
        x_names = set()
        for m in found:
            s = m.get(name)
            if s is None or not s.y:
                continue
            label = (labels or {}).get(m.job, m.job)
            plt.plot(s.x, s.y, marker="braille", label=label)
            self.drawn.append(label)
            x_names.add(m.x_name)
        plt.title(name)
        plt.xlabel(x_names.pop() if len(x_names) == 1 else "step or epoch (they differ)")
        self.refresh()


def summary(metrics: Metrics, drawn: list[str]) -> str:
    """The line above a job's plot: each metric's last value; those not drawn said so."""
    if not metrics.series:
        return (
            "no metrics in the log yet: hpcui reads key=value, key: value, JSON lines and "
            "'loss 0.5'; m again: a regex for any other form"
        )
    parts = [f"{s.name} {s.y[-1]:.4g}" for s in metrics.series]
    rest = len(metrics.series) - len(drawn)
    more = f" · {rest} more not drawn (`hpcui metrics` has all)" if rest > 0 else ""
    return f"against {metrics.x_name} · " + " · ".join(parts) + more


class CompareMetrics(ModalScreen[None]):
    """One metric of the selected jobs on one plot, or of every rank of one job
    (`ranks=True`: rank 0 beside the others); [ and ] pick the metric. `first`: the metric
    shown first when the jobs have it; `labels`: `cluster:job id` -> its line's legend."""

    BINDINGS = [
        Binding("escape,q", "dismiss", "Close"),
        Binding("left_square_bracket", "step(-1)", "Metric-"),
        Binding("right_square_bracket", "step(1)", "Metric+"),
    ]

    def __init__(
        self,
        cluster_of: Any,
        jobs: list[tuple[str, str]],
        *,
        ranks: bool = False,
        first: str = "",
        labels: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.first = first
        self.labels = labels
        self.cluster_of = cluster_of  # name -> Cluster (the hub's)
        self.jobs = jobs
        self.ranks = ranks  # the ranks of jobs[0], one line each
        self.found: list[Metrics] = []
        self.names: list[str] = []
        self.index = 0

    def compose(self) -> ComposeResult:
        with Vertical(id="compare-box"):
            what = "every rank's log" if self.ranks else f"the logs of {len(self.jobs)} jobs"
            yield Static(f"reading {what}…", id="compare-label")
            yield MetricsPlot(id="compare-plot")

    def on_mount(self) -> None:
        self._read()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def _read(self) -> None:
        found: list[Metrics] = []
        problems: list[str] = []
        for cluster_name, job_id in self.jobs:
            cluster = self.cluster_of(cluster_name)
            if cluster is None:
                problems.append(f"{cluster_name}: not connected")
                continue
            try:
                if self.ranks:
                    found += read_ranks(cluster, job_id)
                else:
                    found.append(read_metrics(cluster, job_id))
            except Exception as exc:  # one unreadable log is said; the others are plotted
                problems.append(f"{cluster_name}:{job_id}: {exc}")
        self.app.call_from_thread(self._got, found, problems)

    def _got(self, found: list[Metrics], problems: list[str]) -> None:
        self.found = found
        counts: dict[str, int] = {}
        for m in found:
            for name in m.names:
                counts[name] = counts.get(name, 0) + 1
        # the metrics most jobs share first (loss ahead among equals), then by name
        self.names = sorted(counts, key=lambda n: (-counts[n], n != "loss", n))
        self.index = self.names.index(self.first) if self.first in self.names else 0
        self.problems = problems
        self._draw()

    def _draw(self) -> None:
        label = self.query_one("#compare-label", Static)
        plot = self.query_one("#compare-plot", MetricsPlot)
        if not self.names:
            label.update(
                "None of these jobs' logs has metrics yet."
                + _problems(getattr(self, "problems", []))
            )
            plot.show_compare("", [])
            return
        name = self.names[self.index % len(self.names)]
        plot.show_compare(name, self.found, self.labels)
        across = (
            f"{len(plot.drawn)} of {len(self.found)} ranks of {self.jobs[0][0]}:{self.jobs[0][1]}"
            if self.ranks
            else f"{len(plot.drawn)} of {len(self.jobs)} jobs"
        )
        label.update(
            f"{name} across {across} · [ ] another metric ({len(self.names)}) · Esc closes"
            + _problems(self.problems)
        )

    def action_step(self, step: int) -> None:
        if self.names:
            self.index = (self.index + step) % len(self.names)
            self._draw()


def _problems(problems: list[str]) -> str:
    return ("\n[yellow]" + escape("; ".join(problems)) + "[/]") if problems else ""
