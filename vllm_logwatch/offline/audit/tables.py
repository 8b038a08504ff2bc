"""The audit as text, Markdown or JSON: one row per run, then each run's verdicts with their numbers.

The model names and file names in it are what result files and logs chose: text shows them `printable`
(no terminal escapes, one line), Markdown also with `&`, `<` and `>` as entities (text, not HTML).

`logwatch audit -o audit.png`: per run, the concurrency the benchmark asked for (an outlined bar)
beside what the server ran (the median of Running in the window, a filled bar with its p10-p90 range,
coloured by the run's first verdict), the launch's max-num-seqs as a dash: the tables' numbers.

Up to LABELLED_RUNS runs, each is labelled (what it asked, its client) and its verdicts are written
above it. Past that the figure stops growing (MAX_WIDTH_IN): the runs are drawn narrower, numbered as
in the table, without their verdicts written, and the title says so.

matplotlib (the `plot` extra) is imported only here, on the Agg canvas, without pyplot.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ...shown import json_safe, printable
from ...shown import shown_number as _f
from ..plot.collect import require_matplotlib
from ..summary.tables import table_lines
from ..summary.tbt import TBT_SHORT
from .measures import Measures, Verdict, Window, client_tbt
from .results import Run

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_HEAD = ("run", "asked", "model", "launch", "lines", "Running med", "p10", "p90", "waiting",
         "KV peak %", "preempt", "prefix hit %", "client tok/s", "server tok/s", "client TBT ms",
         "server TBT ms", "failed", "verdict")


@dataclass(frozen=True)
class Audited:
    """One run's audit."""

    window: Window
    measures: Measures
    verdicts: list[Verdict]
    joined: tuple[int, int] | None = None
    """(the run's requests whose X-Request-ID the log's request lines hold, its requests with one)."""


def _i(value: int | None) -> str:
    return "-" if value is None else str(value)


def _row(n: int, a: Audited) -> list[str]:
    run, m = a.window.run, a.measures
    launch = a.window.launch.label if a.window.launch else "-"
    return [str(n), run.label, run.model or "-", launch, str(m.lines), _f(m.running_median),
            _f(m.running_p10), _f(m.running_p90),
            "-" if m.waiting_share is None else f"{m.waiting_share:.0%}", _f(m.kv_peak_pct),
            _i(m.preemptions), _f(m.prefix_hit_pct), _f(run.output_tok_s), _f(m.server_gen_tok_s),
            _client_tbt(run), _server_tbt(m), _i(run.failed), ", ".join(v.kind for v in a.verdicts)]


def _client_tbt(run: Run) -> str:
    found = client_tbt(run)
    return "-" if found is None else f"{_f(found[1], 2)} {found[0]}"


def _server_tbt(m: Measures) -> str:
    """The log's time between tokens and what it rests on (`tbt.TBT_SHORT`: steps, Running)."""
    if m.server_tbt_ms is None:
        return "-"
    return _f(m.server_tbt_ms, 2) + (f" {TBT_SHORT[m.server_tbt_from]}" if m.server_tbt_from else "")


def _markdown_text(text: str) -> str:
    return html.escape(printable(text), quote=False)


def _text(audits: list[Audited], markdown: bool) -> str:
    shown: Callable[[str], str] = _markdown_text if markdown else printable
    rows = [[shown(cell) for cell in _row(n, a)] for n, a in enumerate(audits, 1)]
    out = table_lines(_HEAD, rows, markdown)
    out.append("")
    for n, a in enumerate(audits, 1):
        run = a.window.run
        where = f"run {n} ({run.client}, {run.source}, {run.start:%Y-%m-%d %H:%M:%S} to {run.end:%H:%M:%S})"
        out.append(f"- {shown(where)}" if markdown else shown(where))
        for v in a.verdicts:
            out.append(f"  - {v.kind}: {shown(v.why)}" if markdown else f"  {v.kind}: {shown(v.why)}")
        if a.joined is not None:
            joined, total = a.joined
            line = (f"requests joined to the log's Received request lines by X-Request-ID: {joined:,} of "
                    f"{total:,} ({joined / total:.0%})")
            out.append(f"  - {line}" if markdown else f"  {line}")
    return "\n".join(out) + "\n"


def _json(audits: list[Audited]) -> str:
    items: list[dict[str, Any]] = []
    for a in audits:
        run = a.window.run
        items.append({
            "source": run.source, "client": run.client, "model": run.model,
            "start": run.start.isoformat(), "end": run.end.isoformat(),
            "concurrency": run.concurrency, "rate": run.rate, "client_output_tok_s": run.output_tok_s,
            "completed": run.completed, "failed": run.failed,
            "client_itl_ms": run.itl_ms, "client_tpot_ms": run.tpot_ms,
            "launch": a.window.launch.label if a.window.launch else None,
            "other_models": a.window.other_models,
            "server": asdict(a.measures),
            "verdicts": [asdict(v) for v in a.verdicts],
            "requests_joined": None if a.joined is None else {"joined": a.joined[0], "requests": a.joined[1]},
        })
    return json.dumps(json_safe({"runs": items}), indent=1) + "\n"


def render_audit(audits: list[Audited], fmt: str) -> str:
    """`fmt`: text, markdown or json."""
    return _json(audits) if fmt == "json" else _text(audits, fmt == "markdown")


LABELLED_RUNS = 16
"""Runs drawn each with its labels and verdicts; past them the figure keeps its width."""
_RUN_IN = 1.6
"""Inches per labelled run; 2.5 more for the axis and the legend."""
MAX_WIDTH_IN = _RUN_IN * LABELLED_RUNS + 2.5

_COLORS = {"ok": "C2", "client-bound": "C0", "idle": "0.5", "absent": "0.5", "another model": "0.5"}
"""A run's bar colour by its first verdict; every other verdict (a server limit) is red."""
_LEGEND = {"C2": "ok", "C0": "client-bound", "0.5": "idle, absent or another model", "C3": "a server limit"}


def build_audit_figure(audits: list[Audited]) -> Figure:
    """The figure of the audit (nothing is written)."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    labelled = len(audits) <= LABELLED_RUNS
    width = min(MAX_WIDTH_IN, max(6.0, _RUN_IN * len(audits) + 2.5))
    fig = Figure(figsize=(width, 5.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    runs = [a.window.run for a in audits]
    measures = [a.measures for a in audits]
    colors = [_COLORS.get(a.verdicts[0].kind, "C3") for a in audits]
    xs = range(1, len(audits) + 1)

    asked = [(x, r.concurrency) for x, r in zip(xs, runs, strict=True) if r.concurrency is not None]
    ax.bar([x - 0.2 for x, _ in asked], [c for _, c in asked], width=0.38, fill=False, edgecolor="black",
           linewidth=1.2 if labelled else 0.5, label="asked")
    ran = [(x, m, c) for x, m, c in zip(xs, measures, colors, strict=True) if m.running_median is not None]
    medians = [m.running_median or 0.0 for _, m, _ in ran]
    ax.bar([x + 0.2 for x, _, _ in ran], medians, width=0.38, color=[c for _, _, c in ran],
           yerr=[[med - (m.running_p10 or 0.0) for med, (_, m, _) in zip(medians, ran, strict=True)],
                 [(m.running_p90 or 0.0) - med for med, (_, m, _) in zip(medians, ran, strict=True)]],
           capsize=4 if labelled else 0, error_kw={"elinewidth": 1.5 if labelled else 0.5})
    capped = [(x, m.max_num_seqs) for x, m in zip(xs, measures, strict=True) if m.max_num_seqs is not None]
    ax.hlines([n for _, n in capped], [x - 0.45 for x, _ in capped], [x + 0.45 for x, _ in capped],
              colors="C1", linestyles="dashed", label="max-num-seqs")
    top = max([1.0, *(c for _, c in asked), *(m.running_p90 or 0.0 for _, m, _ in ran),
               *(float(n) for _, n in capped)])
    ax.set_ylim(0, top * 1.5)
    title = "Asked concurrency and what the server ran\n(Running in the run's window"
    if labelled:
        for x, a, color in zip(xs, audits, colors, strict=True):
            ax.text(x, 0.97, "\n".join(v.kind for v in a.verdicts), transform=ax.get_xaxis_transform(),
                    ha="center", va="top", fontsize=8, color=color, fontweight="bold")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([f"{x}: {r.label}\n{r.client}" for x, r in zip(xs, runs, strict=True)], fontsize=8)
        title += ")"
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(0.5, len(audits) + 0.5)
        ax.set_xlabel("run (as numbered in the table)")
        title += f"; {len(audits)} runs: too many to label, the colour is each run's first verdict)"
    ax.set_ylabel("concurrent requests")
    ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
    ax.grid(True, axis="y", alpha=0.3)
    handles, _labels = ax.get_legend_handles_labels()
    handles += [Patch(color=c, label=f"running (median, p10-p90): {_LEGEND[c]}")
                for c in _LEGEND if c in colors]
    ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
    return fig
