"""`logwatch audit -o audit.png`: per run, the concurrency the benchmark asked for (an outlined bar)
beside what the server ran (the median of Running in the window, a filled bar with its p10-p90 range),
the launch's max-num-seqs as a dash, and the verdicts written above. The numbers are the tables' own.

matplotlib (the `plot` extra) is imported only here, on the Agg canvas, without pyplot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plot.collect import require_matplotlib
from .tables import Audited

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["build_audit_figure"]

_COLORS = {"ok": "C2", "client-bound": "C0", "idle": "0.5", "absent": "0.5", "another model": "0.5"}
"""A run's bar colour by its first verdict; every other verdict (a server limit) is red."""


def build_audit_figure(audits: list[Audited]) -> Figure:
    """The figure of the audit (nothing is written)."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(6.0, 1.6 * len(audits) + 2.5), 5.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    xs = list(range(len(audits)))
    top = 1.0
    for x, a in zip(xs, audits, strict=True):
        run, m = a.window.run, a.measures
        if run.concurrency is not None:
            ax.bar(x - 0.2, run.concurrency, width=0.38, fill=False, edgecolor="black", linewidth=1.2,
                   label="asked" if x == 0 else None)
            top = max(top, run.concurrency)
        color = _COLORS.get(a.verdicts[0].kind, "C3")
        if m.running_median is not None:
            low = m.running_median - (m.running_p10 or 0.0)
            high = (m.running_p90 or 0.0) - m.running_median
            ax.bar(x + 0.2, m.running_median, width=0.38, color=color, yerr=[[low], [high]], capsize=4,
                   label="running (median, p10-p90)" if x == 0 else None)
            top = max(top, m.running_p90 or 0.0)
        if m.max_num_seqs is not None:
            ax.hlines(m.max_num_seqs, x - 0.45, x + 0.45, colors="C1", linestyles="dashed",
                      label="max-num-seqs" if x == 0 else "_")
            top = max(top, float(m.max_num_seqs))
        ax.text(x, 0.97, "\n".join(v.kind for v in a.verdicts), transform=ax.get_xaxis_transform(),
                ha="center", va="top", fontsize=8, color=color, fontweight="bold")
    ax.set_ylim(0, top * 1.5)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{n}: {a.window.run.label}\n{a.window.run.client}" for n, a in enumerate(audits, 1)],
                       fontsize=8)
    ax.set_ylabel("concurrent requests")
    ax.set_title("Asked concurrency and what the server ran (Running in the run's window)", loc="left",
                 fontsize=11, fontweight="bold")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
    return fig
