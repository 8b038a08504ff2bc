"""`logwatch compare -o cmp.png`: generation tok/s against running requests, one line per launch
(labelled by what differs), its median per concurrency row with a p10-p90 band; per-request tok/s
against running requests below it. The rows are the compare tables' own (offline/summary/build.py), so the
picture and the tables never disagree.

matplotlib (the `plot` extra) is imported only here, on the Agg canvas, without pyplot.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..plot.collect import require_matplotlib
from ..summary.build import ConcurrencyRow
from .differences import Comparison

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["COMPARE_FIGSIZE", "build_compare_figure", "row_x"]

COMPARE_FIGSIZE = (11.0, 8.5)


def row_x(row: ConcurrencyRow) -> float:
    """Where a concurrency row sits on the log2 running axis: its count, or its bucket's geometric middle
    (an open bucket `>128`: its lower end).

    >>> from vllm_logwatch.offline.summary.build import ConcurrencyRow
    >>> row_x(ConcurrencyRow("5-8", 5, 8, 1, 0, 0, 0, 0, 0, None, 0))
    6.324555320336759
    """
    if row.hi is None or row.hi == row.lo:
        return float(row.lo)
    return math.sqrt(row.lo * row.hi)


def build_compare_figure(cmp: Comparison) -> Figure:
    """The figure of the comparison (nothing is written)."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, NullLocator

    fig = Figure(figsize=COMPARE_FIGSIZE, layout="constrained")
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(1.6, 1))
    ticks: dict[float, str] = {}
    for i, c in enumerate(cmp.launches):
        rows = c.group.concurrency
        if not rows:
            continue
        color = f"C{i % 10}"
        xs = [row_x(r) for r in rows]
        ticks.update({x: r.running for x, r in zip(xs, rows, strict=True)})
        top.fill_between(xs, [r.generation_p10 for r in rows], [r.generation_p90 for r in rows],
                         color=color, alpha=0.15, linewidth=0)
        top.plot(xs, [r.generation_median for r in rows], color=color, marker="o", markersize=4,
                 linewidth=1.6, label=c.tag)
        bottom.plot(xs, [r.per_request_median for r in rows], color=color, marker="o", markersize=4,
                    linewidth=1.6, label=c.tag)
    top.set_title("Generation throughput by running requests (median, band p10-p90)", loc="left",
                  fontsize=11, fontweight="bold")
    top.set_ylabel("generation tokens/s (all requests)")
    bottom.set_title("Per-request generation throughput (median)", loc="left", fontsize=11,
                     fontweight="bold")
    bottom.set_ylabel("tokens/s per request")
    bottom.set_xlabel("requests running (log scale; buckets at their middle)")
    for ax in (top, bottom):
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    if ticks:
        bottom.xaxis.set_major_locator(FixedLocator(sorted(ticks)))
        bottom.xaxis.set_minor_locator(NullLocator())
        bottom.set_xticklabels([ticks[x] for x in sorted(ticks)])
        top.legend(loc="upper left", fontsize="small")
    else:
        top.text(0.5, 0.5, "nothing ran in these launches", transform=top.transAxes, ha="center",
                 color="gray")
    return fig
