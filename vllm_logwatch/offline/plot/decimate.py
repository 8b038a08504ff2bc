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
The columns are set at the series' `columns + 1`-th point, however the points were chunked, so the
fast lane (runs of lines) and the general path (a record at a time) keep the same points.

In column mode a point with no value (NaN) is left out (the line joins its neighbours), and a
launch's break stays a NaN point at its time (`add_gap`).

numpy comes with matplotlib (the `plot` extra); this module is imported only when a plot is drawn.
"""

from __future__ import annotations

import math
from array import array
from typing import Any

import numpy as np

__all__ = ["Decimator", "decimate"]

Floats = Any
"""A 1-d float64 numpy array (numpy's own types are not worth the noise under --strict here)."""


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
        if columns < 1:
            raise ValueError("columns must be at least 1")
        self.columns = columns
        self._x = array("d")
        self._y = array("d")
        self._gaps = array("d")
        self._width: float | None = None  # None: every point kept as it came
        self._origin = 0.0
        self._low = math.inf
        self._high = -math.inf

    @property
    def grid(self) -> tuple[float, float] | None:
        """`(origin, width)` of the columns; None while every point is kept."""
        return None if self._width is None else (self._origin, self._width)

    def add_gap(self, x: float) -> None:
        """A break in the line at `x` (a new launch)."""
        self._gaps.append(x)
        if self._width is None:
            self._x.append(x)
            self._y.append(math.nan)

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
        else:
            x = np.concatenate((np.frombuffer(self._x, dtype=np.float64), x))
            y = np.concatenate((np.frombuffer(self._y, dtype=np.float64), y))
        self._low = min(self._low, float(np.min(x)))
        self._high = max(self._high, float(np.max(x)))
        width = self._width
        while (math.floor((self._high - self._origin) / width)
               - math.floor((self._low - self._origin) / width)) >= self.columns:
            width *= 2.0
        self._width = width
        kept_x, kept_y = decimate(x, y, self._origin, width)
        self._x, self._y = array("d", kept_x.tolist()), array("d", kept_y.tolist())

    def points(self) -> tuple[Floats, Floats]:
        """The points to draw, in time order; a NaN point at each launch's break."""
        x = np.frombuffer(self._x, dtype=np.float64).copy()
        y = np.frombuffer(self._y, dtype=np.float64).copy()
        if self._width is None or not len(self._gaps):
            return x, y
        gaps = np.unique(np.frombuffer(self._gaps, dtype=np.float64))
        at = np.searchsorted(x, gaps, side="left")
        return np.insert(x, at, gaps), np.insert(y, at, math.nan)


class Dots:
    """The scatter's dots, one engine's: every dot while there are at most `limit`; past that, one dot
    (the first, at its own place) per cell of a `width` x `height` grid over the dots' range so far
    (a cell is under a pixel of the panel), so the dots drawn stay bounded and their cloud the same."""

    def __init__(self, limit: int, width: int, height: int) -> None:
        self.limit, self.width, self.height = limit, width, height
        self._x = np.empty(0, dtype=np.float64)
        self._y = np.empty(0, dtype=np.float64)
        self._reduced = False

    def extend(self, x: Floats, y: Floats) -> None:
        self._x = np.concatenate((self._x, np.asarray(x, dtype=np.float64)))
        self._y = np.concatenate((self._y, np.asarray(y, dtype=np.float64)))
        if len(self._x) <= self.limit:
            return
        self._reduced = True
        cell_x = max(float(np.max(self._x)), 1.0) / self.width
        cell_y = max(float(np.max(self._y)), 1e-9) / self.height
        cells = np.floor(self._x / cell_x) * (self.height + 2) + np.floor(self._y / cell_y)
        _, first = np.unique(cells, return_index=True)
        first.sort()
        self._x, self._y = self._x[first], self._y[first]

    def points(self) -> tuple[Floats, Floats]:
        return self._x, self._y
