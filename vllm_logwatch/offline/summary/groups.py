"""The summary's running totals of one group (`_Group`; `summary/build.py` finishes them), fed a
record at a time (`add`): its intervals and the exporter's own token estimate (`EngineState.apply_stats`).
"""

from __future__ import annotations

import math
import statistics
from array import array
from dataclasses import dataclass, field
from datetime import datetime

from ...exporting.engine_state import EngineState
from ...parsing.events import EngineStats, SpecDecodeStats, TransferStats
from ...parsing.stamps import utc
from ..reading.launches import Launch
from .connectors import SpecTotals, TransferTotals


@dataclass
class _Open:
    """The interval being summed: lines of one group at one timestamp, one per engine."""

    time: datetime | None
    members: set[tuple[int, int | None]]
    prompt: float = 0.0
    generation: float = 0.0
    running: int = 0
    waiting: int = 0
    kv: list[float] = field(default_factory=list)


def _num(value: float | None) -> float:
    return value if value is not None and math.isfinite(value) else 0.0


class _Group:
    """Running totals of one group; interval values in compact arrays (months of logs fit)."""

    def __init__(self) -> None:
        self.launches: dict[int, Launch] = {}
        self.engines: dict[int | None, int | None] = {}  # engine -> engines_aggregated
        self.first: datetime | None = None
        self.last: datetime | None = None
        self.lines = 0
        self.estimates: dict[tuple[int, int | None], EngineState] = {}
        self.hits: dict[tuple[int, int | None], tuple[float | None, float | None]] = {}
        self.prompt = array("d")
        self.generation = array("d")
        self.running = array("q")
        self.waiting = array("q")
        self.kv = array("d")
        self.open: _Open | None = None
        self.spec = SpecTotals()
        self.transfers = TransferTotals()

    def _estimate(self, member: tuple[int, int | None]) -> EngineState:
        estimate = self.estimates.get(member)
        if estimate is None:
            estimate = self.estimates[member] = EngineState()
        return estimate

    def stretch(self, stamped: list[datetime]) -> None:
        """`first` and `last` over `stamped` too: ordered by their wall clocks, unless one is on the second
        pass of a fall-back's repeated hour (`fold`), where wall clocks go back: then in UTC."""
        if not stamped:
            return
        key = utc if any(t.fold for t in stamped) else None
        low, high = min(stamped, key=key), max(stamped, key=key)
        self.first = low if self.first is None or utc(low) < utc(self.first) else self.first
        self.last = high if self.last is None or utc(high) > utc(self.last) else self.last

    def add_spec(self, launch: Launch, e: SpecDecodeStats) -> None:
        self.spec.add(e, self._estimate((launch.index, e.engine)))

    def add_transfer(self, launch: Launch, e: TransferStats) -> None:
        self.transfers.add(e, self._estimate((launch.index, e.engine)))

    def add(self, launch: Launch, e: EngineStats) -> None:
        member = (launch.index, e.engine)
        self.launches.setdefault(launch.index, launch)
        self.engines.setdefault(e.engine, e.engines_aggregated)
        self.lines += 1
        if e.time is not None:
            self.stretch([e.time])
        # The live exporter's own per-engine state: the same token estimate (throughput x interval).
        self._estimate(member).apply_stats(e, 0.0)
        prefix, mm = self.hits.get(member, (None, None))
        self.hits[member] = (
            e.prefix_cache_hit_rate_pct if e.prefix_cache_hit_rate_pct is not None else prefix,
            e.mm_cache_hit_rate_pct if e.mm_cache_hit_rate_pct is not None else mm,
        )
        cur = self.open
        if cur is None or e.time is None or cur.time != e.time or member in cur.members:
            self.close()
            cur = self.open = _Open(e.time, set())
        cur.members.add(member)
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
        self.kv.append(statistics.fmean(cur.kv) if cur.kv else math.nan)
