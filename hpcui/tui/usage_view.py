"""The Job screen's usage panel as text: a bar and a history sparkline per GPU, the
tasks' CPU and memory, and the verdicts. Pure: samples in, Rich markup out."""

from __future__ import annotations

from collections.abc import Sequence

from hpcui.common.formatting import figure, usage_bar
from hpcui.jobs.usage import UsageSample, gpu_figures, summary, task_line, verdicts
from hpcui.tui.markup import escape  # every "[": Textual drops [UPPER] tags

SPARKS = "▁▂▃▄▅▆▇█"
BAR = 24
HISTORY = 40


def bar(pct: float | None, width: int = BAR) -> str:
    """formatting.usage_bar as Rich markup (the CLI's `top` draws the same bar)."""
    cells, colour = usage_bar(pct, width, "█", "·")
    used = cells.rstrip("·")
    return f"[{colour}]{used}[/][dim]{cells[len(used) :]}[/]"


def sparkline(values: Sequence[float | None]) -> str:
    """Utilisation over time, oldest first (`?` where the driver could not say)."""
    return "".join(
        "?" if v is None else SPARKS[min(int(max(v, 0) / 100 * len(SPARKS)), len(SPARKS) - 1)]
        for v in values
    )


def usage_text(samples: Sequence[UsageSample], running: bool) -> str:
    if not samples:
        return (
            "Sampling GPU and CPU use…"
            if running
            else "No usage was kept for this job: it is sampled while it runs and someone looks "
            "(this screen, `hpcui top`, `hpcui usage`)."
        )
    last = samples[-1]
    span = last.at - samples[0].at
    head = "now" if running else "last look while it ran"
    lines = [f"[b]{head}[/] · {len(samples)} look(s) over {span:.0f} s"]
    history: dict[tuple[str, int], list[float | None]] = {}
    for s in samples[-HISTORY:]:
        for g in s.gpus:
            history.setdefault((g.node, g.index), []).append(g.util_pct)
    for g in last.gpus:
        lines.append(
            f"{escape(g.node)} GPU{g.index} {bar(g.util_pct)} {figure(g.util_pct, '%'):>4}  "
            f"{escape(gpu_figures(g))}  {sparkline(history.get((g.node, g.index), []))}"
        )
    lines += [escape(task_line(t)) for t in last.tasks]
    lines += [f"[dim]note: {escape(n)}[/]" for n in last.notes]
    judged = verdicts(samples)
    lines += [f"[bold yellow]! {escape(v)}[/]" for v in judged]
    table = summary(samples)
    if table and not running:
        lines.append("")
        lines.append(f"[b]{'per GPU over the job':<22}[/] mean%  peak%  mean MiB  peak MiB")
        lines += [
            f"{escape(f'{s.node} GPU{s.index}'):<22} {figure(s.mean_util_pct):>5}  "
            f"{figure(s.peak_util_pct):>5}  {figure(s.mean_mem_mib):>8}  "
            f"{figure(s.peak_mem_mib):>8}"
            for s in table
        ]
    return "\n".join(lines)


def mean_gpu_pct(sample: UsageSample) -> float | None:
    """The Jobs table's GPU% cell: the mean over the job's GPUs at its last look."""
    utils = [g.util_pct for g in sample.gpus if g.util_pct is not None]
    return sum(utils) / len(utils) if utils else None
