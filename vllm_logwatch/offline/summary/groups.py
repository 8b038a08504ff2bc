"""The summary's running totals of one group (`_Group`; `summary/build.py` finishes them), fed a
record at a time (`add`): its intervals and the exporter's own token estimate (`EngineState.apply_stats`);
where the log has iteration lines (`add_step`), each interval's streams: its steps' mean generation requests.
"""

from __future__ import annotations

import math
import statistics
from array import array
from datetime import datetime

from ...exporting.engine_state import EngineState
from ...parsing.events import EngineStats, IterationStats, SpecDecodeStats, TransferStats
from ...parsing.stamps import utc
from ..reading.launches import Launch
from .connectors import SpecTotals, TransferTotals


class _Open:
    """The interval being summed: lines of one group at one timestamp, one per engine."""

    __slots__ = ("generation", "kv", "members", "prompt", "running", "streams", "time", "waiting")

    def __init__(self, time: datetime | None) -> None:
        self.time = time
        self.members: set[tuple[int, int | None]] = set()
        self.prompt = self.generation = 0.0
        self.running = self.waiting = 0
        self.kv: list[float] = []
        self.streams = math.nan


def _num(value: float | None) -> float:
    return value if value is not None and math.isfinite(value) else 0.0


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
        self.hits: dict[tuple[int, int | None], tuple[float | None, float | None]] = {}
        self.prompt = array("d")
        self.generation = array("d")
        self.running = array("q")
        self.waiting = array("q")
        self.kv = array("d")
        self.streams = array("d")
        """Per interval: its engines' steps' mean generation requests summed (NaN: no iteration line)."""
        self._steps: dict[tuple[int, int | None], tuple[int, int]] = {}
        """Per engine, its steps since its last stats line: how many, their generation requests summed."""
        self.open: _Open | None = None
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
        prefix, mm = e.prefix_cache_hit_rate_pct, e.mm_cache_hit_rate_pct
        if prefix is None or mm is None:
            before = self.hits.get(member, (None, None))
            prefix, mm = before[0] if prefix is None else prefix, before[1] if mm is None else mm
        self.hits[member] = (prefix, mm)
        cur = self.open
        if cur is None or t is None or cur.time != t or member in cur.members:
            self.close()
            cur = self.open = _Open(t)
        cur.members.add(member)
        steps, streams = self._steps.pop(member, (0, 0)) if self._steps else (0, 0)
        if steps:
            cur.streams = (0.0 if math.isnan(cur.streams) else cur.streams) + streams / steps
        cur.prompt += _num(e.prompt_throughput)
        cur.generation += _num(e.generation_throughput)
        cur.running += e.running or 0
        cur.waiting += e.waiting or 0
        kv = e.kv_cache_usage_pct
        if kv is not None and math.isfinite(kv):
            cur.kv.append(kv)

    def close(self) -> None:
        cur, self.open = self.open, None
        if cur is None:
            return
        self.prompt.append(cur.prompt)
        self.generation.append(cur.generation)
        self.running.append(cur.running)
        self.waiting.append(cur.waiting)
        self.streams.append(cur.streams)
        kv = cur.kv  # one engine's: its value (+ 0.0: `fmean`'s 0.0 for -0.0)
        self.kv.append((kv[0] + 0.0 if len(kv) == 1 else statistics.fmean(kv)) if kv else math.nan)
