"""The summary's running totals of one group (`_Group`; `summary/build.py` finishes them), fed a
record at a time (`add`): its intervals and the exporter's own token estimate (`EngineState.apply_stats`);
where the log has iteration lines (`add_step`), each interval's streams: its steps' mean generation requests.

Spec-decode and KV-transfer counts come from the exporter's own per-engine state (`EngineState`), so the
summary counts exactly as `/metrics` does: V1 spec counts are summed, V0's cumulative ones taken as
totals; transfers are summed by result. MFU lines (`--enable-mfu-metrics`): medians and p90s per device.

The medians and quantiles are exact: they read a sorted list of a row's values, sorted by numpy
(`sorted_selected`: a list of months of floats would take four times the memory, and CPython's sort of
them was the largest part of `summary`). numpy's stable sort gives the same list as `sorted`, equal
values such as -0.0 and 0.0 in the same order; the columns hold no NaN (the summary stores finite
numbers, or masks the NaN out), the one value whose place in `sorted` depends on its neighbours.
"""

from __future__ import annotations

import math
import statistics
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from math import isfinite

import numpy as np

from ...exporting.engine_state import EngineState
from ...parsing.events import EngineStats, IterationStats, SpecDecodeStats, TransferStats
from ...parsing.stamps import utc
from ..reading.launches import Launch


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

    def _estimate(self, member: tuple[int, int | None]) -> EngineState:  # as `add` makes them
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
        if index not in self.launches:
            self.launches[index] = launch
        if engine not in self.engines:
            self.engines[engine] = e.engines_aggregated
        if t is not None:
            self._stretch(t)
        # The live exporter's own per-engine state: the same token estimate (throughput x interval).
        estimate = self.estimates.get(member)
        if estimate is None:
            estimate = self.estimates[member] = EngineState()
        estimate.apply_stats(e, 0.0)
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
