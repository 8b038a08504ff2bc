"""The summary's running totals of one group (`_Group`; `summary/build.py` finishes them), fed a
record at a time (`add`): its intervals and the exporter's own token estimate (`EngineState.apply_stats`);
where the log has iteration lines (`add_step`), each interval's streams: its steps' mean generation requests.
"""

from __future__ import annotations

import math
import statistics
from array import array
from datetime import datetime
from math import isfinite

from ...exporting.engine_state import EngineState
from ...parsing.events import EngineStats, IterationStats, SpecDecodeStats, TransferStats
from ...parsing.stamps import utc
from ..reading.launches import Launch
from .connectors import SpecTotals, TransferTotals


class _Group:
    """Running totals of one group; interval values in compact arrays (months of logs fit)."""

    def __init__(self) -> None:
        self.launches: dict[int, Launch] = {}
        self.engines: dict[int | None, int | None] = {}  # engine -> engines_aggregated
        self.first: datetime | None = None
        self.last: datetime | None = None
        self._first_utc = self._last_utc = datetime.min  # `first` and `last` in UTC, once set
        self.lines = 0
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
        self.lines += 1
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
