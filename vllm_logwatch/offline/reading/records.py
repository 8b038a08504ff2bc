"""`logwatch summary`'s fast lane: the stats records of the common V1 line without a parser or a model.

The range workers (`offline/reading/ranges.py`, `rows.py`'s `Lane(values=True)`) read the common stats line
into eight numbers; here each row gets its time (the file's clock, once per hour of log) and becomes a
`FastStats`: a slotted record with the fields the summary and the per-engine token estimate read
(`offline/summary/groups.py`'s `_Group`, `exporting/engine_state.py`); with `blocks` (the summary's reader),
each run of such rows with no other line between them is one `FastBlock` instead: the rows as columns, added
to the summary in one call. Every other line the summary needs (other stats shapes, V0's prefix-cache line,
spec-decode and transfer lines, the start-up banner) goes through the general parser and its Assembler, at
its place. The summary is the general path's, field for field (tests/integration/test_fastsummary.py).
"""

from __future__ import annotations

import math
import operator
import re
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, tzinfo
from typing import Any, ClassVar, Literal

from ...parsing.assemble import Assembler
from ...parsing.events import Event, IterationStats, Unparsed
from ...parsing.line import parse_line
from ...parsing.needles import ITERATION_NEEDLES, PREFIX_NEEDLES, VARIANT_NEEDLES, WANTS
from ...parsing.shapes import HEADER, MFU_BODY, MFU_START
from ...parsing.stamps import YearClock
from .containers import enveloped_events
from .events import iter_source_events
from .inputs import Source, input_error, read_errors
from .ranges import Tuning, stream_chunks
from .route import opened, range_chunks, route
from .rows import ITERATION_LINE, STAMP, VALUES, Lane
from .stream import ScanStats

__all__ = ["FastBlock", "FastMfu", "FastStats", "FastSteps", "Step", "iter_fast_events", "source_records"]

_WANT = WANTS["launches"]
_NEEDLES = _WANT.needles
_ENVELOPE_NEEDLES = _NEEDLES + _WANT.followers  # a container log's: the followers too (containers.py)
_LANE = Lane(values=True, keep=_NEEDLES + VARIANT_NEEDLES + PREFIX_NEEDLES, followers=_WANT.followers)
_STEPS = replace(_LANE, keep=_LANE.keep + ITERATION_NEEDLES)
_EMPTY: dict[str, float] = {}
_MFU = re.compile(rf"{HEADER}{MFU_START}{MFU_BODY}\r?".encode())
"""vLLM's own MFU line, whole (`parsing/shapes.py`): between two stats rows, the summary takes it as it
is (`_deferred_mfu`)."""
_MINUTE_SECOND = {f"{m:02d}:{s:02d}".encode(): timedelta(minutes=m, seconds=s)
                  for m in range(60) for s in range(60)}
"""A stamp's `MM:SS` -> the time since its hour's start."""


class FastStats:
    """A common V1 stats line as the summary and the backfill's exporter state read it (`EngineStats`'
    fields of that shape)."""

    __slots__ = ("engine", "generation_throughput", "kv_cache_usage_pct", "mm_cache_hit_rate_pct", "pid",
                 "prefix_cache_hit_rate_pct", "prompt_throughput", "running", "time", "waiting")
    kind: ClassVar[Literal["stats"]] = "stats"
    engines_aggregated: ClassVar[None] = None
    swapped: ClassVar[None] = None
    extra: ClassVar[dict[str, float]] = _EMPTY
    is_v0: ClassVar[bool] = False
    unknown_fields: ClassVar[int] = 0

    def __init__(self, time: datetime | None, values: tuple[float, ...], pid: int | None = None) -> None:
        self.pid = pid
        engine, self.prompt_throughput, self.generation_throughput, running, waiting, \
            self.kv_cache_usage_pct, prefix, mm = values
        self.time, self.engine, self.running, self.waiting = time, int(engine), int(running), int(waiting)
        self.prefix_cache_hit_rate_pct = None if math.isnan(prefix) else prefix
        self.mm_cache_hit_rate_pct = None if math.isnan(mm) else mm


class FastSteps:
    """vLLM's common iteration lines of a chunk, as columns of the fields the summary's step tables read
    (`IterationStats`'), read by the range workers' pattern (`rows.ITERATION_LINE`) without a parser:
    the summary adds them in one call (`offline/summary/steps.py`)."""

    __slots__ = ("context_requests", "context_tokens", "dummy", "elapsed_ms", "engine", "generation_requests",
                 "kv_cache_usage_pct")
    kind: ClassVar[Literal["steps"]] = "steps"

    def __init__(self, matches: list[re.Match[bytes]]) -> None:
        # The groups after the header's two: engine, context requests and tokens, generation requests,
        # elapsed ms, ` (dummy)`, KV usage (`shapes.ITERATION_BODY`).
        engine, ctx, ctok, gen, ms, dummy, kv = zip(*(m.group(3, 5, 6, 7, 9, 10, 12) for m in matches),
                                                    strict=True)
        self.engine = [None if e is None else int(e) for e in engine]
        self.context_requests: list[int] = list(map(int, ctx))
        self.context_tokens: list[int] = list(map(int, ctok))
        self.generation_requests: list[int] = list(map(int, gen))
        self.elapsed_ms: list[float] = list(map(float, ms))
        self.dummy = [d is not None for d in dummy]
        self.kv_cache_usage_pct = [math.nan if k is None else float(k) for k in kv]

    def __len__(self) -> int:
        return len(self.engine)


Step = IterationStats | FastSteps
"""The step records of the summary's pass: vLLM's common lines read here, any other by the parser."""


class FastMfu:
    """vLLM's own MFU lines that sat alone among a run of stats rows, as columns (`MfuStats`' numbers):
    the summary adds them in one call."""

    __slots__ = ("engine", "gbps", "tflops")
    kind: ClassVar[Literal["mfu"]] = "mfu"

    def __init__(self) -> None:
        self.engine: list[int] = []
        self.tflops: list[float] = []
        self.gbps: list[float] = []

    def __len__(self) -> int:
        return len(self.engine)


class FastBlock:
    """A run of common V1 stats lines with nothing between them, as columns (`iter_fast_events(...,
    blocks=True)`): what the summary adds in one call (`offline/summary/groups.py`). NaN for a missing
    hit rate; `record(i)` is line i as a `FastStats`."""

    __slots__ = ("engine", "generation", "kv", "mm", "pids", "prefix", "prompt", "running", "times", "values",
                 "waiting")

    def __init__(self, times: list[datetime | None], values: array[float],
                 writers: Sequence[bytes] = ()) -> None:
        self.times, self.values = times, values
        pids = {w: _pid(w) for w in set(writers)}
        self.pids = list(map(pids.__getitem__, writers)) if writers else [None] * len(times)
        self.engine = list(map(int, values[0::VALUES]))
        self.prompt, self.generation = values[1::VALUES], values[2::VALUES]
        self.running = list(map(int, values[3::VALUES]))
        self.waiting = list(map(int, values[4::VALUES]))
        self.kv, self.prefix, self.mm = values[5::VALUES], values[6::VALUES], values[7::VALUES]

    def __len__(self) -> int:
        return len(self.times)

    def record(self, i: int) -> FastStats:
        return FastStats(self.times[i], tuple(self.values[i * VALUES:(i + 1) * VALUES]), self.pids[i])

    def records(self) -> Iterator[FastStats]:
        return (self.record(i) for i in range(len(self.times)))


class _Times:
    """Stamps to datetimes through the file's clock; the hour's datetime is made once and reused for
    its other stamps unless the hour has a daylight-saving step (as `csv_rows.py` does for ISO text)."""

    def __init__(self, clock_for: Callable[[str], YearClock]) -> None:
        self.clock_for = clock_for
        self._hours: dict[bytes, tuple[int, datetime]] = {}

    def __call__(self, stamp: bytes) -> datetime | None:
        text = stamp.decode()
        clock = self.clock_for(text)
        hit = self._hours.get(stamp[:8])
        if hit is not None and hit[0] == clock.year:
            try:
                return hit[1].replace(minute=int(stamp[9:11]), second=int(stamp[12:14]))
            except ValueError:
                return clock.to_datetime(text)
        value = clock.to_datetime(text)
        if value is not None and clock.steady_hour(value):
            self._hours[stamp[:8]] = (clock.year, value)
        return value

    def many(self, stamps: bytes, start: int, end: int) -> list[datetime | None]:
        """`[self(stamp) for ...]` for the stamps `start` to `end` of `stamps` (`STAMP` bytes each): the
        rows after one in the same steady hour are its hour's datetime plus their minutes and seconds."""
        out: list[datetime | None] = []
        put, hours, table, i = out.append, self._hours, _MINUTE_SECOND, start
        while i < end:
            stamp = stamps[i * STAMP:(i + 1) * STAMP]
            put(self(stamp))
            i += 1
            hour = stamp[:8]
            hit = hours.get(hour)
            if hit is None or hit[0] != self.clock_for(stamp.decode()).year:
                continue
            base = hit[1]
            if base.fold:
                continue
            top = base.replace(minute=0, second=0)  # + minutes and seconds: `replace`'s datetime, faster
            while i < end:
                at = i * STAMP
                since_top = table.get(stamps[at + 9:at + 14])
                if since_top is None or stamps[at:at + 8] != hour:
                    break  # another hour, or a stamp for the general call
                put(top + since_top)
                i += 1
        return out


def source_records(
    source: Source, zone: tzinfo, year: int | None, scan: ScanStats, tuning: Tuning | None, *,
    blocks: bool = False, numbers: bool = True, steps: bool = False,
) -> Iterator[Event | FastStats | FastBlock | FastMfu | FastSteps]:
    """The records summary, compare, plot and the backfill read of one source, by its route
    (`route.py`): `iter_fast_events` on the fast routes, else the general parser's
    (`iter_source_events(source, "launches", ...)`); with `steps`, the iteration lines' records too."""
    way = route(source, tuning)
    if way == "general" or tuning is None:
        return iter_source_events(source, "launches", zone, year, scan, ITERATION_NEEDLES if steps else (),
                                  repeats=True)
    return iter_fast_events(source, zone, year, scan, tuning, way == "ranges", blocks=blocks, numbers=numbers,
                            steps=steps)


def iter_fast_events(source: Source, zone: tzinfo, year: int | None, scan: ScanStats,
                     tuning: Tuning, ranges: bool, *, blocks: bool = False, numbers: bool = True,
                     steps: bool = False) -> Iterator[Event | FastStats | FastBlock | FastMfu | FastSteps]:
    """What `iter_source_events(source, "spec", zone, year, scan, LAUNCH_NEEDLES, repeats=True)` yields, in
    file order (`ranges`: by the range workers, else streamed in this process), with a `FastStats` in place of
    each common stats line's `EngineStats` (with `blocks`, a `FastBlock` in place of each run of them, then a
    `FastMfu` of the MFU lines that sat alone among its rows). Without `numbers`, a big file's lines are not
    counted: the events' `line` is not theirs (`Lane.numbers`), for a reader that uses none. With `steps`,
    the iteration lines too: vLLM's common ones as a `FastSteps` a chunk (with `blocks`), any other as the
    parser's `IterationStats`."""
    path = None if source.is_stdin else source.path
    clock: list[YearClock] = []

    def clock_for(stamp: str) -> YearClock:
        if not clock:
            clock.append(YearClock.for_source(path, zone, year, first_stamp=stamp))
        return clock[0]

    assembler = Assembler(source.name, clock_for, repeats=True)
    times = _Times(clock_for)
    try:
        needles = _NEEDLES + ITERATION_NEEDLES if steps else _NEEDLES
        lane = _STEPS if steps else _LANE
        if ranges:
            lane = lane if numbers else replace(lane, numbers=False)
            yield from _rows(range_chunks(source, needles, scan, tuning, lane), assembler, times, blocks)
        else:
            with opened(source) as (raw, fmt):
                if fmt != "plain":  # a container log on a stream: the general parser (route.py)
                    envelope = _ENVELOPE_NEEDLES + ITERATION_NEEDLES if steps else _ENVELOPE_NEEDLES
                    yield from enveloped_events(raw, fmt, assembler, scan, envelope)
                else:
                    yield from _rows(stream_chunks(raw, scan, lane=lane, needles=needles),
                                     assembler, times, blocks)
        yield from assembler.flush()
    except read_errors as exc:
        raise input_error(exc, source) from None


def _rows(chunks: Iterator[tuple[Any, int]], assembler: Assembler, times: _Times,
          blocks: bool) -> Iterator[Event | FastStats | FastBlock | FastMfu | FastSteps]:
    latest = b""  # the latest stamp of a row so far (`_repeats`)
    for chunk, base in chunks:
        numbers, other_numbers, positions, values = array("Q"), array("Q"), array("Q"), array("d")
        numbers.frombytes(chunk.numbers)
        other_numbers.frombytes(chunk.other_numbers)
        positions.frombytes(chunk.positions)
        values.frombytes(chunk.values)
        others = chunk.others.split(b"\n") if other_numbers else []
        mfu: list[_Mfu] = []
        steps: FastSteps | None = None
        if blocks and others:
            others, other_numbers, positions, steps = _deferred_steps(others, other_numbers, positions)
            others, other_numbers, positions, mfu = _deferred_mfu(others, other_numbers, positions)
        m, n_mfu = 0, len(mfu)
        stamps, j, n_pos = chunk.stamps, 0, len(positions)
        processes = chunk.tails.split(b"\n") if numbers else []
        seen, start, n = assembler.stats_seen, 0, len(processes)
        while start < n:  # the lines before row `start`, then its run of rows up to the next such line
            while j < n_pos and positions[j] == start:
                yield from _slow(assembler, others[j], base + other_numbers[j])
                j += 1
            if assembler.pending:
                yield from assembler.flush()
            end = min(positions[j], n) if j < n_pos else n
            dropped, latest = _repeats(assembler, stamps, values, processes, start, end, latest)
            for i in dropped:
                yield Unparsed(what="duplicate", file=assembler.file, line=base + numbers[i])
            # Each process's lines, as `seen` line by line leaves them: its last line's engine.
            for process, i in dict(zip(processes[start:end], range(start, end), strict=True)).items():
                seen(process.decode() if process else None, int(values[i * VALUES]))
            if blocks and dropped:
                kept = sorted(set(range(start, end)) - set(dropped))
                if kept:
                    kept_values = array("d", (v for i in kept for v in values[i * VALUES:(i + 1) * VALUES]))
                    yield FastBlock([times(stamps[i * STAMP:(i + 1) * STAMP]) for i in kept], kept_values,
                                    [processes[i] for i in kept])
            elif blocks:
                yield FastBlock(times.many(stamps, start, end), values[start * VALUES:end * VALUES],
                                processes[start:end])
                if m < n_mfu and mfu[m][0] <= end:
                    run = FastMfu()
                    while m < n_mfu and mfu[m][0] <= end:
                        _, engine, tflops, gbps = mfu[m]
                        run.engine.append(engine)
                        run.tflops.append(tflops)
                        run.gbps.append(gbps)
                        m += 1
                    yield run
            else:
                skip = set(dropped)
                for i in range(start, end):
                    if i in skip:
                        continue
                    yield FastStats(times(stamps[i * STAMP:(i + 1) * STAMP]),
                                    tuple(values[i * VALUES:(i + 1) * VALUES]), _pid(processes[i]))
            start = end
        if m < n_mfu:  # a chunk without stats rows
            run = FastMfu()
            for _, engine, tflops, gbps in mfu[m:]:
                run.engine.append(engine)
                run.tflops.append(tflops)
                run.gbps.append(gbps)
            yield run
        for k in range(j, n_pos):
            yield from _slow(assembler, others[k], base + other_numbers[k])
        if steps is not None:
            yield steps


def _repeats(assembler: Assembler, stamps: bytes, values: Any, processes: list[bytes], start: int, end: int,
             latest: bytes) -> tuple[list[int], bytes]:
    """The rows `start` to `end` that repeat the last stats line of their process and engine (the same
    stamp and numbers: `Assembler.repeated`, the rule `feed` applies to the parser's lines), and the
    latest stamp so far. A row stamped after every row before it repeats none: when the run's stamps
    rise row after row from `latest` (one engine's log), only each process and engine's last row is
    noted; else every row is looked at."""
    run = [stamps[i * STAMP:(i + 1) * STAMP] for i in range(start, end)]
    rising = run[0] > latest and all(map(operator.lt, run, run[1:]))
    rows = (dict(zip(zip(processes[start:end], values[start * VALUES:end * VALUES:VALUES], strict=True),
                     range(start, end), strict=True)).values() if rising else range(start, end))
    dropped = []
    for i in rows:
        process, at = processes[i], i * VALUES
        numbers = tuple(v if v == v else None for v in values[at + 1:at + VALUES])  # NaN: none
        line = (run[i - start], numbers)
        if assembler.repeated(process.decode() if process else None, int(values[at]), line):
            dropped.append(i)
    return dropped, max(latest, max(run))


def _pid(writer: bytes) -> int | None:
    """The pid of a row's writer (`Name pid=N`, `parsing/assemble.py` `who`), None without one."""
    return int(writer[writer.rfind(b"=") + 1:]) if writer else None


_Mfu = tuple[int, int, float, float]


def _deferred_steps(others: list[bytes], numbers: Any,
                    positions: Any) -> tuple[list[bytes], Any, Any, FastSteps | None]:
    """vLLM's common iteration lines, taken out of `others` as columns so that they do not cut the runs
    of stats rows (a step counts for its file's tables whatever its place); any other iteration line
    stays, for the parser."""
    keep, matches, needle, line = [], [], ITERATION_NEEDLES[0], ITERATION_LINE
    for k, raw in enumerate(others):
        m = line.fullmatch(raw + b"\n") if needle in raw else None
        if m is None:
            keep.append(k)
        else:
            matches.append(m)
    if not matches:
        return others, numbers, positions, None
    return ([others[k] for k in keep], array("Q", (numbers[k] for k in keep)),
            array("Q", (positions[k] for k in keep)), FastSteps(matches))


def _deferred_mfu(others: list[bytes], numbers: Any,
                  positions: Any) -> tuple[list[bytes], Any, Any, list[_Mfu]]:
    """The MFU lines that sit alone between stats rows, taken out of `others` as (position, engine,
    TF/s, GB/s) so that they do not cut the run of rows (`_rows` yields them after it: an MFU line
    counts for its launch whatever its place among that launch's stats lines). An MFU line that shares
    its place with another line, or is not vLLM's own shape, stays where it is."""
    alone = _counts(positions)
    keep, mfu = [], []
    for k, raw in enumerate(others):
        m = _MFU.fullmatch(raw) if alone[positions[k]] == 1 and b"MFU: " in raw else None
        if m is None or m.group(3) is None:  # the Rust front end's: no engine
            keep.append(k)
        else:
            mfu.append((positions[k], int(m.group(3)), float(m.group(4)), float(m.group(5))))
    if not mfu:
        return others, numbers, positions, mfu
    return ([others[k] for k in keep], array("Q", (numbers[k] for k in keep)),
            array("Q", (positions[k] for k in keep)), mfu)


def _counts(positions: Any) -> dict[int, int]:
    out: dict[int, int] = {}
    for p in positions:
        out[p] = out.get(p, 0) + 1
    return out


def _slow(assembler: Assembler, raw: bytes, number: int) -> list[Event]:
    """A line the workers did not render: the general parser, and the Assembler."""
    event = parse_line(raw.decode("utf-8", "replace"))
    return assembler.feed(event, number) if event is not None else []
