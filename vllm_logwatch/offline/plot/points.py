"""What `logwatch plot` keeps of the records it draws: per launch and engine, its lines within the
figure's pixel columns (`offline/plot/decimate.py`) and its scatter dots, plus the launches (first and last
time) and the medians' values per model.

Streamed: records are buffered per engine (`_CHUNK` at a time) and handed on as numpy columns.
numpy comes with matplotlib (the `plot` extra); this module is imported only when a plot is drawn.
"""

from __future__ import annotations

import math
from array import array
from datetime import datetime, timezone, tzinfo
from typing import Any

import numpy as np

from ...parsing.events import EngineStats
from ...parsing.stamps import utc
from ..reading.launches import Launch
from .decimate import Decimator, Dots

COLUMNS = ("generation", "prompt", "running", "waiting", "kv", "prefix", "mm")
_CHUNK = 32768
_DAY = 86400.0


class Series:
    """One engine's lines, each kept within `columns` pixel columns, and its dots."""

    def __init__(self, columns: int, model: str) -> None:
        self.model = model
        """The launch's model ("" unknown): the scatter's medians are per model."""
        self.launch: int | None = None
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
            s.launch = launch.index
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
        self.medians = {model: {r: _median(values) for r, values in sorted(by_running.items())}
                        for model, by_running in sorted(self.by_running.items())}
        self.by_running.clear()


def _median(values: array[float]) -> float:
    """`statistics.median(values)` of a non-empty array, by numpy over its own memory (the sorted list of
    months of intervals took four times theirs)."""
    return float(np.median(np.frombuffer(values, dtype=np.float64)))


def epoch_days() -> float:
    """1970-01-01 UTC in matplotlib's date unit."""
    import matplotlib.dates

    mdates: Any = matplotlib.dates
    return float(mdates.date2num(datetime(1970, 1, 1, tzinfo=timezone.utc)))
