"""`logwatch plot`: one image of a run, for a glance and for a bug report.

Four stacked panels share the time axis: prompt and generation tok/s; running and waiting requests;
KV cache usage; prefix and MM cache hit rates. One colour per engine, launches marked with a dotted
line. A fifth panel below (its own axes, not time) shows generation tok/s against running requests,
one dot per busy stats line, with the median per running count: the concurrency table as a picture.
Never more points than pixels: past the figure's width, a line keeps its first / min / max / last
point per pixel column (`offline/plot/decimate.py`), so a big log draws as fast as a small one.

matplotlib is an optional extra (`pip install '.[plot]'` in a clone), imported only here and only
when a plot is drawn; the figure is built on the Agg canvas, without pyplot and its global state.

The drawing process (`Drawer`): importing matplotlib takes as long as reading a large log, and the
drawing cannot start before the log is read; so a process forked at the start (before any thread or
range worker exists) imports it meanwhile, then waits for `collect`'s data (a few thousand points,
whatever the log's size), draws it (`draw`) and sends the image back as bytes, which the caller writes.
If the caller stops first (an error while reading, Ctrl-C), it closes the pipe and the drawing process
exits; killed (-9), the drawing process sees it by its parent's pid (`offline/children.py`). It
ignores Ctrl-C itself: the caller's interrupt ends both.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import pickle
import signal
import sys
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from multiprocessing import get_context
from multiprocessing.connection import Connection
from types import TracebackType
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from ...errors import OutputError, UsageError
from ...parsing.events import EngineStats, SpecDecodeStats, TransferStats
from ...parsing.stamps import utc
from ..children import exit_with_parent
from ..reading.launches import Launch

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .decimate import Decimator, PlotData

_MARKERS_UP_TO = 60
"""Lines with at most this many points get a dot per point (a lone line is still visible)."""
_INSTANT_DAYS = 1 / 86400
"""A facet whose records span less than a second is one instant: nothing to draw over time."""
_WINDOW_DAYS = 10 / 1440
"""The window drawn around one instant: ten minutes."""
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
PANEL_TITLES = (*(title for title, _, _ in _PANELS), "Generation throughput by running requests")


def _engine_name(e: EngineStats) -> str:
    if e.engine is not None:
        return f"engine {e.engine}"
    if e.engines_aggregated:
        return f"{e.engines_aggregated} engines"
    return "V0 engine" if e.is_v0 else "engine (no index)"


def literal(text: str) -> str:
    """`text` of a log or a file name (a model, an engine, a file), to be drawn as it is: matplotlib reads
    what is between two `$` as a formula, and one that does not parse stops the drawing.

    >>> literal("a_$x^{$_serve.log")
    'a_\\\\$x^{\\\\$_serve.log'
    """
    return text.replace("$", "\\$")


def require_matplotlib() -> None:
    """UsageError unless matplotlib is installed (found, not imported: `logwatch plot` imports it while
    the file is read, `Drawer`)."""
    try:
        found = importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise UsageError(_MISSING_MATPLOTLIB)


IMAGE_KINDS = ("png", "svg", "pdf")
"""The kinds of image file `compare -o` and `audit -o` write."""


def check_image_output(output: str) -> None:
    """Raise `UsageError` for an output that is not an image file name, before any work; matplotlib
    must be there."""
    if output == "-":
        raise UsageError("-o -: standard output carries the tables; give an image file name")
    if os.path.splitext(output)[1][1:].lower() not in IMAGE_KINDS:
        raise UsageError(f"{output}: the image is .png, .svg or .pdf")
    require_matplotlib()


def write_figure(fig: Figure, output: str) -> None:
    """Render `fig` in memory in the kind its name says, then write it (matplotlib's own file writes
    lose errors such as a full disk: the command would succeed with a cut image). Raises `OutputError`."""
    image = io.BytesIO()
    fig.savefig(image, dpi=DPI, format=os.path.splitext(output)[1][1:].lower())
    try:
        with open(output, "wb") as fh:
            fh.write(image.getbuffer())
    except OSError as exc:
        raise OutputError(f"{output}: cannot write ({exc.strerror or exc})") from None


def collect(
    records: Iterable[tuple[Launch, EngineStats | SpecDecodeStats | TransferStats]],
) -> PlotData:
    """What the figure of `records` draws (in file order; lines without a time are left out), without
    matplotlib: numpy alone, so the drawing's imports can be made elsewhere meanwhile (`Drawer`).
    `records` are streamed, and no more than the figure's pixels kept (offline/plot/decimate.py)."""
    from .decimate import PlotData

    data = PlotData(int(FIGSIZE[0] * DPI), 0.0)  # times in days since 1970; `draw` shifts them
    for launch, e in records:
        if not isinstance(e, (SpecDecodeStats, TransferStats)) and e.time is not None:
            data.add(launch, e, None if e.engine is not None else _engine_name(e))
    data.finish()
    return data


def draw(data: PlotData) -> Figure:
    """The figure of `collect`'s data (UsageError without matplotlib).

    Axes 0-3 are the time panels of the first facet, axis 4 the scatter, then 4 more per further facet
    (`facets`: launches hours apart or of another model side by side). A line past the
    pixel budget is drawn as its median per pixel column with a band from its lowest to its highest
    value (`Decimator.band`); a facet whose records are all at one instant gets a ten-minute window
    and says there is nothing to draw over time.
    """
    try:
        import matplotlib.dates
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise UsageError(_MISSING_MATPLOTLIB) from None

    mdates: Any = matplotlib.dates  # untyped module: calls on Any keep mypy --strict quiet
    zone = data.zone
    groups = facets(data.launches, data.ends)
    fig = Figure(figsize=FIGSIZE)
    FigureCanvasAgg(fig)
    # Fixed margins, room for the legends on the right: a layout engine measures every tick label
    # at each draw (a fifth of a plot's time); the panels' sizes do not depend on the data.
    grid = fig.add_gridspec(5, max(len(groups), 1), height_ratios=(1.2, 1, 0.8, 0.8, 1.4), left=0.075,
                            right=0.80, top=0.955, bottom=0.04, hspace=0.38, wspace=0.06)
    top = fig.add_subplot(grid[0, 0])
    columns = [[top, *(fig.add_subplot(grid[i, 0], sharex=top) for i in (1, 2, 3))]]
    scatter_ax = fig.add_subplot(grid[4, :])
    for f in range(1, len(groups)):
        first = fig.add_subplot(grid[0, f], sharey=columns[0][0])
        columns.append([first, *(fig.add_subplot(grid[i, f], sharex=first, sharey=columns[0][i])
                                 for i in (1, 2, 3))])
    engines = list(dict.fromkeys(name for _, name in data.series))
    single = len(engines) == 1
    handles: list[dict[str, Any]] = [{} for _ in _PANELS]
    banded = False
    for f, axes in enumerate(columns):
        chosen = set(groups[f].launches) if groups else set()
        for row, (ax, (title, ylabel, panel)) in enumerate(zip(axes, _PANELS, strict=True)):
            for (launch, engine), s in data.series.items():
                if launch not in chosen:
                    continue
                for j, (column, name, style) in enumerate(panel):
                    label = name if single else f"{name}, {literal(engine)}"
                    color = f"C{(engines.index(engine) * len(panel) + j) % 10}"
                    banded |= _draw_line(ax, s.lines[column], label, color, style, handles[row],
                                         data.epoch)
            ax.grid(True, alpha=0.3)
            if f == 0:
                ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
                ax.set_ylabel(ylabel)
            else:
                ax.tick_params(labelleft=False)
            if row < 3:
                ax.tick_params(labelbottom=False)
        _frame(axes, groups[f] if groups else None, len(groups), zone, data)
    for row, ax in enumerate(columns[-1]):
        if handles[row]:
            ax.legend(list(handles[row].values()), list(handles[row]), loc="upper left",
                      bbox_to_anchor=(1.005, 1), fontsize="small", borderaxespad=0)
    for row, ax in enumerate(columns[0]):
        if not handles[row]:
            ax.text(0.5, 0.5, "not in these log lines", transform=ax.transAxes, ha="center", color="gray")
        ax.set_ylim(bottom=0)
    columns[0][2].set_ylim(0, 100)  # KV cache usage: 1% is nearly empty, not half full
    columns[0][3].set_ylim(0, 100)
    columns[0][1].yaxis.set_major_locator(MaxNLocator(integer=True))
    if banded:
        columns[0][0].set_title("Throughput (line: median per pixel column, band: min-max)",
                                loc="left", fontsize=11, fontweight="bold")
    locator_axes = [axes[3] for axes in columns]
    for ax in locator_axes:
        locator = mdates.AutoDateLocator(tz=zone, minticks=2 if len(columns) > 1 else 5,
                                         maxticks=8 if len(columns) == 1 else 4)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=zone))
    columns[0][3].set_xlabel(f"time ({literal(_zone_name(zone))})")
    _draw_scatter(scatter_ax, data)
    scatter_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(literal(_title([la for la, _ in data.launches.values()], engines)), fontsize=13)
    return fig


def _draw_line(ax: Axes, line: Decimator, label: str, color: str, style: str,
               handles: dict[str, Any], epoch: float) -> bool:
    """One launch's line of one column on `ax`: its points, or past the pixel budget its median per
    pixel column and a band from lowest to highest. True when a band was drawn."""
    import numpy as np

    from .decimate import epoch_days

    shift = epoch_days() - epoch
    band = line.band()
    if band is not None:
        x, median, low, high = band
        if not len(x):
            return False
        handle = ax.fill_between(x + shift, low, high, color=color, alpha=0.25, linewidth=0,
                                 label=f"{label}, min-max")
        handles.setdefault(f"{label}, min-max", handle)
        (drawn,) = ax.plot(x + shift, median, linestyle=style, color=color, linewidth=1.2,
                           label=f"{label}, median")
        handles.setdefault(f"{label}, median", drawn)
        return True
    xs, ys = line.points()
    if not np.isfinite(ys).any():
        return False
    (drawn,) = ax.plot(xs + shift, ys, linestyle=style, color=color, linewidth=1.2, label=label,
                       marker="o" if len(ys) <= _MARKERS_UP_TO else "", markersize=3)
    handles.setdefault(label, drawn)
    return False


def _frame(axes: list[Axes], facet: Facet | None, count: int, zone: tzinfo | None, data: PlotData) -> None:
    """A facet's time range (ten minutes around a lone instant, said so), its launches marked, and
    its model and dates above it when there are several facets."""
    import matplotlib.dates

    mdates: Any = matplotlib.dates
    if facet is None:
        return
    start, end = mdates.date2num(facet.start), mdates.date2num(facet.end)
    if end - start < _INSTANT_DAYS:
        middle = (start + end) / 2
        start, end = middle - _WINDOW_DAYS / 2, middle + _WINDOW_DAYS / 2
        when = facet.start.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S") if zone else str(facet.start)
        axes[0].text(0.5, 0.5, f"one stats instant ({when}): nothing to draw over time",
                     transform=axes[0].transAxes, ha="center", va="center", fontsize=9, color="dimgray",
                     wrap=True)
    else:
        pad = (end - start) * 0.01
        start, end = start - pad, end + pad
    axes[0].set_xlim(start, end)
    launches = sorted((data.launches[i] for i in facet.launches), key=lambda item: utc(item[1]))
    order = sorted(data.launches, key=lambda i: (utc(data.launches[i][1]), i))
    for launch, launch_start in launches:  # a dotted line each, numbered in the order of all facets
        x = float(mdates.date2num(launch_start))
        for ax in axes:
            ax.axvline(x, color="black", linestyle=":", linewidth=1, alpha=0.7)
        if len(launches) <= 12:
            axes[0].annotate(
                f"launch {order.index(launch.index) + 1}: {literal(launch.label)}", xy=(x, 1),
                xycoords=("data", "axes fraction"), xytext=(3, -3), textcoords="offset points", va="top",
                fontsize=7, annotation_clip=True,
                bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "alpha": 0.8, "linewidth": 0},
            )
    if count > 1:
        first = facet.start.astimezone(zone) if zone else facet.start
        last = facet.end.astimezone(zone) if zone else facet.end
        dates = f"{first:%Y-%m-%d}" if first.date() == last.date() else f"{first:%m-%d} to {last:%m-%d}"
        axes[0].set_title(f"{literal(facet.model) or 'model not logged'}, {dates}", loc="right", fontsize=8)


def _zone_name(zone: tzinfo | None) -> str:
    return (zone.tzname(None) if zone else None) or str(zone or "local")


def _draw_scatter(ax: Axes, data: PlotData) -> None:
    """Generation tok/s by running requests: one colour per engine, or per model when there are several
    (and a median line per model)."""
    import numpy as np

    medians = {model: m for model, m in data.medians.items() if m}
    by_model = len(data.medians) > 1
    groups: dict[str, list[tuple[Any, Any]]] = {}
    for (_, engine), s in data.series.items():
        running, generation = s.dots.points()
        if len(running):
            groups.setdefault(s.model or "model not logged" if by_model else engine, []).append(
                (running, generation))
    single = len(groups) == 1
    for i, (name, parts) in enumerate(groups.items()):
        ax.scatter(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), s=12,
                   alpha=0.5, color=f"C{i % 10}",
                   label="stats line" if single else f"stats line, {literal(name)}")
    for i, (model, values) in enumerate(medians.items()):
        xs = sorted(values)
        label = ("median per running count" if len(medians) == 1
                 else f"median, {literal(model) or 'model not logged'}")
        ax.plot(xs, [values[r] for r in xs], color="black" if len(medians) == 1 else f"C{i % 10}",
                marker="o", markersize=3, linewidth=1, label=label,
                linestyle="-" if len(medians) == 1 else "--")
    if medians:
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


def _title(launches: list[Launch], series: list[str]) -> str:
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


FACET_GAP = timedelta(hours=6)
"""A silence longer than this between launches starts a facet of its own."""
UNRELATED_GAP = timedelta(days=1)
"""A silence this long between launches (or two models) makes the inputs look unrelated: a warning."""
MAX_FACETS = 6
"""At most this many facets: past it, the closest neighbours share one."""


@dataclass
class Facet:
    launches: list[int]
    """Launch indexes, in time order."""
    start: datetime
    end: datetime
    model: str
    """The launches' model ("" unknown)."""


def facets(launches: dict[int, tuple[Launch, datetime]], ends: dict[int, datetime]) -> list[Facet]:
    """The facets of `launches` (index -> launch, first time drawn) whose last times are `ends`, their
    times in UTC: the time panels side by side, one per run of launches close in time and of one model,
    so files days apart (or of different models) are not slivers at the ends of one long axis."""
    launches, ends = _in_utc(launches, ends)
    out: list[Facet] = []
    for index, (launch, start) in sorted(launches.items(), key=lambda item: (item[1][1], item[0])):
        end = ends.get(index, start)
        model = launch.model_name or ""
        last = out[-1] if out else None
        if last is not None and start - last.end <= FACET_GAP and (model == last.model or not model
                                                                    or not last.model):
            last.launches.append(index)
            last.end = max(last.end, end)
            last.model = last.model or model
        else:
            out.append(Facet([index], start, end, model))
    while len(out) > MAX_FACETS:  # the two neighbours closest in time share one
        i = min(range(len(out) - 1), key=lambda k: out[k + 1].start - out[k].end)
        left, right = out[i], out.pop(i + 1)
        left.launches += right.launches
        left.end = max(left.end, right.end)
        left.model = left.model if left.model == right.model else ""
    return out


def unrelated(launches: dict[int, tuple[Launch, datetime]], ends: dict[int, datetime],
              drawn: list[Facet]) -> str | None:
    """One line saying why the inputs look unrelated (several models, or a day or more between
    launches), and how they are drawn; None when they look like one run."""
    launches, ends = _in_utc(launches, ends)
    models = sorted({la.model_name for la, _ in launches.values() if la.model_name})
    order = sorted(launches.items(), key=lambda item: (item[1][1], item[0]))
    widest = timedelta(0)
    last_end: datetime | None = None
    for index, (_, start) in order:
        if last_end is not None:
            widest = max(widest, start - last_end)
        end = ends.get(index, start)
        last_end = end if last_end is None else max(last_end, end)
    reasons = []
    if len(models) > 1:
        reasons.append(f"{len(models)} models ({', '.join(models)})")
    if widest >= UNRELATED_GAP:
        reasons.append(f"{widest / timedelta(days=1):.1f} days between launches")
    if not reasons:
        return None
    how = (f"drawn in {len(drawn)} facets side by side, one per run of launches" if len(drawn) > 1
           else "drawn on one time axis")
    return f"warning: these logs look unrelated: {', '.join(reasons)}; {how}"


def _in_utc(launches: dict[int, tuple[Launch, datetime]],
            ends: dict[int, datetime]) -> tuple[dict[int, tuple[Launch, datetime]], dict[int, datetime]]:
    """The times in UTC, to order and subtract: two times of one zone compare on their wall clocks,
    an hour off across a fall-back (`parsing/stamps.py`)."""
    return {i: (la, utc(t)) for i, (la, t) in launches.items()}, {i: utc(t) for i, t in ends.items()}


_JOIN_SECONDS = 5.0


class _Pickler(pickle.Pickler):
    """Time zones go by name: a zone read from a file (this machine's, /etc/localtime) cannot be
    pickled, and the drawing process reads the same file."""

    def persistent_id(self, obj: Any) -> Any:
        return ("zone", obj.key) if isinstance(obj, ZoneInfo) else None


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid: Any) -> Any:
        _, key = pid
        if key.startswith("/"):
            with open(key, "rb") as fh:
                return ZoneInfo.from_file(fh, key=key)
        return ZoneInfo(key)


def _serve(conn: Connection, parent_end: Connection, parent: int) -> None:
    """The drawing process: import, wait for the data, draw, answer; every outcome is one message."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # blocked across the fork (Drawer)
    parent_end.close()  # the pipe closes when the caller closes its end (the range workers hold a copy
    exit_with_parent(parent)  # of it, so a caller killed with -9 is seen by its pid)
    with contextlib.suppress(ImportError):  # `draw` says so, as a UsageError
        import matplotlib.figure  # noqa: F401 - the import this process is for
    try:
        data, kind, options = _Unpickler(io.BytesIO(conn.recv_bytes())).load()
    except (EOFError, OSError):
        return  # the caller stopped before its data: nothing to draw
    try:
        image = io.BytesIO()
        draw(data).savefig(image, format=kind, **options)
        answer: tuple[str, Any] = ("image", image.getvalue())
    except UsageError as exc:
        answer = ("usage", str(exc))
    except ValueError as exc:  # an unknown image format
        answer = ("format", str(exc))
    except Exception as exc:  # a defect: its traceback here, its name there
        traceback.print_exc()
        answer = ("error", f"{type(exc).__name__}: {exc}")
    with contextlib.suppress(OSError):  # the caller is gone
        conn.send(answer)


class Drawer:
    """`with Drawer() as drawer: ... drawer.image(data, "png", dpi=100)`: the drawing process."""

    def __init__(self) -> None:
        for stream in (sys.stdout, sys.stderr):  # nothing buffered that the fork could write twice
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
        ctx = get_context("fork")
        self._conn, child_end = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(child_end, self._conn, os.getpid()),
                                    name="logwatch-plot-draw", daemon=True)
        # A Ctrl-C between the fork and the drawing process's own SIG_IGN would kill it with a
        # KeyboardInterrupt: SIGINT is blocked across the fork (here it is delivered just after).
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            self._process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        child_end.close()

    @property
    def pid(self) -> int:
        """The drawing process's pid."""
        pid = self._process.pid
        assert pid is not None
        return pid

    def image(self, data: PlotData, kind: str | None, **options: Any) -> bytes:
        """The image of `data` in format `kind` (None: PNG); ValueError for an unknown format, UsageError
        without matplotlib, OutputError if the drawing process died (its exit code said)."""
        try:
            message = io.BytesIO()
            _Pickler(message, pickle.HIGHEST_PROTOCOL).dump((data, kind, options))
            self._conn.send_bytes(message.getbuffer())
            what, value = self._conn.recv()
        except (EOFError, OSError):
            self._process.join(_JOIN_SECONDS)
            raise OutputError(f"the drawing process ended without an image (exit code "
                              f"{self._process.exitcode})") from None
        if what == "image":
            return bytes(value)
        if what == "usage":
            raise UsageError(str(value))
        if what == "format":
            raise ValueError(str(value))
        raise RuntimeError(f"the drawing failed: {value}")

    def close(self) -> None:
        self._conn.close()  # a drawing process still waiting for data exits
        self._process.join(_JOIN_SECONDS)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()

    def __enter__(self) -> Drawer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
