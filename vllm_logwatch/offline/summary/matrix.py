"""The context x concurrency matrix of a launch: generation tok/s by the tokens each running request
holds (estimated) and by how many run, as benchmark tools print it (8K ... 256K by 1 ... 128).

A stats line says how full the KV cache is, not how long the requests are; with the KV cache size in
tokens from the start-up line, each busy interval gives an estimate of the tokens held per running
request: KV cache usage x KV cache size in tokens / running. Rows are that estimate rounded to the
nearest power of two (a row "8K" holds 5.7K-11.6K tokens); columns are running requests in the
summary's power-of-two buckets; a cell is the median generation tok/s of its intervals and their
number, one stream's speed there and the time between tokens (its inverse: `tbt.little` over the cell's
intervals, the concurrency table's definition). Pure: columns of numbers in, a `Matrix` out.

Capacity (`capacity_curves`, `answer`): how many streams a launch serves at a target speed per stream,
and what stops it there (speed, max-num-seqs, KV cache or load: docs/offline.md, "Answers"), from
one point per running count over the intervals with nothing waiting; where the launch logged its KV
cache size in tokens, the same curve per context row of the matrix. Pure: columns in.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .tbt import TbtFrom, little

MATRIX_CAVEAT = (
    "Context is an estimate: KV cache usage x KV cache size in tokens / running requests, per interval. "
    "Prefix sharing counts shared blocks once (requests sharing a prefix look shorter), blocks are "
    "allocated whole (up to a block more per request), usage is printed to 0.1% and waiting requests "
    "hold none. Rows: the estimate rounded to the nearest power of two."
)
_LOWEST = 7
"""The lowest row is 128 tokens (everything below it too)."""


def context_label(power: int) -> str:
    """A row's name: `2**power` tokens as benchmark tools write it.

    >>> context_label(9), context_label(13), context_label(20)
    ('512', '8K', '1M')
    """
    n = 1 << power
    if n >= 1 << 20:
        return f"{n >> 20}M"
    return f"{n >> 10}K" if n >= 1024 else str(n)


@dataclass
class MatrixCell:
    context: str
    context_tokens: int
    """The row's power of two, in tokens."""
    running: str
    running_lo: int
    running_hi: int | None
    intervals: int
    gen_tps_median: float
    tokens_per_request_median: float
    """Median of the intervals' own estimates (what the row rounds)."""
    per_request_tps: float | None = None
    """One stream's speed over the cell's intervals (`tbt.little`)."""
    tbt_ms: float | None = None
    """1000 / per_request_tps: the time between a stream's tokens (`tbt.little`)."""
    tbt_from: TbtFrom | None = None
    """What the two figures above rest on: the iteration lines' cadence or the stats lines' Running."""
    decode_steps: int = 0
    """Decode-only steps whose own estimate falls in the cell (`add_step_times`; 0: no iteration lines)."""
    step_ms_median: float | None = None
    """Their median `iteration elapsed time`: the engine step time there (not the time between tokens:
    that also holds scheduling, output processing and the front end)."""


@dataclass
class Matrix:
    kv_cache_tokens: int
    """KV cache size in tokens, per engine, from the start-up line."""
    engines: int
    tokens_per_request_median: float
    """Median of every busy interval's estimate."""
    rows: list[str] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    cells: list[MatrixCell] = field(default_factory=list)
    caveat: str = MATRIX_CAVEAT
    steps_elsewhere: int = 0
    """Decode steps whose own estimate fell in no cell of the stats intervals (`add_step_times`)."""

    def cell(self, row: str, column: str) -> MatrixCell | None:
        for c in self.cells:
            if c.context == row and c.running == column:
                return c
        return None


def bucket_of(running: int) -> tuple[int, int | None]:
    """The power-of-two bucket of a running count: 1, 2, 3-4, 5-8, ..., 65-128, >128 (hi None).

    >>> bucket_of(2), bucket_of(3), bucket_of(16), bucket_of(17), bucket_of(200)
    ((2, 2), (3, 4), (9, 16), (17, 32), (129, None))
    """
    if running <= 2:
        return running, running
    hi = 1 << (running - 1).bit_length()
    if hi > 128:
        return 129, None
    return hi // 2 + 1, hi


def bucket_label(lo: int, hi: int | None) -> str:
    if hi is None:
        return f">{lo - 1}"
    return str(lo) if lo == hi else f"{lo}-{hi}"


def as_column(values: Sequence[float] | Sequence[int], dtype: type[np.generic]) -> np.ndarray:
    """A summary column as numpy sees it: the array's own memory for an `array` (no copy of months of
    intervals), else a new array."""
    if isinstance(values, array):
        return np.frombuffer(values, dtype=dtype)
    return np.asarray(values, dtype=dtype)


def context_rows(running: Sequence[int], kv_pct: Sequence[float], generation: Sequence[float],
                 kv_cache_tokens: int, engines: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each busy interval with KV usage (running > 0, finite KV usage and `generation`: its generation
    tok/s, or a step's elapsed ms for `add_step_times`): its index,
    its estimate of the tokens each running request holds (KV usage x KV cache size x engines /
    running) and its row's power of two (the estimate rounded to the nearest, 128 tokens at least).
    The one rule of a context row: the matrix and the capacity curves by context both use it."""
    r, kv = as_column(running, np.int64), as_column(kv_pct, np.float64)
    gen = as_column(generation, np.float64)
    index = np.flatnonzero((r > 0) & np.isfinite(kv) & np.isfinite(gen))
    estimate = kv[index] / 100.0 * (kv_cache_tokens * engines) / r[index]
    with np.errstate(divide="ignore"):
        power = np.maximum(_LOWEST, np.rint(np.log2(estimate))).astype(np.int64)
    return index, estimate, power


def build_matrix(running: Sequence[int], kv_pct: Sequence[float], generation: Sequence[float],
                 kv_cache_tokens: int, engines: int, *, prompt: Sequence[float] | None = None,
                 streams: Sequence[float] | None = None) -> Matrix | None:
    """The matrix of the intervals (running count, mean KV usage % over the engines, aggregate
    generation tok/s); None without a busy interval with KV usage.
    `prompt` (prompt tok/s; None: 0) and `streams` (the steps' mean generation requests, NaN or None:
    no iteration line) are the rest of what a cell's time between tokens reads (`tbt.little`).

    >>> m = build_matrix([4, 4, 1], [50.0, 50.0, 3.0], [900.0, 1100.0, 400.0], 8192, 1)
    >>> [(c.context, c.running, c.intervals, c.gen_tps_median) for c in m.cells]
    [('256', '1', 1, 400.0), ('1K', '3-4', 2, 1000.0)]
    """
    if kv_cache_tokens <= 0 or engines <= 0:
        return None
    index, estimates, powers = context_rows(running, kv_pct, generation, kv_cache_tokens, engines)
    if not len(index):
        return None
    gens = as_column(generation, np.float64)[index]
    r = as_column(running, np.int64)[index]
    buckets = {int(n): bucket_of(int(n)) for n in np.unique(r)}
    lows = np.fromiter((buckets[n][0] for n in r.tolist()), dtype=np.int64, count=len(r))
    matrix = Matrix(kv_cache_tokens=kv_cache_tokens, engines=engines,
                    tokens_per_request_median=round(float(np.median(estimates)), 1))
    his = {lo: hi for lo, hi in buckets.values()}
    prompts = np.zeros(len(running)) if prompt is None else as_column(prompt, np.float64)
    means = np.full(len(running), np.nan) if streams is None else as_column(streams, np.float64)
    cells = sorted({(int(p), int(lo)) for p, lo in zip(powers.tolist(), lows.tolist(), strict=True)})
    for power, lo in cells:
        pick = (powers == power) & (lows == lo)
        hi = his[lo]
        members = np.zeros(len(running), dtype=bool)
        members[index[pick]] = True
        tbt = little(generation, prompts, running, means, members)
        matrix.cells.append(MatrixCell(
            context=context_label(power), context_tokens=1 << power,
            running=bucket_label(lo, hi), running_lo=lo, running_hi=hi, intervals=int(pick.sum()),
            gen_tps_median=float(np.median(gens[pick])),
            tokens_per_request_median=round(float(np.median(estimates[pick])), 1),
            per_request_tps=None if tbt.per_request_tps is None else round(tbt.per_request_tps, 1),
            tbt_ms=None if tbt.ms is None else round(tbt.ms, 2), tbt_from=tbt.source,
        ))
    matrix.rows = [context_label(p) for p in sorted({p for p, _ in cells})]
    matrix.columns = [bucket_label(lo, his[lo]) for lo in sorted({lo for _, lo in cells})]
    return matrix


def add_step_times(matrix: Matrix, running: Sequence[int], kv_pct: Sequence[float],
                   elapsed_ms: Sequence[float]) -> None:
    """The decode-only steps of the matrix's launch (`--enable-logging-iteration-details`: each step's
    generation requests, its own KV usage, its elapsed ms) into the cells: each step's estimate by the
    matrix's rule (`context_rows`, the KV cache of the one engine that printed it), its column by its
    own running count; a cell gets its steps' count and median elapsed ms. Steps whose cell the stats
    intervals did not fill are left out (`Matrix.steps_elsewhere`)."""
    index, _, powers = context_rows(running, kv_pct, elapsed_ms, matrix.kv_cache_tokens, 1)
    if not len(index):
        return
    ms = as_column(elapsed_ms, np.float64)[index]
    r = as_column(running, np.int64)[index]
    lows = np.fromiter((bucket_of(n)[0] for n in r.tolist()), dtype=np.int64, count=len(r))
    for cell in matrix.cells:
        pick = (powers == cell.context_tokens.bit_length() - 1) & (lows == cell.running_lo)
        if pick.any():
            cell.decode_steps = int(pick.sum())
            cell.step_ms_median = round(float(np.median(ms[pick])), 2)
    matrix.steps_elsewhere = len(index) - sum(c.decode_steps for c in matrix.cells)


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
    """speed, max-num-seqs, KV cache or load (docs/offline.md, "Answers")."""
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
    not more (docs/offline.md, "Answers").

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
