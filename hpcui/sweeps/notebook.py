"""A sweep in a Jupyter notebook: its results table (`sweep.results()`) in one cell output
that updates itself until no element is queued or running, as a job's panel does
(hpcui.live); the kernel is not blocked. Outside Jupyter it is the sweep's plain text."""

from __future__ import annotations

import html
from typing import Any, Protocol

from hpcui import live
from hpcui.errors import HpcuiError
from hpcui.sweeps import table


class Sweep(Protocol):
    """What the display reads of hpcui.sweeps.sweep.Sweep (which imports this module)."""

    @property
    def name(self) -> str: ...
    @property
    def cluster(self) -> Any: ...
    def elements(self, *, refresh: bool = True) -> list[Any]: ...
    def results(self, *, metrics: bool = True) -> list[dict[str, Any]]: ...


def show_sweep(sweep: Sweep) -> SweepView | None:
    """A sweep's results table, live in Jupyter (returns the view), else its plain text."""
    if not live.in_jupyter():
        print(repr(sweep))
        return None
    view = SweepView(sweep)
    live.shown(view)
    return view


#: rows a sweep's notebook table shows (the rest: `sweep.results()`, `hpcui sweep show`)
SWEEP_ROWS = 50


class SweepView(live.Updating):
    """A sweep's table (`sweep.results()`: configuration, state, result, last metrics) in
    one notebook output, updated until no element is queued or running."""

    def __init__(self, sweep: Sweep) -> None:
        super().__init__()
        self.sweep = sweep
        self.rows: list[dict[str, Any]] = []

    def _ended(self) -> bool:
        return all(e.state is None or e.state.is_final for e in self.sweep.elements())

    def _look(self) -> None:
        try:
            self.rows = self.sweep.results()
        except HpcuiError:
            pass  # a dropped link: the next look tries again

    def _bundle(self) -> dict[str, str]:
        counts = table.state_counts(self.rows)
        head = (
            f"sweep {self.sweep.name} on {self.sweep.cluster.name}: {len(self.rows)} elements"
            + (" · " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) if counts else "")
        )
        cols = [c for c in table.columns(self.rows) if c not in ("key", "job_id", "attempts")]
        shown = self.rows[:SWEEP_ROWS]
        more = len(self.rows) - len(shown)
        cells = [[table.cell_text(c, r.get(c), 24) for c in cols] for r in shown]
        widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
        lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
        tail = f"\n... {more} more: sweep.results()" if more > 0 else ""
        rows_html = "".join(
            "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in cells
        )
        heads = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
        return {
            "text/plain": head + "\n" + "\n".join(lines) + tail,
            "text/html": (
                f'<div class="hpcui-sweep"><b>{html.escape(head)}</b>'
                f'<table style="font-size:90%"><thead><tr>{heads}</tr></thead>'
                f"<tbody>{rows_html}</tbody></table>{html.escape(tail)}</div>"
            ),
        }
