"""`logwatch summary`: what the stats lines say about a run, per launch and by concurrency.

Pure: `summarize(records)` turns `(launch, stats)` records into a `Summary`; `offline/summary/tables.py`
renders it as text, Markdown or JSON; `summary_cmd.run_summary` reads files and prints.

An *interval* is one stats line, or, when several engines print at the same second, their lines
summed (aggregate throughput and requests; mean KV usage). Intervals with nothing running are idle:
they count in the totals, not in the medians or the concurrency table. A stats line's throughput is an
average over the interval before it, its Running count an instant at its end: an interval is *held* at
a count when the line before it printed the same count (or, bucketed, a count of the same bucket), and
only held intervals make the concurrency rows (the window in which a load started, stopped or changed,
and the partial window after start-up or idle, are left out).

The time between tokens of a row is Little's law over its held intervals (`tbt.py`: the one definition
the matrix, `compare` and `audit` use too): from the iteration lines' cadence where the log has them,
else from the Running count. `tbt_from` says which.
"""

from __future__ import annotations

import math
import statistics
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from itertools import compress
from typing import Literal

from ...parsing.events import EngineStats, IterationStats, MfuStats, SpecDecodeStats, TransferStats
from ...parsing.stamps import seconds_between
from ..reading.launches import Launch
from .groups import (
    MfuSummary,
    MfuTotals,
    SpecSummary,
    TransferSummary,
    _Group,
    median_sorted,
    quantile_sorted,
    sorted_ratios,
    sorted_selected,
)
from .matrix import CapacityCurve, Matrix, bucket_label, bucket_of, build_matrix, capacity_curves
from .tbt import TbtFrom, little

Record = EngineStats | SpecDecodeStats | TransferStats | MfuStats | IterationStats

By = Literal["launch", "engine", "none"]
FEW_INTERVALS = 3
"""A concurrency row resting on fewer held intervals than this is marked (`ConcurrencyRow.few`)."""
_FEW_DISTINCT = 8
"""Up to this many distinct running counts: one row each instead of power-of-two buckets."""
_Key = tuple[int, ...]


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
    decode_intervals: int = 0
    """The held intervals the two figures below rest on (`tbt.little`: with iteration lines, or
    decode-dominated)."""
    per_request_tps: float | None = None
    """Sum of generation tok/s / sum of running over the decode-dominated intervals: one stream's speed."""
    tbt_ms: float | None = None
    """1000 / per_request_tps: the time between a stream's tokens (Little's law; the module says how)."""
    tbt_from: TbtFrom | None = None
    """What the two figures above rest on: the iteration lines' cadence or the stats lines' Running."""
    few: bool = False
    """Fewer than `FEW_INTERVALS` held intervals: read the row with care."""


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
    spec: SpecSummary | None = None
    transfers: TransferSummary | None = None
    mfu: MfuSummary | None = None
    matrix: Matrix | None = None
    """The context x concurrency matrix (`summary/matrix.py`): a group of one launch whose KV cache size
    in tokens is logged."""
    launch_index: int | None = None
    """`Launch.index` of the group's launch (None: a group of several launches)."""
    busy_windows: int = 0
    """Intervals in which tokens were computed (prompt or generation tok/s above 0): the cost's busy time."""
    interval_seconds: float | None = None
    """The engines' mean stats interval (None: not known)."""
    capacity: list[CapacityCurve] = field(default_factory=list)
    """Per-stream speed by running count, nothing waiting (`matrix.py`): the launch's, then per context."""
    tbt_ms: float | None = None
    """The time between tokens over every held decode-dominated interval (Little's law, weighted by the
    tokens: sum of running / sum of generation tok/s): the launch's, as vLLM's mean ITL is."""
    tbt_from: TbtFrom | None = None
    """What `tbt_ms` rests on (`ConcurrencyRow.tbt_from`)."""
    stats_processes: int = 1
    """The most vLLM processes that wrote one engine's stats lines at once in a launch of the group (2+:
    servers sharing one log, `EngineState.processes`): tokens are counted per process, intervals not."""

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
_ROW, _WAITING, _KV, _HELD = 15, 32, 64, 128


def _codes(g: _Group, exact: bool) -> tuple[bytes, list[tuple[int, int | None]]]:
    """Each interval's code, and the rows' keys (running counts or buckets, row number i at i - 1).
    `_HELD`: the interval before it is of the same row (the count held the whole interval)."""
    busy_counts = {r for r in set(g.running) if r > 0}
    keys = sorted({(r, r) if exact else bucket_of(r) for r in busy_counts})
    number = {r: keys.index((r, r) if exact else bucket_of(r)) + 1 for r in busy_counts}
    number[0] = 0
    rows = [number[r] if r > 0 else 0 for r in g.running]
    codes = bytes(
        0 if row == 0 else row | (_WAITING if w > 0 else 0) | (_KV if kv == kv else 0)  # kv == kv: not NaN
        | (_HELD if row == before else 0)
        for row, before, w, kv in zip(rows, [0, *rows[:-1]], g.waiting, g.kv, strict=True)
    )
    return codes, keys


def _mask(codes: bytes, row: int, flags: int = 0) -> bytes:
    """1 for the intervals of row number `row` (0: of any row, i.e. busy) with all of `flags`, else 0
    (the selectors of `itertools.compress`)."""
    table = bytes(1 if (c & _ROW == row if row else c & _ROW) and c & flags == flags else 0
                  for c in range(256))
    return codes.translate(table)


def _concurrency(g: _Group, codes: bytes, keys: list[tuple[int, int | None]],
                 flag: int) -> list[ConcurrencyRow]:
    """Rows over the intervals with `flag` (`_HELD`): one per running count or
    bucket. One column is sorted at a time (a list of its row's values, then dropped)."""
    out = []
    for number, (lo, hi) in enumerate(keys, start=1):
        rows = _mask(codes, number, flag)
        intervals = rows.count(1)
        if not intervals:
            continue
        gen = sorted_selected(g.generation, rows)
        median, p90, p10 = median_sorted(gen), quantile_sorted(gen, 0.9), quantile_sorted(gen, 0.1)
        del gen
        kv = sorted_selected(g.kv, _mask(codes, number, flag | _KV))
        tbt = little(g.generation, g.prompt, g.running, g.streams, rows)
        out.append(ConcurrencyRow(
            running=bucket_label(lo, hi),
            lo=lo,
            hi=hi,
            intervals=intervals,
            generation_median=median,
            generation_p90=p90,
            generation_p10=p10,
            per_request_median=median_sorted(sorted_ratios(g.generation, g.running, rows)),
            prompt_median=median_sorted(sorted_selected(g.prompt, rows)),
            kv_cache_usage_median_pct=median_sorted(kv) if len(kv) else None,
            waiting_share=_mask(codes, number, flag | _WAITING).count(1) / intervals,
            decode_intervals=tbt.intervals,
            per_request_tps=tbt.per_request_tps,
            tbt_ms=tbt.ms,
            tbt_from=tbt.source,
            few=intervals < FEW_INTERVALS,
        ))
    return out


def _last_hits(g: _Group) -> tuple[float | None, float | None]:
    """Hit rates at the end: the mean over the engines of the group's latest launch of their last values."""
    latest = max(g.launches)
    prefix = [p for (launch, _), p in g.prefix_hits.items() if launch == latest]
    mm = [m for (launch, _), m in g.mm_hits.items() if launch == latest]
    return (statistics.fmean(prefix) if prefix else None, statistics.fmean(mm) if mm else None)


def _finish(g: _Group) -> GroupSummary:
    intervals = [i for e in g.estimates.values() if (i := e.tokens.typical_interval()) is not None]
    processes = max((e.processes() for e in g.estimates.values()), default=1)
    for estimate in g.estimates.values():
        estimate.reset()  # end of the launch: a lone first line is credited with the default interval
    n = len(g.generation)
    exact = len({r for r in set(g.running) if r > 0}) <= _FEW_DISTINCT
    codes, keys = _codes(g, exact)
    concurrency = _concurrency(g, codes, keys, _HELD)
    # The running counts of the held intervals, 0 for the others (the matrix and capacity read no others).
    held = array("q", (r if c & _HELD else 0 for r, c in zip(g.running, codes, strict=True)))
    every = sorted_selected(g.generation, _mask(codes, 0))  # the busy intervals, all of them
    median_generation = median_sorted(every) if len(every) else None
    del every
    n_busy = _mask(codes, 0).count(1)
    tbt = little(g.generation, g.prompt, g.running, g.streams, _mask(codes, 0, _HELD), _mask(codes, 0))
    busy_kv = _mask(codes, 0, _KV)
    n_busy_kv = busy_kv.count(1)  # as `statistics.fmean`: the exact sum over the count
    n_waiting = _mask(codes, 0, _WAITING).count(1)
    launches = sorted(g.launches.values(), key=lambda la: la.index)
    prefix, mm = _last_hits(g)
    models = sorted({la.model_name for la in launches if la.model_name})
    # A group of one launch has capacity curves, and, with its KV cache size in tokens, the matrix and
    # the curves per context row.
    one = launches[0] if len(launches) == 1 else None
    tokens = one.facts.get("kv_cache_tokens") if one is not None else None
    tokens = tokens if isinstance(tokens, int) else None
    engines = max(1, len(g.engines))
    return GroupSummary(
        launch=launches[0].label if len(launches) == 1 else f"{len(launches)} launches",
        engine=_engine_label(g.engines),
        model_name=", ".join(models) or None,
        start=g.first,
        end=g.last,
        lines=sum(e.stats_lines for e in g.estimates.values()),
        intervals=n,
        busy_intervals=n_busy,
        prompt_tokens=sum(t.tokens.prompt_tokens.value for t in g.estimates.values()),
        generation_tokens=sum(t.tokens.generation_tokens.value for t in g.estimates.values()),
        peak_generation=max(g.generation) if n else None,
        median_generation=median_generation,
        mean_kv_cache_usage_pct=math.fsum(compress(g.kv, busy_kv)) / n_busy_kv if n_busy_kv else None,
        waiting_share=n_waiting / n_busy if n_busy else None,
        prefix_cache_hit_rate_pct=prefix,
        mm_cache_hit_rate_pct=mm,
        concurrency=concurrency,
        spec=g.spec.finish(g.estimates.values()),
        transfers=g.transfers.finish(g.estimates.values()),
        matrix=None if tokens is None else build_matrix(held, g.kv, g.generation, tokens, engines,
                                                        prompt=g.prompt, streams=g.streams),
        launch_index=launches[0].index if len(launches) == 1 else None,
        busy_windows=sum(1 for p, gen in zip(g.prompt, g.generation, strict=True) if p > 0 or gen > 0),
        interval_seconds=statistics.fmean(intervals) if intervals else None,
        capacity=[] if one is None else capacity_curves(g.running, g.generation, g.waiting, g.kv, tokens,
                                                        engines),
        tbt_ms=tbt.ms,
        tbt_from=tbt.source,
        stats_processes=processes,
    )


def summarize(records: Iterable[tuple[Launch, Record | IterationStats]], by: By = "launch",
              on_step: Callable[[Launch, IterationStats], None] | None = None) -> Summary:
    """The summary of `records` (in file order), grouped by launch, by launch and engine, or not at all.
    Step records go to `on_step` (the step tables, `summary/steps.py`), if given.

    >>> from dataclasses import replace
    >>> from vllm_logwatch.parsing.line import parse_line
    >>> e = parse_line("INFO 01-22 18:25:09 metrics.py:449] Avg prompt throughput: 0.0 tokens/s, "
    ...                "Avg generation throughput: 61.0 tokens/s, Running: 2 reqs, Swapped: 0 reqs, "
    ...                "Pending: 0 reqs, GPU KV cache usage: 7.4%, CPU KV cache usage: 0.0%.")
    >>> launch = Launch(0, "x.log", 1)
    >>> s = summarize([(launch, e), (launch, replace(e, time=None))])  # 2 held the 2nd
    >>> g = s.groups[0]
    >>> g.generation_tokens, [(r.running, r.per_request_tps, round(r.tbt_ms, 2)) for r in g.concurrency]
    (1220.0, [('2', 30.5, 32.79)])
    """
    groups: dict[_Key, _Group] = {}
    mfu: dict[_Key, MfuTotals] = {}
    launches: dict[int, Launch] = {}
    for launch, e in records:
        launches.setdefault(launch.index, launch)
        key: _Key = (
            (launch.index,) if by == "launch"
            else (launch.index, -1 if e.engine is None else e.engine) if by == "engine" else ()
        )
        if isinstance(e, EngineStats):
            group = groups.get(key)
            if group is None:
                group = groups[key] = _Group()
            group.add(launch, e)
        elif isinstance(e, MfuStats):
            mfu.setdefault(key, MfuTotals()).add(e.tflops_per_device, e.gbps_per_device)
        elif isinstance(e, IterationStats):
            if on_step is not None:
                on_step(launch, e)
            if (group := groups.get(key)) is not None:  # its cadence: the summary's time between tokens
                group.add_step(launch, e)
        elif (group := groups.get(key)) is not None:  # none: a spec or transfer line before its
            if isinstance(e, SpecDecodeStats):        # engine's first stats line, nothing to add it to
                group.add_spec(launch, e)
            else:
                group.add_transfer(launch, e)
    summaries = []
    for key, g in groups.items():
        summary = _finish(g)
        summary.mfu = mfu[key].finish() if key in mfu else None
        summaries.append(summary)
    summaries.sort(key=lambda s: s.start.timestamp() if s.start else math.inf)
    return Summary(by=by, groups=summaries,
                   launches=[la for _, la in sorted(launches.items()) if la.has_stats])
