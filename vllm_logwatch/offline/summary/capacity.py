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

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from .matrix import context_label

__all__ = ["KV_FULL_PCT", "CapacityAnswer", "CapacityCurve", "CapacityPoint", "answer", "capacity_curves"]

KV_FULL_PCT = 90.0
"""KV usage (median of the intervals with requests waiting above the answer) from which the KV cache binds."""
_LOWEST = 7  # the matrix's lowest context row: 128 tokens


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


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _points(rows: list[tuple[int, float, int, float]]) -> list[CapacityPoint]:
    by_running: dict[int, list[tuple[float, int, float]]] = {}
    for r, gen, w, kv in rows:
        by_running.setdefault(r, []).append((gen, w, kv))
    points = []
    for r in sorted(by_running):
        free = [gen for gen, w, _ in by_running[r] if w == 0]
        waited = [kv for _, w, kv in by_running[r] if w > 0 and math.isfinite(kv)]
        per_stream = _median([gen / r for gen in free])
        points.append(CapacityPoint(
            running=r, intervals=len(free),
            per_stream_median=None if per_stream is None else round(per_stream, 3),
            total_median=_median(free),
            waiting_intervals=sum(1 for _, w, _ in by_running[r] if w > 0),
            waiting_kv_median_pct=_median(waited),
        ))
    return points


def capacity_curves(running: Sequence[int], generation: Sequence[float], waiting: Sequence[int],
                    kv_pct: Sequence[float], kv_cache_tokens: int | None = None,
                    engines: int = 1) -> list[CapacityCurve]:
    """The launch's curve, then one per context row when `kv_cache_tokens` is known (busy intervals:
    running > 0 and a finite generation tok/s).

    >>> c = capacity_curves([1, 1, 2, 2, 4], [90.0, 110.0, 150.0, 170.0, 200.0], [0, 0, 0, 1, 3],
    ...                     [5.0, 5.0, 9.0, 9.0, 97.0])[0]
    >>> [(p.running, p.intervals, p.per_stream_median, p.waiting_intervals) for p in c.points]
    [(1, 2, 100.0, 0), (2, 1, 75.0, 1), (4, 0, None, 1)]
    """
    rows = [(r, gen, w, kv) for r, gen, w, kv in zip(running, generation, waiting, kv_pct, strict=True)
            if r > 0 and math.isfinite(gen)]
    curves = [CapacityCurve(None, _points(rows))]
    if kv_cache_tokens and kv_cache_tokens > 0 and engines > 0:
        by_context: dict[int, list[tuple[int, float, int, float]]] = {}
        for row in rows:
            r, _, _, kv = row
            if math.isfinite(kv):
                tokens = kv / 100.0 * kv_cache_tokens * engines / r
                power = max(_LOWEST, round(math.log2(tokens))) if tokens > 0 else _LOWEST
                by_context.setdefault(power, []).append(row)
        curves += [CapacityCurve(context_label(p), _points(by_context[p])) for p in sorted(by_context)]
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
