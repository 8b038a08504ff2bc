"""`logwatch plot`: one image of a run, for a glance and for a bug report.

Four stacked panels share the time axis: prompt and generation tok/s; running and waiting requests;
KV cache usage; prefix and MM cache hit rates. One colour per engine, launches marked with a dotted
line. A fifth panel below (its own axes, not time) shows generation tok/s against running requests,
one dot per busy stats line, with the median per running count: the concurrency table as a picture.
Never more points than pixels: past the figure's width, a line keeps its first / min / max / last
point per pixel column (`offline/plot/decimate.py`), so a big log draws as fast as a small one.

matplotlib is an optional extra (`pip install '.[plot]'` in a clone), imported only here and only
when a plot is drawn; the figure is built on the Agg canvas, without pyplot and its global state.
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Iterable
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any

from ...errors import UsageError
from ...parsing.events import EngineStats, SpecDecodeStats, TransferStats
from ..reading.launches import Launch
from ..reading.records import FastBlock

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .points import PlotData

__all__ = ["PANEL_TITLES", "build_figure", "collect", "draw", "parse_when", "require_matplotlib"]

PANEL_TITLES = (
    "Throughput",
    "Requests",
    "KV cache usage",
    "Cache hit rates",
    "Generation throughput by running requests",
)
_NAN = math.nan
_MARKERS_UP_TO = 60
"""Lines with at most this many points get a dot per point (a lone line is still visible)."""
_MISSING_MATPLOTLIB = "plot needs matplotlib: pip install matplotlib (or, in a clone: pip install '.[plot]')"


FIGSIZE = (12.0, 14.0)
DPI = 100
"""The image's size (inches) and resolution: `FIGSIZE[0] * DPI` pixel columns bound every line."""


_PANELS: tuple[tuple[str, str, tuple[tuple[str, str, str], ...]], ...] = (
    # (title, y label, ((column, legend name, line style), ...))
    ("Throughput", "tokens/s", (("generation", "generation", "-"), ("prompt", "prompt", "--"))),
    ("Requests", "requests", (("running", "running", "-"), ("waiting", "waiting", "--"))),
    ("KV cache usage", "% of KV cache", (("kv", "KV cache usage", "-"),)),
    ("Cache hit rates", "hit rate, %", (("prefix", "prefix cache", "-"), ("mm", "MM cache", "--"))),
)


def _engine_name(e: EngineStats) -> str:
    if e.engine is not None:
        return f"engine {e.engine}"
    if e.engines_aggregated:
        return f"{e.engines_aggregated} engines"
    return "V0 engine" if e.is_v0 else "engine (no index)"


def require_matplotlib() -> None:
    """UsageError unless matplotlib is installed (found, not imported: its import takes a quarter of a
    second, which `logwatch plot` spends while the file is read, `offline/plot/drawer.py`)."""
    try:
        found = importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise UsageError(_MISSING_MATPLOTLIB)


def build_figure(
    records: Iterable[tuple[Launch, EngineStats | SpecDecodeStats | TransferStats | FastBlock]],
) -> Figure:
    """The figure of `records` (in file order; lines without a time are left out): `draw(collect(...))`.

    Pure apart from matplotlib: nothing is written. Axes 0-3 are the time panels, axis 4 the scatter.
    `records` are streamed (EngineStats, or the fast lane's FastStats or FastBlock), and the figure
    keeps no more than its pixels (offline/plot/decimate.py): a line with at most `FIGSIZE[0] * DPI` points
    holds one point per stats line of its engine (NaN where the line lacks the value, and one NaN row
    between launches); a longer one the first, lowest, highest and last point of each pixel column.
    The scatter keeps every dot while few, then one per pixel cell; its medians are exact.
    """
    require_matplotlib()
    return draw(collect(records))


def collect(
    records: Iterable[tuple[Launch, EngineStats | SpecDecodeStats | TransferStats | FastBlock]],
) -> PlotData:
    """What the figure of `records` draws (`build_figure`), without matplotlib: numpy alone, so the
    drawing's imports can be made elsewhere meanwhile (`offline/plot/drawer.py`)."""
    from .points import PlotData

    data = PlotData(int(FIGSIZE[0] * DPI), 0.0)  # times in days since 1970; `draw` shifts them
    for launch, e in records:
        if isinstance(e, FastBlock):
            data.add_block(launch, e)
        elif not isinstance(e, (SpecDecodeStats, TransferStats)) and e.time is not None:
            data.add(launch, e, None if e.engine is not None else _engine_name(e))
    data.finish()
    return data


def draw(data: PlotData) -> Figure:
    """The figure of `collect`'s data (UsageError without matplotlib)."""
    try:
        import matplotlib.dates
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise UsageError(_MISSING_MATPLOTLIB) from None
    import numpy as np

    from .points import epoch_days

    mdates: Any = matplotlib.dates  # untyped module: calls on Any keep mypy --strict quiet
    epoch = epoch_days()  # matplotlib's date unit is days since its `date.epoch` (1970 unless set)
    series, launches, medians, zone = data.series, data.launches, data.medians, data.zone

    fig = Figure(figsize=FIGSIZE)
    FigureCanvasAgg(fig)
    # Fixed margins, room for the legends on the right: a layout engine measures every tick label
    # at each draw (a fifth of a plot's time); the panels' sizes do not depend on the data.
    grid = fig.add_gridspec(5, 1, height_ratios=(1.2, 1, 0.8, 0.8, 1.4), left=0.075, right=0.80,
                            top=0.955, bottom=0.04, hspace=0.38)
    top = fig.add_subplot(grid[0])
    axes = [top, *(fig.add_subplot(grid[i], sharex=top) for i in (1, 2, 3))]
    single = len(series) == 1
    colors = {engine: f"C{i % 10}" for i, engine in enumerate(series)}
    for ax, (title, ylabel, columns) in zip(axes, _PANELS, strict=True):
        drawn = 0
        for engine, s in series.items():
            color = colors[engine]
            for column, name, style in columns:
                xs, ys = s.lines[column].points()
                xs = xs + epoch if epoch else xs
                if not np.isfinite(ys).any():
                    continue
                label = name if single else f"{name}, {engine}"
                ax.plot(xs, ys, linestyle=style, color=color, linewidth=1.2, label=label,
                        marker="o" if len(ys) <= _MARKERS_UP_TO else "", markersize=3)
                drawn += 1
        ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        if drawn:
            ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1), fontsize="small", borderaxespad=0)
        else:
            ax.text(0.5, 0.5, "not in these log lines", transform=ax.transAxes, ha="center", color="gray")
    axes[3].set_ylim(0, 100)
    axes[1].yaxis.set_major_locator(MaxNLocator(integer=True))
    _mark_launches(axes, sorted(launches.values(), key=lambda item: item[1]))
    locator = mdates.AutoDateLocator(tz=zone)
    axes[3].xaxis.set_major_locator(locator)
    axes[3].xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=zone))
    for ax in axes[:3]:
        ax.tick_params(labelbottom=False)
    axes[3].set_xlabel(f"time ({_zone_name(zone)})")
    scatter_ax = fig.add_subplot(grid[4])
    _draw_scatter(scatter_ax, {engine: s.dots.points() for engine, s in series.items()
                               if len(s.dots.points()[0])}, medians, colors)
    scatter_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(_title([la for la, _ in launches.values()], series), fontsize=13)
    return fig


def _zone_name(zone: tzinfo | None) -> str:
    return (zone.tzname(None) if zone else None) or str(zone or "local")


def _mark_launches(axes: list[Axes], launches: list[tuple[Launch, datetime]]) -> None:
    import matplotlib.dates

    mdates: Any = matplotlib.dates

    for n, (launch, start) in enumerate(launches):
        x = float(mdates.date2num(start))
        for ax in axes:
            ax.axvline(x, color="black", linestyle=":", linewidth=1, alpha=0.7)
        if len(launches) <= 12:
            axes[0].annotate(
                f"launch {n + 1}: {launch.label}", xy=(x, 1), xycoords=("data", "axes fraction"),
                xytext=(3, -3), textcoords="offset points", va="top", fontsize=7,
                bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "alpha": 0.8, "linewidth": 0},
                clip_on=True,
            )


def _draw_scatter(ax: Axes, scatter: dict[str, tuple[Any, Any]], medians: dict[int, float],
                  colors: dict[str, str]) -> None:
    single = len(scatter) == 1
    for engine, (running, generation) in scatter.items():
        ax.scatter(running, generation, s=12, alpha=0.5, color=colors[engine],
                   label="stats line" if single else f"stats line, {engine}")
    if medians:
        xs = sorted(medians)
        ax.plot(xs, [medians[r] for r in xs], color="black", marker="o",
                markersize=3, linewidth=1, label="median per running count")
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1), fontsize="small", borderaxespad=0)
    else:
        ax.text(0.5, 0.5, "no line with requests running", transform=ax.transAxes, ha="center", color="gray")
    ax.set_title(PANEL_TITLES[4] + " (one dot per stats line of an engine; idle lines left out)",
                 loc="left", fontsize=11, fontweight="bold")
    ax.set_xlabel("requests running")
    ax.set_ylabel("generation tokens/s")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)


def _title(launches: list[Launch], series: dict[str, Any]) -> str:
    files = sorted({os.path.basename(la.file) for la in launches})
    what = files[0] if len(files) == 1 else f"{len(files)} files"
    models = sorted({la.model_name for la in launches if la.model_name})
    parts = [f"vLLM run: {what}"]
    if models:
        parts.append(", ".join(models) if len(models) <= 2 else f"{len(models)} models")
    parts.append(f"{len(launches)} launch{'es' if len(launches) != 1 else ''}, {len(series)} "
                 f"engine{'s' if len(series) != 1 else ''}")
    return " | ".join(parts)


def parse_when(text: str, zone: tzinfo) -> datetime:
    """`--since` / `--until`: an ISO 8601 date or date and time; without an offset, in `zone`.

    >>> from datetime import timezone
    >>> parse_when("2026-11-29 19:24", timezone.utc).isoformat()
    '2026-11-29T19:24:00+00:00'
    """
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"bad time {text!r}: use e.g. 2026-11-29 or '2026-11-29 19:24:00'") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=zone)
