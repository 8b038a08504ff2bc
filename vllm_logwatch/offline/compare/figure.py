"""`logwatch compare -o cmp.png`: generation tok/s against running requests, one line per launch
(labelled by what differs), its median per concurrency row with a p10-p90 band; per-request tok/s
against running requests below it; at the bottom the Pareto view: per-stream tok/s against total tok/s
per GPU, one curve per launch (nothing waiting; `summary/answers.pareto`). The rows are the compare
tables' own (offline/summary/build.py), so the picture and the tables never disagree.

matplotlib (the `plot` extra) is imported only here, on the Agg canvas, without pyplot.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..plot.collect import require_matplotlib
from ..summary.answers import pareto
from ..summary.build import ConcurrencyRow
from .answers import comparison_summary
from .differences import Comparison

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["COMPARE_FIGSIZE", "build_compare_figure", "row_x"]

COMPARE_FIGSIZE = (11.0, 12.0)


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


def build_compare_figure(cmp: Comparison, gpus: int | None = None) -> Figure:
    """The figure of the comparison (nothing is written); `gpus`: `--gpus` for the Pareto view."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, NullLocator

    fig = Figure(figsize=COMPARE_FIGSIZE, layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(3, 1, height_ratios=(1.6, 1, 1.2))
    top = fig.add_subplot(grid[0])
    bottom = fig.add_subplot(grid[1], sharex=top)
    top.tick_params(labelbottom=False)
    _pareto(fig.add_subplot(grid[2]), cmp, gpus)
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


def _pareto(ax: Any, cmp: Comparison, gpus: int | None) -> None:
    """Per-stream tok/s against total tok/s per GPU, one curve per launch, points by running count."""
    summary = comparison_summary(cmp)
    tags = {c.group.launch: c.tag for c in cmp.launches}
    for i, curve in enumerate(pareto(summary, gpus)):
        points = curve["points"]
        if not points:
            continue
        xs, ys = [p["total_tps_per_gpu"] for p in points], [p["per_stream_tps"] for p in points]
        ax.plot(xs, ys, color=f"C{i % 10}", marker="o", markersize=4, linewidth=1.2,
                label=f"{tags.get(curve['launch'], curve['launch'])} ({curve['gpus']} GPU)")
        for p, x, y in zip(points, xs, ys, strict=True):
            ax.annotate(str(p["running"]), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_title("Pareto: per-stream tok/s against total tok/s per GPU (median, nothing waiting; "
                 "labels: running)", loc="left", fontsize=11, fontweight="bold")
    ax.set_xlabel("generation tokens/s per GPU (all streams)")
    ax.set_ylabel("tokens/s per stream")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
