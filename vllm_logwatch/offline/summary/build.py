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

Each group's running totals (`_Group`) are fed a record at a time (`add`): its intervals and the
exporter's own token estimate (`EngineState.apply_stats`); where the log has iteration lines
(`add_step`), each interval's streams: its steps' mean generation requests.

Spec-decode and KV-transfer counts come from the exporter's own per-engine state (`EngineState`), so the
summary counts exactly as `/metrics` does: V1 spec counts are summed, V0's cumulative ones taken as
totals; transfers are summed by result. MFU lines (`--enable-mfu-metrics`): medians and p90s per device.

The medians and quantiles are exact: they read a sorted list of a row's values, sorted by numpy
(`sorted_selected`: a list of months of floats would take four times the memory). numpy's stable sort
gives the same list as `sorted`, equal values such as -0.0 and 0.0 in the same order; the columns hold
no NaN (the summary stores finite numbers, or masks the NaN out), the one value whose place in
`sorted` depends on its neighbours.
"""

from __future__ import annotations

import math
import statistics
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import compress
from math import isfinite
from typing import Literal

import numpy as np

from ...exporting.engine_state import EngineState
from ...parsing.events import EngineStats, IterationStats, MfuStats, SpecDecodeStats, TransferStats
from ...parsing.stamps import seconds_between, utc
from ..reading.launches import Launch
from .matrix import CapacityCurve, Matrix, bucket_label, bucket_of, build_matrix, capacity_curves
from .tbt import TbtFrom, little


@dataclass
class SpecSummary:
    """Speculative decoding of a group: tokens counted as the exporter counts them (V1 lines summed,
    V0's cumulative counts taken as totals)."""

    lines: int
    drafted_tokens: float
    accepted_tokens: float
    acceptance_pct: float | None
    mean_acceptance_length_median: float | None


@dataclass
class TransferSummary:
    """KV / EC connector transfers of a group, summed over the `KV Transfer metrics:` lines."""

    lines: int
    succeeded: int | None
    """None when the connector's lines do not report the count (NIXL has no failed recvs, ...)."""
    failed: int | None
    failed_recv: int | None
    expired_requests: int | None
    gib: float
    """Successful transfers x Avg MB per transfer, in GiB (vLLM's MB is MiB)."""
    avg_transfer_ms_median: float | None
    p90_transfer_ms_median: float | None


class SpecTotals:
    """Spec lines of one group as they are read."""

    def __init__(self) -> None:
        self.lines = 0
        self.lengths = array("d")

    def add(self, e: SpecDecodeStats, estimate: EngineState) -> None:
        self.lines += 1
        estimate.apply_spec(e)
        if e.mean_acceptance_length is not None and math.isfinite(e.mean_acceptance_length):
            self.lengths.append(e.mean_acceptance_length)

    def finish(self, estimates: Iterable[EngineState]) -> SpecSummary | None:
        if not self.lines:
            return None
        states = list(estimates)
        drafted = sum(t.spec_drafted.value for t in states)
        accepted = sum(t.spec_accepted.value for t in states)
        return SpecSummary(
            lines=self.lines, drafted_tokens=drafted, accepted_tokens=accepted,
            acceptance_pct=accepted / drafted * 100.0 if drafted else None,
            mean_acceptance_length_median=statistics.median(self.lengths) if self.lengths else None,
        )


class TransferTotals:
    """KV / EC Transfer lines of one group as they are read."""

    def __init__(self) -> None:
        self.lines = 0
        self.ms = (array("d"), array("d"))  # avg and p90 of the lines with transfers

    def add(self, e: TransferStats, estimate: EngineState) -> None:
        self.lines += 1
        estimate.transfer.apply(e)
        if e.successful_transfers:
            for values, ms in zip(self.ms, (e.avg_transfer_ms, e.p90_transfer_ms), strict=True):
                if ms is not None and math.isfinite(ms):
                    values.append(ms)

    def finish(self, estimates: Iterable[EngineState]) -> TransferSummary | None:
        if not self.lines:
            return None
        totals: dict[str, float] = {}
        for estimate in estimates:
            for short, labels, value in estimate.transfer.samples():
                if short in ("transfers", "transfer_expired_requests", "transfer_bytes"):
                    key = labels[-1] if short == "transfers" else short
                    totals[key] = totals.get(key, 0.0) + value

        def count(key: str) -> int | None:
            return round(totals[key]) if key in totals else None

        avg_ms, p90_ms = self.ms
        return TransferSummary(
            lines=self.lines, succeeded=count("succeeded"), failed=count("failed"),
            failed_recv=count("failed_recv"), expired_requests=count("transfer_expired_requests"),
            gib=totals.get("transfer_bytes", 0.0) / (1 << 30),
            avg_transfer_ms_median=statistics.median(avg_ms) if avg_ms else None,
            p90_transfer_ms_median=statistics.median(p90_ms) if p90_ms else None,
        )


@dataclass
class MfuSummary:
    """A group's MFU lines: medians and 90th percentiles per device."""

    lines: int
    tflops_median: float
    tflops_p90: float
    gbps_median: float
    gbps_p90: float


class MfuTotals:
    """MFU lines of one group as they are read."""

    def __init__(self) -> None:
        self.tflops = array("d")
        self.gbps = array("d")

    def add(self, tflops: float, gbps: float) -> None:
        """An MFU line's TF/s and GB/s per device."""
        if math.isfinite(tflops) and math.isfinite(gbps):
            self.tflops.append(tflops)
            self.gbps.append(gbps)

    def finish(self) -> MfuSummary | None:
        if not self.tflops:
            return None
        tflops, gbps = sorted(self.tflops), sorted(self.gbps)
        return MfuSummary(lines=len(tflops), tflops_median=median_sorted(tflops),
                          tflops_p90=quantile_sorted(tflops, 0.9), gbps_median=median_sorted(gbps),
                          gbps_p90=quantile_sorted(gbps, 0.9))


class _Group:
    """Running totals of one group; interval values in compact arrays (months of logs fit)."""

    def __init__(self) -> None:
        self.launches: dict[int, Launch] = {}
        self.engines: dict[int | None, int | None] = {}  # engine -> engines_aggregated
        self.first: datetime | None = None
        self.last: datetime | None = None
        self._first_utc = self._last_utc = datetime.min  # `first` and `last` in UTC, once set
        self.estimates: dict[tuple[int, int | None], EngineState] = {}
        self.prefix_hits: dict[tuple[int, int | None], float] = {}  # each member's last prefix hit rate
        self.mm_hits: dict[tuple[int, int | None], float] = {}
        # Each interval's sums (the last one's still open: lines of other engines at its time join it).
        self.prompt = array("d")
        self.generation = array("d")
        self.running = array("q")
        self.waiting = array("q")
        self.kv = array("d")
        self.streams = array("d")
        """Per interval: its engines' steps' mean generation requests summed (NaN: no iteration line)."""
        self._steps: dict[tuple[int, int | None], tuple[int, int]] = {}
        """Per engine, its steps since its last stats line: how many, their generation requests summed."""
        self._time: datetime | None = None  # the last interval's time
        self._members: set[tuple[int, int | None]] = set()  # its lines' (launch, engine)
        self._kvs: list[float] = []  # its lines' KV usages (the interval's is their mean)
        self.spec = SpecTotals()
        self.transfers = TransferTotals()

    def _estimate(self, member: tuple[int, int | None]) -> EngineState:
        estimate = self.estimates.get(member)
        if estimate is None:
            estimate = self.estimates[member] = EngineState()
        return estimate

    def _stretch(self, t: datetime) -> None:
        """`first` and `last` over `t` too, ordered in UTC (wall clocks go back in a fall-back's hour)."""
        at = utc(t)
        if self.first is None or at < self._first_utc:
            self.first, self._first_utc = t, at
        if self.last is None or at > self._last_utc:
            self.last, self._last_utc = t, at

    def add_spec(self, launch: Launch, e: SpecDecodeStats) -> None:
        self.spec.add(e, self._estimate((launch.index, e.engine)))

    def add_transfer(self, launch: Launch, e: TransferStats) -> None:
        self.transfers.add(e, self._estimate((launch.index, e.engine)))

    def add_step(self, launch: Launch, e: IterationStats) -> None:
        """An iteration line: one more step in its engine's interval (the one its next stats line ends)."""
        if not e.dummy:
            member = (launch.index, e.engine)
            steps, streams = self._steps.get(member, (0, 0))
            self._steps[member] = (steps + 1, streams + e.generation_requests)

    def add(self, launch: Launch, e: EngineStats) -> None:
        index, engine, t = launch.index, e.engine, e.time
        member = (index, engine)
        self.launches.setdefault(index, launch)
        self.engines.setdefault(engine, e.engines_aggregated)
        if t is not None:
            self._stretch(t)
        # The live exporter's own per-engine state: the same token estimate (throughput x interval).
        self._estimate(member).apply_stats(e, 0.0)
        if e.prefix_cache_hit_rate_pct is not None:
            self.prefix_hits[member] = e.prefix_cache_hit_rate_pct
        if e.mm_cache_hit_rate_pct is not None:
            self.mm_hits[member] = e.mm_cache_hit_rate_pct
        prompt, generation, kv = e.prompt_throughput, e.generation_throughput, e.kv_cache_usage_pct
        prompt = prompt if prompt is not None and isfinite(prompt) else 0.0
        generation = generation if generation is not None and isfinite(generation) else 0.0
        kvs = self._kvs
        if t is None or t != self._time or member in self._members:  # a new interval
            self._time = t
            self._members.clear()
            kvs.clear()
            self.prompt.append(prompt + 0.0)  # + 0.0: a sum from 0.0 (-0.0 sums as 0.0)
            self.generation.append(generation + 0.0)
            self.running.append(e.running or 0)
            self.waiting.append(e.waiting or 0)
            self.kv.append(math.nan)
            self.streams.append(math.nan)
        else:  # another engine's line at the interval's time
            self.prompt[-1] += prompt
            self.generation[-1] += generation
            self.running[-1] += e.running or 0
            self.waiting[-1] += e.waiting or 0
        self._members.add(member)
        if self._steps:
            steps, streams = self._steps.pop(member, (0, 0))
            if steps:
                before = self.streams[-1]
                self.streams[-1] = (0.0 if math.isnan(before) else before) + streams / steps
        if kv is not None and isfinite(kv):
            kvs.append(kv)  # one engine's: its value (+ 0.0: `fmean`'s 0.0 for -0.0)
            self.kv[-1] = kv + 0.0 if len(kvs) == 1 else statistics.fmean(kvs)


def sorted_selected(column: array[float], mask: bytes) -> Sequence[float]:
    """`sorted(compress(column, mask))` of a column of floats (`mask`: a byte a value, 1 keeps it)."""
    values = np.frombuffer(column, dtype=np.float64)
    keep = np.frombuffer(mask, dtype=np.bool_)
    return np.sort(values[keep], kind="stable")  # type: ignore[return-value]


def sorted_ratios(numerators: array[float], denominators: array[int], mask: bytes) -> Sequence[float]:
    """`sorted(map(truediv, compress(numerators, mask), compress(denominators, mask)))`; the
    denominators kept by `mask` are not 0 and below 2**53 (exact as floats, as `truediv` takes them)."""
    keep = np.frombuffer(mask, dtype=np.bool_)
    top = np.frombuffer(numerators, dtype=np.float64)[keep]
    bottom = np.frombuffer(denominators, dtype=np.int64)[keep].astype(np.float64)
    return np.sort(top / bottom, kind="stable")  # type: ignore[return-value]


def quantile_sorted(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of a sorted sequence, linear between closest ranks (numpy's default).

    >>> quantile_sorted([1.0, 2.0, 3.0, 4.0], 0.9)
    3.7
    """
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    if lo + 1 >= len(ordered):
        return float(ordered[-1])
    return round(float(ordered[lo]) + (float(ordered[lo + 1]) - float(ordered[lo])) * (pos - lo), 10)


def median_sorted(ordered: Sequence[float]) -> float:
    """`statistics.median` of an already sorted sequence (the same arithmetic, no second copy)."""
    n = len(ordered)
    if n % 2 == 1:
        return float(ordered[n // 2])
    return (float(ordered[n // 2 - 1]) + float(ordered[n // 2])) / 2


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
