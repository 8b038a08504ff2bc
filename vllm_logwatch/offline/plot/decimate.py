"""`logwatch plot`'s point budget: never more columns of points than the figure has pixels.

A line of a time panel is one series (one engine's column, such as its generation tok/s). While a
series has at most `columns` points (the figure's width in pixels) every point is kept as it came,
NaN included, so a small log's figure is what it always was. Past that, the series is cut into
columns of equal time width (at most `columns` of them over its span) and each column keeps its
first, lowest, highest and last point, in time order: a peak or a dip one stats line wide still
shows, and the line between columns runs as it did. The columns are aligned on the series' first
point and only ever double in width, so a column's kept points are always its first / min / max /
last over every point it has been given (`decimate` of the kept points and the new ones is
`decimate` of all of them): the memory is at most four points a column, whatever the file size.
The columns are set at the series' `columns + 1`-th point, however the points were chunked.

In column mode a point with no value (NaN) is left out (the line joins its neighbours), and the
figure draws each column's median as the line and its lowest-to-highest as a band (`Decimator.band`):
the median comes from a histogram per column whose bins are 1% apart (every value in a bin within
0.5% of the bin's value; 0 a bin of its own), so it is the exact median to within 0.5%. Columns only
ever merge in pairs when their width doubles and a histogram merges by adding counts, so it too does
not depend on how the points were chunked.

What `logwatch plot` keeps of the records it draws (`PlotData`): per launch and engine, its lines and
its scatter dots (`Series`, fed `_CHUNK` records at a time as numpy columns), the launches' first and
last times and the medians per model. numpy comes with matplotlib (the `plot` extra): this module is
imported only when a plot is drawn.
"""

from __future__ import annotations

import math
from array import array
from datetime import UTC, datetime, tzinfo
from typing import Any

import numpy as np

from ...parsing.events import EngineStats
from ...parsing.stamps import utc
from ..reading.launches import Launch

Floats = Any
"""A 1-d float64 numpy array (numpy's own types are not worth the noise under --strict here)."""
Band = tuple[Floats, Floats, Floats, Floats]
"""Per column with points: its middle (x), the median, the lowest and the highest value."""

_STEP = math.log1p(0.01)
"""A histogram bin's width, in log(value): bins 1% apart."""
_BINS = 1 << 22
"""Bin numbers per column in a histogram key (`column * _BINS + bin + _BINS // 2`)."""
_ZERO = -(_BINS // 2)
"""The bin of 0 (and of a negative value, which a stats line does not give)."""


def decimate(x: Floats, y: Floats, origin: float, width: float) -> tuple[Floats, Floats]:
    """The first, lowest, highest and last point (by x) of each column `[origin + k * width,
    origin + (k + 1) * width)` of the finite points of `(x, y)`, in x order, each point once.

    >>> xs, ys = decimate(np.array([0., 1., 2., 3., 4.]), np.array([5., 9., 1., 7., 6.]), 0.0, 10.0)
    >>> xs.tolist(), ys.tolist()
    ([0.0, 1.0, 2.0, 4.0], [5.0, 9.0, 1.0, 6.0])
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    keep = np.isfinite(y) & np.isfinite(x)
    if not keep.all():
        x, y = x[keep], y[keep]
    if not len(x):
        return x, y
    if not (x[1:] >= x[:-1]).all():  # a file's clock that goes back: time order first (stable)
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
    column = np.floor((x - origin) / width)
    starts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])  # x in order: columns in runs
    ends = np.r_[starts[1:], len(x)] - 1
    sizes = ends - starts + 1
    lows = _extreme(y, y == np.repeat(np.minimum.reduceat(y, starts), sizes), starts, first=True)
    highs = _extreme(y, y == np.repeat(np.maximum.reduceat(y, starts), sizes), starts, first=False)
    picked = np.unique(np.concatenate((starts, ends, lows, highs)))  # each point once, in time order
    return x[picked], y[picked]


def _extreme(y: Floats, hit: Floats, starts: Floats, *, first: bool) -> Floats:
    """Per column (runs from `starts`), the index of its first (else last) point where `hit`."""
    at = np.flatnonzero(hit)
    column = np.searchsorted(starts, at, side="right") - 1
    edge = np.r_[True, column[1:] != column[:-1]] if first else np.r_[column[1:] != column[:-1], True]
    return at[edge]


class Decimator:
    """One series, fed in time order (chunks of numpy arrays), kept within `columns` columns."""

    def __init__(self, columns: int) -> None:
        self.columns = columns
        self._x = array("d")
        self._y = array("d")
        self._width: float | None = None  # None: every point kept as it came
        self._origin = 0.0
        self._low = math.inf
        self._high = -math.inf
        self._keys: Floats = np.empty(0, dtype=np.int64)  # histogram: column and bin of the values,
        self._counts: Floats = np.empty(0, dtype=np.float64)  # and how many of them (column mode only)

    @property
    def grid(self) -> tuple[float, float] | None:
        """`(origin, width)` of the columns; None while every point is kept."""
        return None if self._width is None else (self._origin, self._width)

    def extend(self, x: Floats, y: Floats) -> None:
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if not len(x):
            return
        if self._width is None:
            room = self.columns + 1 - len(self._x)  # the switch at the same point whatever the chunks
            self._x.extend(x[:room].tolist())
            self._y.extend(y[:room].tolist())
            if len(self._x) <= self.columns:
                return
            kept_x = np.frombuffer(self._x, dtype=np.float64)
            kept_y = np.frombuffer(self._y, dtype=np.float64)
            self._origin = float(kept_x[0])
            self._low, self._high = float(np.nanmin(kept_x)), float(np.nanmax(kept_x))
            self._width = max(self._high - self._low, 1e-9) / self.columns
            x, y = np.concatenate((kept_x, x[room:])), np.concatenate((kept_y, y[room:]))
            self._x, self._y = array("d"), array("d")
            new_x, new_y = x, y
        else:
            new_x, new_y = x, y
            x = np.concatenate((np.frombuffer(self._x, dtype=np.float64), x))
            y = np.concatenate((np.frombuffer(self._y, dtype=np.float64), y))
        self._low = min(self._low, float(np.min(x)))
        self._high = max(self._high, float(np.max(x)))
        width = self._width
        doublings = 0
        while (math.floor((self._high - self._origin) / width)
               - math.floor((self._low - self._origin) / width)) >= self.columns:
            width *= 2.0
            doublings += 1
        self._width = width
        self._count(new_x, new_y, doublings)
        kept_x, kept_y = decimate(x, y, self._origin, width)
        self._x, self._y = array("d", kept_x.tolist()), array("d", kept_y.tolist())

    def _count(self, x: Floats, y: Floats, doublings: int) -> None:
        """The histogram's columns merged by `doublings`, then the values `(x, y)` counted in."""
        assert self._width is not None
        keys = self._keys
        if doublings and len(keys):
            column, bin_ = np.divmod(keys, _BINS)
            keys = (column >> doublings) * _BINS + bin_
        keep = np.isfinite(x) & np.isfinite(y)
        x, y = x[keep], y[keep]
        column = np.floor((x - self._origin) / self._width).astype(np.int64)
        positive = y > 0
        bins = np.full(len(y), _ZERO, dtype=np.int64)
        bins[positive] = np.rint(np.log(y[positive]) / _STEP).astype(np.int64)
        keys = np.concatenate((keys, column * _BINS + bins + _BINS // 2))
        counts = np.concatenate((self._counts, np.ones(len(y))))
        self._keys, inverse = np.unique(keys, return_inverse=True)
        self._counts = np.bincount(inverse.ravel(), weights=counts, minlength=len(self._keys))

    def band(self) -> Band | None:
        """In column mode, per column with points: its middle, median (within 0.5%), lowest and
        highest value, in time order; None while every point is kept as it came."""
        if self._width is None:
            return None
        if not len(self._keys):
            empty = np.empty(0, dtype=np.float64)
            return empty, empty, empty, empty
        origin, width = self._origin, self._width
        column, bin_ = np.divmod(self._keys, _BINS)
        bin_ = bin_ - _BINS // 2
        starts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
        sizes = np.diff(np.r_[starts, len(column)])
        counts = self._counts
        cum = np.cumsum(counts)
        before = np.repeat(cum[starts] - counts[starts], sizes)
        totals = np.repeat(np.add.reduceat(counts, starts), sizes)
        at = _extreme(bin_, (cum - before) * 2 >= totals, starts, first=True)
        median = np.where(bin_[at] == _ZERO, 0.0, np.exp(bin_[at] * _STEP))
        x = np.frombuffer(self._x, dtype=np.float64)
        y = np.frombuffer(self._y, dtype=np.float64)
        own = np.floor((x - origin) / width)
        firsts = np.flatnonzero(np.r_[True, own[1:] != own[:-1]])
        low, high = np.minimum.reduceat(y, firsts), np.maximum.reduceat(y, firsts)
        # the kept points are in x order and their columns those of the histogram (same values)
        return origin + (column[starts] + 0.5) * width, median, low, high

    def points(self) -> tuple[Floats, Floats]:
        """The points to draw, in time order."""
        x, y = np.frombuffer(self._x, dtype=np.float64), np.frombuffer(self._y, dtype=np.float64)
        return x.copy(), y.copy()


class Dots:
    """The scatter's dots, one engine's: every dot while there are at most `limit`; past that, one dot
    (the first, at its own place) per cell of a `width` x `height` grid over the dots' range so far
    (a cell is under a pixel of the panel), so the dots drawn stay bounded and their cloud the same."""

    def __init__(self, limit: int, width: int, height: int) -> None:
        self.limit, self.width, self.height = limit, width, height
        self._x = np.empty(0, dtype=np.float64)
        self._y = np.empty(0, dtype=np.float64)

    def extend(self, x: Floats, y: Floats) -> None:
        self._x = np.concatenate((self._x, np.asarray(x, dtype=np.float64)))
        self._y = np.concatenate((self._y, np.asarray(y, dtype=np.float64)))
        if len(self._x) <= self.limit:
            return
        cell_x = max(float(np.max(self._x)), 1.0) / self.width
        cell_y = max(float(np.max(self._y)), 1e-9) / self.height
        cells = np.floor(self._x / cell_x) * (self.height + 2) + np.floor(self._y / cell_y)
        _, first = np.unique(cells, return_index=True)
        first.sort()
        self._x, self._y = self._x[first], self._y[first]

    def points(self) -> tuple[Floats, Floats]:
        return self._x, self._y


COLUMNS = ("generation", "prompt", "running", "waiting", "kv", "prefix", "mm")
_CHUNK = 32768
_DAY = 86400.0


class Series:
    """One engine's lines, each kept within `columns` pixel columns, and its dots."""

    def __init__(self, columns: int, model: str) -> None:
        self.model = model
        """The launch's model ("" unknown): the scatter's medians are per model."""
        self.times: list[float] = []
        self.rows: list[tuple[float | None, ...]] = []
        self.lines = {c: Decimator(columns) for c in COLUMNS}
        self.dots = Dots(4 * columns, columns, columns // 2)

    def flush(self, data: PlotData) -> None:
        """The held rows, as numpy columns, to the decimators, the dots and the medians' values."""
        if not self.rows:
            return
        x = data.epoch + np.array(self.times, dtype=np.float64) / _DAY  # matplotlib's date unit: days
        m = np.array(self.rows, dtype=np.float64)  # None is NaN
        self.times.clear()
        self.rows.clear()
        m[~np.isfinite(m)] = math.nan
        for i, line in enumerate(self.lines.values()):
            line.extend(x, m[:, i])
        running, generation = m[:, 2], m[:, 0]
        busy = (running > 0) & np.isfinite(generation)
        running, generation = running[busy], generation[busy]
        self.dots.extend(running, generation)
        by_running = data.by_running.setdefault(self.model, {})
        for r in np.unique(running).tolist():
            by_running.setdefault(int(r), array("d")).extend(generation[running == r].tolist())


class PlotData:
    def __init__(self, columns: int, epoch: float) -> None:
        self.columns, self.epoch = columns, epoch
        self.series: dict[tuple[int, str], Series] = {}
        """(launch index, engine name) -> its lines: each launch has the figure's whole pixel budget, so
        launches days apart drawn side by side keep their detail."""
        self.launches: dict[int, tuple[Launch, datetime]] = {}
        """Launch index -> the launch and the time of its first record drawn."""
        self.ends: dict[int, datetime] = {}
        """Launch index -> the time of its last record drawn."""
        self.by_running: dict[str, dict[int, array[float]]] = {}
        self.medians: dict[str, dict[int, float]] = {}
        """Per model ("" unknown), median generation tok/s per running count of every busy line (`finish`)."""
        self.zone: tzinfo | None = None
        self._names: dict[int, str] = {}

    def _series(self, launch: Launch, name: str) -> Series:
        key = (launch.index, name)
        s = self.series.get(key)
        if s is None:
            s = self.series[key] = Series(self.columns, launch.model_name or "")
        return s

    def _seen(self, launch: Launch, t: datetime) -> None:
        if self.zone is None:
            self.zone = t.tzinfo
        if launch.index not in self.launches:
            self.launches[launch.index] = (launch, t)
        end = self.ends.get(launch.index)
        if end is None or utc(t) > utc(end):
            self.ends[launch.index] = t

    def add(self, launch: Launch, e: EngineStats, name: str | None) -> None:
        """One record with a time; `name` its engine's (None: `engine N`)."""
        t = e.time
        assert t is not None
        self._seen(launch, t)
        if name is None:
            index = e.engine
            name = self._names.get(index) or self._names.setdefault(index, f"engine {index}")  # type: ignore[arg-type]
        s = self._series(launch, name)
        s.times.append(t.timestamp())
        s.rows.append((e.generation_throughput, e.prompt_throughput, e.running, e.waiting,
                       e.kv_cache_usage_pct, e.prefix_cache_hit_rate_pct, e.mm_cache_hit_rate_pct))
        if len(s.rows) >= _CHUNK:
            s.flush(self)

    def finish(self) -> None:
        """Every held row fed; the medians computed and their values let go (the drawing needs the
        medians only)."""
        for s in self.series.values():
            s.flush(self)
        self.medians = {model: {r: float(np.median(np.frombuffer(values, dtype=np.float64)))
                                for r, values in sorted(by_running.items())}
                        for model, by_running in sorted(self.by_running.items())}
        self.by_running.clear()


def epoch_days() -> float:
    """1970-01-01 UTC in matplotlib's date unit."""
    import matplotlib.dates

    mdates: Any = matplotlib.dates
    return float(mdates.date2num(datetime(1970, 1, 1, tzinfo=UTC)))
