"""Capacity: how many streams a launch serves at a target speed per stream, and what stops it there.

From the summary's per-interval columns (running, generation tok/s, waiting, KV usage), one *point*
per running count over the intervals with nothing waiting: their number, the median per-stream
generation tok/s (an interval's generation tok/s / running) and the median total. `answer(curve,
target)` is the largest running count whose median stream gets at least `target` tok/s, and the
limit that binds above it:

* `speed`: a higher running count was seen with nothing waiting, and its median stream is slower;
* `max-num-seqs`: the answer is `--max-num-seqs`, the most the scheduler runs at once;
* `KV cache`: above it requests waited while the KV cache was at least 90% full (the median over
  those intervals): the scheduler could not admit more;
* `load`: none of these: the load never asked for more (try a higher one).

Where the launch logged its KV cache size in tokens, the same curve per context row of the matrix
(`matrix.py`: KV usage x KV cache size / running, rounded to a power of two). Pure: columns in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .matrix import as_column, context_label, context_rows

KV_FULL_PCT = 90.0
"""KV usage (median of the intervals with requests waiting above the answer) from which the KV cache binds."""


@dataclass
class CapacityPoint:
    running: int
    intervals: int
    """Intervals at this running count with nothing waiting (the evidence)."""
    per_stream_median: float | None
    """Median over them of generation tok/s / running (None: none without waiting)."""
    total_median: float | None
    waiting_intervals: int = 0
    """Intervals at this running count with requests waiting."""
    waiting_kv_median_pct: float | None = None
    """Median KV usage of those."""


@dataclass
class CapacityCurve:
    context: str | None
    """None: every interval of the launch; else a context row of the matrix (`8K`, ...)."""
    points: list[CapacityPoint] = field(default_factory=list)


@dataclass
class CapacityAnswer:
    target_tps: float
    context: str | None
    concurrency: int | None
    """The largest running count whose median stream gets `target_tps` (None: not even one stream)."""
    limit: str
    """speed, max-num-seqs, KV cache or load (see the module's docstring)."""
    point: CapacityPoint | None
    """The evidence at the answer."""
    above: CapacityPoint | None
    """The evidence of the limit: the slower point above (speed), the waiting one (KV cache)."""


def _median(values: np.ndarray) -> float | None:
    return float(np.median(values)) if len(values) else None


def _points(index: np.ndarray, r: np.ndarray, gen: np.ndarray, w: np.ndarray,
            kv: np.ndarray) -> list[CapacityPoint]:
    """One point per running count of the intervals `index` (of the columns `r`, `gen`, `w`, `kv`)."""
    index = index[np.argsort(r[index], kind="stable")]  # by running count, in order within each
    counts, starts = np.unique(r[index], return_index=True)
    ends = [*starts[1:].tolist(), len(index)][:len(starts)]
    points = []
    for running, start, end in zip(counts.tolist(), starts.tolist(), ends, strict=True):
        rows = index[start:end]
        waits, kvs = w[rows], kv[rows]
        free = gen[rows][waits == 0]
        per_stream = _median(free / running)
        points.append(CapacityPoint(
            running=running, intervals=len(free),
            per_stream_median=None if per_stream is None else round(per_stream, 3),
            total_median=_median(free),
            waiting_intervals=int((waits > 0).sum()),
            waiting_kv_median_pct=_median(kvs[(waits > 0) & np.isfinite(kvs)]),
        ))
    return points


def capacity_curves(running: Sequence[int], generation: Sequence[float], waiting: Sequence[int],
                    kv_pct: Sequence[float], kv_cache_tokens: int | None = None,
                    engines: int = 1) -> list[CapacityCurve]:
    """The launch's curve, then one per context row when `kv_cache_tokens` is known (busy intervals:
    running > 0 and a finite generation tok/s; by context: those with a KV usage, `matrix.context_rows`).

    >>> c = capacity_curves([1, 1, 2, 2, 4], [90.0, 110.0, 150.0, 170.0, 200.0], [0, 0, 0, 1, 3],
    ...                     [5.0, 5.0, 9.0, 9.0, 97.0])[0]
    >>> [(p.running, p.intervals, p.per_stream_median, p.waiting_intervals) for p in c.points]
    [(1, 2, 100.0, 0), (2, 1, 75.0, 1), (4, 0, None, 1)]
    """
    r, w = as_column(running, np.int64), as_column(waiting, np.int64)
    gen, kv = as_column(generation, np.float64), as_column(kv_pct, np.float64)
    curves = [CapacityCurve(None, _points(np.flatnonzero((r > 0) & np.isfinite(gen)), r, gen, w, kv))]
    if kv_cache_tokens and kv_cache_tokens > 0 and engines > 0:
        index, _, powers = context_rows(running, kv_pct, generation, kv_cache_tokens, engines)
        for power in np.unique(powers).tolist():
            curves.append(CapacityCurve(context_label(power), _points(index[powers == power], r, gen, w, kv)))
    return curves


def answer(curve: CapacityCurve, target_tps: float, max_num_seqs: int | None = None) -> CapacityAnswer:
    """The largest running count of `curve` whose median stream gets at least `target_tps`, and why
    not more (see the module's docstring).

    >>> c = capacity_curves([1, 2, 4, 6, 6], [100.0, 180.0, 300.0, 330.0, 340.0], [0, 0, 0, 2, 3],
    ...                     [1.0, 2.0, 60.0, 95.0, 97.0])[0]
    >>> a = answer(c, 70.0); (a.concurrency, a.limit, a.above.running)
    (4, 'KV cache', 6)
    >>> a = answer(c, 80.0); (a.concurrency, a.limit, a.above.per_stream_median)
    (2, 'speed', 75.0)
    >>> answer(c, 70.0, max_num_seqs=4).limit, answer(c, 500.0).concurrency
    ('max-num-seqs', None)
    """
    seen = [p for p in curve.points if p.per_stream_median is not None]
    fast = [p for p in seen if p.per_stream_median >= target_tps]  # type: ignore[operator]
    best = max(fast, key=lambda p: p.running) if fast else None
    floor = best.running if best is not None else 0
    slower = [p for p in seen if p.running > floor]
    full = [p for p in curve.points if p.running >= max(floor, 1) and p.waiting_kv_median_pct is not None
            and p.waiting_kv_median_pct >= KV_FULL_PCT]
    if best is not None and max_num_seqs is not None and best.running >= max_num_seqs:
        limit, above = "max-num-seqs", None
    elif slower:
        limit, above = "speed", min(slower, key=lambda p: p.running)
    elif full:
        limit, above = "KV cache", min(full, key=lambda p: p.running)
    else:
        limit, above = "load", None
    return CapacityAnswer(target_tps=target_tps, context=curve.context,
                          concurrency=None if best is None else best.running, limit=limit, point=best,
                          above=above)
