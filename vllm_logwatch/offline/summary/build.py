"""`logwatch summary`: what the stats lines say about a run, per launch and by concurrency.

Pure: `summarize(records)` turns `(launch, stats)` records into a `Summary`; `offline/summary/tables.py`
renders it as text, Markdown or JSON; `summary_cmd.run_summary` reads files and prints.

An *interval* is one stats line, or, when several engines print at the same second, their lines
summed (aggregate throughput and requests; mean KV usage). Intervals with nothing running are idle:
they count in the totals, not in the medians or the concurrency table.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import compress
from typing import Literal

from ...parsing.events import EngineStats, MfuStats, SpecDecodeStats, TransferStats
from ...parsing.stamps import seconds_between
from ..reading.launches import Launch
from ..reading.records import FastBlock, FastMfu
from .capacity import CapacityCurve, capacity_curves
from .connectors import SpecSummary, TransferSummary
from .facts import MfuSummary, MfuTotals
from .groups import _Group
from .matrix import Matrix, build_matrix
from .sorting import sorted_ratios, sorted_selected

__all__ = [
    "STEADY_MAX_PROMPT_SHARE", "ConcurrencyRow", "GroupSummary", "SpecSummary", "Summary", "TransferSummary",
    "bucket_of", "quantile", "summarize",
]
Record = EngineStats | SpecDecodeStats | TransferStats | MfuStats | FastMfu

By = Literal["launch", "engine", "none"]
STEADY_MAX_PROMPT_SHARE = 0.02
"""Steady decode: prompt tok/s at most this share of generation tok/s (no prefill burst)."""
_FEW_DISTINCT = 8
"""Up to this many distinct running counts: one row each instead of power-of-two buckets."""
_Key = tuple[int, ...]


def quantile(values: Iterable[float], q: float) -> float:
    """The q-quantile with linear interpolation between closest ranks (numpy's default).

    >>> quantile([1.0, 2.0, 3.0, 4.0], 0.9)
    3.7
    """
    return _quantile_sorted(sorted(values), q)


def _quantile_sorted(ordered: Sequence[float], q: float) -> float:
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    if lo + 1 >= len(ordered):
        return float(ordered[-1])
    return round(float(ordered[lo]) + (float(ordered[lo + 1]) - float(ordered[lo])) * (pos - lo), 10)


def _median_sorted(ordered: Sequence[float]) -> float:
    """`statistics.median` of an already sorted sequence (the same arithmetic, no second copy)."""
    n = len(ordered)
    if n % 2 == 1:
        return float(ordered[n // 2])
    return (float(ordered[n // 2 - 1]) + float(ordered[n // 2])) / 2


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


def _bucket_label(lo: int, hi: int | None) -> str:
    if hi is None:
        return f">{lo - 1}"
    return str(lo) if lo == hi else f"{lo}-{hi}"


@dataclass
class ConcurrencyRow:
    """One row of the concurrency table: the busy intervals whose running count falls in [lo, hi]."""

    running: str
    lo: int
    hi: int | None
    intervals: int
    generation_median: float
    generation_p90: float
    generation_p10: float
    per_request_median: float
    prompt_median: float
    kv_cache_usage_median_pct: float | None
    waiting_share: float


@dataclass
class GroupSummary:
    """One row of the launch table (a launch, a launch's engine, or everything) and its tables."""

    launch: str
    engine: str
    model_name: str | None
    start: datetime | None
    end: datetime | None
    lines: int
    intervals: int
    busy_intervals: int
    prompt_tokens: float
    generation_tokens: float
    peak_generation: float | None
    median_generation: float | None
    mean_kv_cache_usage_pct: float | None
    waiting_share: float | None
    prefix_cache_hit_rate_pct: float | None
    mm_cache_hit_rate_pct: float | None
    concurrency: list[ConcurrencyRow] = field(default_factory=list)
    steady_decode: list[ConcurrencyRow] = field(default_factory=list)
    spec: SpecSummary | None = None
    transfers: TransferSummary | None = None
    mfu: MfuSummary | None = None
    matrix: Matrix | None = None
    """The context x concurrency matrix (`summary/matrix.py`): a group of one launch whose KV cache size
    in tokens is logged."""
    launch_index: int | None = None
    """`Launch.index` of the group's launch (None: a group of several launches)."""
    busy_windows: int = 0
    """Intervals in which tokens were computed (prompt or generation tok/s above 0): `cost.py`'s busy time."""
    interval_seconds: float | None = None
    """The engines' mean stats interval (None: not known)."""
    capacity: list[CapacityCurve] = field(default_factory=list)
    """Per-stream speed by running count, nothing waiting (`capacity.py`): the launch's, then per context."""

    @property
    def span_seconds(self) -> float | None:
        if self.start is None or self.end is None:
            return None
        return seconds_between(self.start, self.end)


@dataclass
class Summary:
    by: str
    groups: list[GroupSummary]
    launches: list[Launch] = field(default_factory=list)
    """Every launch with stats lines, in input order, with its start-up facts."""


def _engine_label(engines: dict[int | None, int | None]) -> str:
    names = []
    for engine, aggregated in engines.items():
        if engine is not None:
            names.append(str(engine))
        else:
            names.append(f"all {aggregated}" if aggregated else "-")
    if len(names) > 4:
        return f"{len(names)} engines"
    return ",".join(sorted(names, key=lambda n: (len(n), n)))


# An interval's code (one byte): its row's number (1-15; 0: nothing running) and three flags.
_ROW, _STEADY, _WAITING, _KV = 15, 16, 32, 64


def _codes(g: _Group, exact: bool) -> tuple[bytes, list[tuple[int, int | None]]]:
    """Each interval's code, and the rows' keys (running counts or buckets, row number i at i - 1)."""
    busy_counts = {r for r in set(g.running) if r > 0}
    keys = sorted({(r, r) if exact else bucket_of(r) for r in busy_counts})
    number = {r: keys.index((r, r) if exact else bucket_of(r)) + 1 for r in busy_counts}
    share = STEADY_MAX_PROMPT_SHARE
    codes = bytes(
        0 if r <= 0 else number[r] | (_STEADY if w == 0 and p <= share * gen else 0)
        | (_WAITING if w > 0 else 0) | (_KV if kv == kv else 0)  # kv == kv: not NaN
        for p, gen, r, w, kv in zip(g.prompt, g.generation, g.running, g.waiting, g.kv, strict=True)
    )
    return codes, keys


def _mask(codes: bytes, row: int, flags: int = 0) -> bytes:
    """1 for the intervals of row number `row` (0: of any row, i.e. busy) with all of `flags`, else 0
    (the selectors of `itertools.compress`)."""
    table = bytes(1 if (c & _ROW == row if row else c & _ROW) and c & flags == flags else 0
                  for c in range(256))
    return codes.translate(table)


def _concurrency(g: _Group, codes: bytes, keys: list[tuple[int, int | None]],
                 flag: int) -> tuple[list[ConcurrencyRow], float | None]:
    """Rows over the busy intervals with `flag` (0: all; `_STEADY`): one per running count or bucket;
    and the median generation throughput of all their intervals. One column is sorted at a time (a
    list of its row's values, then dropped): the generation of all the intervals first (their median),
    then each row's columns."""
    masks = [(number, lo, hi, _mask(codes, number, flag))
             for number, (lo, hi) in enumerate(keys, start=1)]
    every = sorted_selected(g.generation, _mask(codes, 0, flag))  # the rows' intervals, all of them
    median = _median_sorted(every) if len(every) else None
    del every
    generation: dict[int, tuple[float, float, float]] = {}
    for number, _lo, _hi, rows in masks:
        gen = sorted_selected(g.generation, rows)
        if len(gen):
            generation[number] = (_median_sorted(gen), _quantile_sorted(gen, 0.9), _quantile_sorted(gen, 0.1))
        del gen
    out = []
    for number, lo, hi, rows in masks:
        if number not in generation:
            continue
        intervals = rows.count(1)
        kv = sorted_selected(g.kv, _mask(codes, number, flag | _KV))
        out.append(ConcurrencyRow(
            running=_bucket_label(lo, hi),
            lo=lo,
            hi=hi,
            intervals=intervals,
            generation_median=generation[number][0],
            generation_p90=generation[number][1],
            generation_p10=generation[number][2],
            per_request_median=_median_sorted(sorted_ratios(g.generation, g.running, rows)),
            prompt_median=_median_sorted(sorted_selected(g.prompt, rows)),
            kv_cache_usage_median_pct=_median_sorted(kv) if len(kv) else None,
            waiting_share=_mask(codes, number, flag | _WAITING).count(1) / intervals,
        ))
    return out, median


def _last_hits(g: _Group) -> tuple[float | None, float | None]:
    """Hit rates at the end: the mean over the engines of the group's latest launch of their last values."""
    latest = max(g.launches)
    prefix = [p for (launch, _), (p, _m) in g.hits.items() if launch == latest and p is not None]
    mm = [m for (launch, _), (_p, m) in g.hits.items() if launch == latest and m is not None]
    return (statistics.fmean(prefix) if prefix else None, statistics.fmean(mm) if mm else None)


def _finish(g: _Group) -> GroupSummary:
    g.close()
    intervals = [i for e in g.estimates.values() if (i := e.typical_interval()) is not None]
    for estimate in g.estimates.values():
        estimate.reset()  # end of the launch: a lone first line is credited with the default interval
    n = len(g.generation)
    exact = len({r for r in set(g.running) if r > 0}) <= _FEW_DISTINCT
    codes, keys = _codes(g, exact)
    concurrency, median_generation = _concurrency(g, codes, keys, 0)
    n_busy = _mask(codes, 0).count(1)
    busy_kv = _mask(codes, 0, _KV)
    n_busy_kv = busy_kv.count(1)  # as `statistics.fmean`: the exact sum over the count
    n_waiting = _mask(codes, 0, _WAITING).count(1)
    launches = sorted(g.launches.values(), key=lambda la: la.index)
    prefix, mm = _last_hits(g)
    models = sorted({la.model_name for la in launches if la.model_name})
    return GroupSummary(
        launch=launches[0].label if len(launches) == 1 else f"{len(launches)} launches",
        engine=_engine_label(g.engines),
        model_name=", ".join(models) or None,
        start=g.first,
        end=g.last,
        lines=g.lines,
        intervals=n,
        busy_intervals=n_busy,
        prompt_tokens=sum(t.prompt_tokens.value for t in g.estimates.values()),
        generation_tokens=sum(t.generation_tokens.value for t in g.estimates.values()),
        peak_generation=max(g.generation) if n else None,
        median_generation=median_generation,
        mean_kv_cache_usage_pct=math.fsum(compress(g.kv, busy_kv)) / n_busy_kv if n_busy_kv else None,
        waiting_share=n_waiting / n_busy if n_busy else None,
        prefix_cache_hit_rate_pct=prefix,
        mm_cache_hit_rate_pct=mm,
        concurrency=concurrency,
        steady_decode=_concurrency(g, codes, keys, _STEADY)[0],
        spec=g.spec.finish(g.estimates.values()),
        transfers=g.transfers.finish(g.estimates.values()),
        matrix=_matrix(g, launches),
        launch_index=launches[0].index if len(launches) == 1 else None,
        busy_windows=sum(1 for p, gen in zip(g.prompt, g.generation, strict=True) if p > 0 or gen > 0),
        interval_seconds=statistics.fmean(intervals) if intervals else None,
        capacity=_capacity(g, launches),
    )


def _capacity(g: _Group, launches: list[Launch]) -> list[CapacityCurve]:
    """The capacity curves of a group of one launch (per context row when its KV cache size is known)."""
    if len(launches) != 1:
        return []
    tokens = launches[0].facts.get("kv_cache_tokens")
    return capacity_curves(g.running, g.generation, g.waiting, g.kv,
                           tokens if isinstance(tokens, int) else None, max(1, len(g.engines)))


def _matrix(g: _Group, launches: list[Launch]) -> Matrix | None:
    """The matrix of a group of one launch that logged its KV cache size in tokens."""
    tokens = launches[0].facts.get("kv_cache_tokens") if len(launches) == 1 else None
    if not isinstance(tokens, int):
        return None
    return build_matrix(g.running, g.kv, g.generation, tokens, max(1, len(g.engines)), bucket_of)


def summarize(records: Iterable[tuple[Launch, Record | FastBlock]], by: By = "launch") -> Summary:
    """The summary of `records` (in file order), grouped by launch, by launch and engine, or not at all.

    >>> from vllm_logwatch.parsing.line import parse_line
    >>> e = parse_line("INFO 01-22 18:25:09 metrics.py:449] Avg prompt throughput: 0.0 tokens/s, "
    ...                "Avg generation throughput: 61.0 tokens/s, Running: 2 reqs, Swapped: 0 reqs, "
    ...                "Pending: 0 reqs, GPU KV cache usage: 7.4%, CPU KV cache usage: 0.0%.")
    >>> s = summarize([(Launch(0, "x.log", 1), e)])
    >>> s.groups[0].generation_tokens, [(r.running, r.per_request_median) for r in s.groups[0].concurrency]
    (610.0, [('2', 30.5)])
    """
    groups: dict[_Key, _Group] = {}
    mfu: dict[_Key, MfuTotals] = {}
    launches: dict[int, Launch] = {}
    for launch, e in records:
        launches.setdefault(launch.index, launch)
        if isinstance(e, FastBlock):  # the fast lane's run of common stats lines
            _add_block(groups, launch, e, by)
            continue
        if isinstance(e, FastMfu):  # the fast lane's MFU lines of such a run
            whole: _Key = (launch.index,) if by == "launch" else ()
            for engine, tflops, gbps in zip(e.engine, e.tflops, e.gbps, strict=True):
                at = (launch.index, engine) if by == "engine" else whole
                mfu.setdefault(at, MfuTotals()).add(tflops, gbps)
            continue
        key: _Key = (
            (launch.index, -1 if e.engine is None else e.engine) if by == "engine"
            else (launch.index,) if by == "launch" else ()
        )
        if isinstance(e, MfuStats):
            mfu.setdefault(key, MfuTotals()).add(e.tflops_per_device, e.gbps_per_device)
            continue
        group = groups.get(key)
        if isinstance(e, (SpecDecodeStats, TransferStats)):  # else stats: EngineStats, or the fast lane's
            if group is None:
                continue  # a spec or transfer line before its engine's first stats line: nothing to add it to
            if isinstance(e, SpecDecodeStats):
                group.add_spec(launch, e)
            else:
                group.add_transfer(launch, e)
            continue
        if group is None:
            group = groups[key] = _Group()
        group.add(launch, e)
    summaries = []
    for key, g in groups.items():
        summary = _finish(g)
        summary.mfu = mfu[key].finish() if key in mfu else None
        summaries.append(summary)
    summaries.sort(key=lambda s: s.start.timestamp() if s.start else math.inf)
    return Summary(by=by, groups=summaries,
                   launches=[la for _, la in sorted(launches.items()) if la.has_stats])


def _add_block(groups: dict[_Key, _Group], launch: Launch, block: FastBlock, by: By) -> None:
    """The block's lines to their groups (by engine: the groups in order of their first line)."""
    if by != "engine":
        key: _Key = (launch.index,) if by == "launch" else ()
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group()
        group.add_block(launch, block, range(len(block)))
        return
    rows: dict[int, list[int]] = {}
    for i, engine in enumerate(block.engine):
        rows.setdefault(engine, []).append(i)
    for engine, idx in rows.items():
        key = (launch.index, engine)
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group()
        group.add_block(launch, block, idx)
