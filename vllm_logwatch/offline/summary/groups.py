"""The summary's running totals of one group (`_Group`; `summary/build.py` finishes them), fed a
record at a time (`add`) or, from the fast lane, a run of common stats lines as columns in one call
(`add_block`, a `FastBlock` of `reading/records.py`).

Both do the same arithmetic: the same intervals, the same token estimate (the exporter's own,
`EngineState.apply_stats` and `apply_stats_run`), the same additions in the same order; only the
per-line records and calls are gone (tests/integration/test_fastsummary.py: both paths print the
same bytes).
"""

from __future__ import annotations

import math
import statistics
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import repeat
from operator import add
from typing import TypeVar, cast

from ...exporting.engine_state import EngineState
from ...parsing.events import EngineStats, SpecDecodeStats, TransferStats
from ...parsing.stamps import utc
from ..reading.launches import Launch
from ..reading.records import FastBlock
from .connectors import SpecTotals, TransferTotals

__all__ = ["add_block"]

T = TypeVar("T")


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

    def add_block(self, launch: Launch, block: FastBlock, rows: Sequence[int]) -> None:
        """`add` for the lines `rows` of `block`."""
        add_block(self, launch, block, rows)

    def close(self) -> None:
        cur, self.open = self.open, None
        if cur is None:
            return
        self.prompt.append(cur.prompt)
        self.generation.append(cur.generation)
        self.running.append(cur.running)
        self.waiting.append(cur.waiting)
        self.kv.append(statistics.fmean(cur.kv) if cur.kv else math.nan)


def add_block(g: _Group, launch: Launch, block: FastBlock, rows: Sequence[int]) -> None:
    """`g.add(launch, e)` for each line `rows` (indexes, in file order) of `block`."""
    times, engines, pids = block.times, block.engine, block.pids
    li = launch.index
    g.launches.setdefault(li, launch)
    whole = len(rows) == len(block)  # rows: every line, in order
    # Each engine's lines in runs of one process's, in order (two servers writing one log interleave
    # theirs: each has its own windows, `EngineState.writers`).
    by_run: list[tuple[int, Sequence[int] | None]] = []  # None: every line
    if whole and len(set(engines)) == 1 and len(set(pids)) == 1:
        by_run.append((engines[0], None))
    else:
        runs: dict[int, tuple[int | None, list[int]]] = {}  # engine -> its open run's pid and lines
        for i in rows:
            run = runs.get(engines[i])
            if run is None or run[0] != pids[i]:
                run = runs[engines[i]] = (pids[i], [])
                by_run.append((engines[i], run[1]))
            run[1].append(i)
    for engine, idx in by_run:
        g.engines.setdefault(engine, None)
        member = (li, engine)
        pick = _picker(idx)
        g._estimate(member).apply_stats_run(
            pick(times), pick(block.prompt), pick(block.generation),
            cast(EngineStats, block.record(len(block) - 1 if idx is None else idx[-1])), 0.0)
        prefix, mm = g.hits.get(member, (None, None))
        g.hits[member] = (_last_number(pick(block.prefix), prefix), _last_number(pick(block.mm), mm))
    g.lines += len(rows)
    g.stretch([t for t in (times if whole else [times[i] for i in rows]) if t is not None])
    if len(by_run) == 1 and (g.open is None or (li, engines[rows[0]]) in g.open.members):
        _one_member_intervals(g, li, block, rows, whole)
    else:
        _intervals(g, li, block, rows)


def _picker(idx: Sequence[int] | None) -> Callable[[Sequence[T]], Sequence[T]]:
    if idx is None:
        return lambda column: column
    return lambda column: [column[i] for i in idx]


def _last_number(values: Sequence[float], default: float | None) -> float | None:
    """The last value that is not NaN, else `default`."""
    for value in reversed(values):
        if value == value:
            return value
    return default


def _one_member_intervals(g: _Group, li: int, block: FastBlock, rows: Sequence[int], whole: bool) -> None:
    """`_intervals` when every line is one engine's that the open interval (if any) already holds:
    each line closes the interval before it, so each is an interval of its own (column at a time)."""
    g.close()
    pick = _picker(None if whole else rows)
    prompts = _summed(pick(block.prompt), 0.0)
    generations = _summed(pick(block.generation), 0.0)
    kvs = _summed(pick(block.kv), math.nan)
    running, waiting = pick(block.running), pick(block.waiting)
    g.prompt.extend(prompts[:-1])
    g.generation.extend(generations[:-1])
    g.running.extend(running[:-1])
    g.waiting.extend(waiting[:-1])
    g.kv.extend(kvs[:-1])
    last = rows[-1]
    kv = block.kv[last]  # the open interval holds the raw value, as `add` keeps it
    g.open = _Open(block.times[last], {(li, block.engine[last])}, prompts[-1], generations[-1],
                   running[-1], waiting[-1], [kv] if math.isfinite(kv) else [])


def _summed(values: Sequence[float], missing: float) -> Sequence[float]:
    """Each value as an interval of one line holds it: summed from 0.0 (`_num`: NaN and infinities
    count as 0; kv: none) and as `fmean` of one value, which are both `0.0 + value` (-0.0 is 0.0)."""
    if math.isfinite(sum(values)):  # no NaN nor infinity among them
        return array("d", map(add, values, repeat(0.0)))
    return [v + 0.0 if v - v == 0.0 else missing for v in values]


def _intervals(g: _Group, li: int, block: FastBlock, rows: Sequence[int]) -> None:
    """The lines into intervals (`_Group.add`'s second half), the open one kept in locals."""
    times, engines = block.times, block.engine
    prompts, generations, kvs = block.prompt, block.generation, block.kv
    running, waiting = block.running, block.waiting
    put_p, put_g, put_r, put_w, put_k = (g.prompt.append, g.generation.append, g.running.append,
                                         g.waiting.append, g.kv.append)
    isfinite, fmean, nan = math.isfinite, statistics.fmean, math.nan
    cur = g.open
    have = cur is not None
    if cur is not None:
        ct, members, cp, cg, cr, cw, ckv = cur.time, cur.members, cur.prompt, cur.generation, \
            cur.running, cur.waiting, cur.kv
    else:
        ct, members, cp, cg, cr, cw, ckv = None, set(), 0.0, 0.0, 0, 0, []
    for i in rows:
        t = times[i]
        member = (li, engines[i])
        if not have or t is None or ct != t or member in members:
            if have:
                put_p(cp)
                put_g(cg)
                put_r(cr)
                put_w(cw)
                put_k((ckv[0] + 0.0 if len(ckv) == 1 else fmean(ckv)) if ckv else nan)  # fmean([-0.0]): 0.0
            have, ct, members, cp, cg, cr, cw, ckv = True, t, set(), 0.0, 0.0, 0, 0, []
        members.add(member)
        p, gen, kv = prompts[i], generations[i], kvs[i]
        cp += p if isfinite(p) else 0.0
        cg += gen if isfinite(gen) else 0.0
        cr += running[i]
        cw += waiting[i]
        if isfinite(kv):
            ckv.append(kv)
    g.open = _Open(ct, members, cp, cg, cr, cw, ckv) if have else None
