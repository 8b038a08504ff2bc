"""The context x concurrency matrix of a launch: generation tok/s by the tokens each running request
holds (estimated) and by how many run, as benchmark tools print it (8K ... 256K by 1 ... 128).

A stats line says how full the KV cache is, not how long the requests are; with the KV cache size in
tokens from the start-up line, each busy interval gives an estimate of the tokens held per running
request: KV cache usage x KV cache size in tokens / running. Rows are that estimate rounded to the
nearest power of two (a row "8K" holds 5.7K-11.6K tokens); columns are running requests in the
summary's power-of-two buckets; a cell is the median generation tok/s of its intervals and their
number. Pure: columns of numbers in, a `Matrix` out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["MATRIX_CAVEAT", "Matrix", "MatrixCell", "build_matrix", "context_label"]

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

    def cell(self, row: str, column: str) -> MatrixCell | None:
        for c in self.cells:
            if c.context == row and c.running == column:
                return c
        return None


def _power(tokens: float) -> int:
    if tokens <= 0:
        return _LOWEST
    return max(_LOWEST, round(math.log2(tokens)))


def build_matrix(running: Sequence[int], kv_pct: Sequence[float], generation: Sequence[float],
                 kv_cache_tokens: int, engines: int,
                 column: Callable[[int], tuple[int, int | None]]) -> Matrix | None:
    """The matrix of the intervals (running count, mean KV usage % over the engines, aggregate
    generation tok/s), `column` the running-count bucket; None without a busy interval with KV usage.

    >>> from vllm_logwatch.offline.summary.build import bucket_of
    >>> m = build_matrix([4, 4, 1], [50.0, 50.0, 3.0], [900.0, 1100.0, 400.0], 8192, 1, bucket_of)
    >>> [(c.context, c.running, c.intervals, c.gen_tps_median) for c in m.cells]
    [('256', '1', 1, 400.0), ('1K', '3-4', 2, 1000.0)]
    """
    if kv_cache_tokens <= 0 or engines <= 0:
        return None
    capacity = kv_cache_tokens * engines
    groups: dict[tuple[int, tuple[int, int | None]], tuple[list[float], list[float]]] = {}
    for r, kv, gen in zip(running, kv_pct, generation, strict=True):
        if r <= 0 or not math.isfinite(kv) or not math.isfinite(gen):
            continue
        estimate = kv / 100.0 * capacity / r
        gens, estimates = groups.setdefault((_power(estimate), column(r)), ([], []))
        gens.append(gen)
        estimates.append(estimate)
    if not groups:
        return None
    every = [e for _, estimates in groups.values() for e in estimates]
    matrix = Matrix(kv_cache_tokens=kv_cache_tokens, engines=engines,
                    tokens_per_request_median=round(statistics.median(every), 1))
    for (power, (lo, hi)), (gens, estimates) in sorted(groups.items(), key=lambda i: (i[0][0], i[0][1][0])):
        matrix.cells.append(MatrixCell(
            context=context_label(power), context_tokens=1 << power,
            running=_running_label(lo, hi), running_lo=lo, running_hi=hi, intervals=len(gens),
            gen_tps_median=statistics.median(gens),
            tokens_per_request_median=round(statistics.median(estimates), 1),
        ))
    powers = sorted({p for p, _ in groups})
    matrix.rows = [context_label(p) for p in powers]
    matrix.columns = [_running_label(lo, hi) for lo, hi in sorted({c for _, c in groups})]
    return matrix


def _running_label(lo: int, hi: int | None) -> str:
    if hi is None:
        return f">{lo - 1}"
    return str(lo) if lo == hi else f"{lo}-{hi}"
