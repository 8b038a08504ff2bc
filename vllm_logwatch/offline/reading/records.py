"""The records of every offline reader (summary, compare, plot, `parse`) without the parser for
vLLM's common V1 stats line: the range workers (`offline/reading/ranges.py`, `rows.py`) read it with the
parser's own pattern into eight numbers and its header's words; here
each row gets its time (the file's clock, once per hour of log), its file and line, and becomes the
parser's own `EngineStats` (`events.stats_record`). Every other line (other stats shapes, V0's
prefix-cache line, spec-decode, transfer, MFU and iteration lines, the start-up banner) goes through the
general parser and its Assembler, at its place.
"""

from __future__ import annotations

import operator
from array import array
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta, tzinfo
from typing import Any

from ...parsing.assemble import Assembler
from ...parsing.events import Event, Unparsed, stats_record
from ...parsing.needles import ITERATION_NEEDLES, PREFIX_NEEDLES, VARIANT_NEEDLES, WANTS, Want
from ...parsing.stamps import YearClock
from .containers import enveloped_events
from .events import iter_source_events
from .inputs import Source, input_error, read_errors
from .ranges import Tuning, stream_chunks
from .route import opened, range_chunks, route
from .rows import STAMP, VALUES, Lane

__all__ = ["source_records"]


class _SinceHour(dict[str, timedelta | None]):
    """A stamp's `MM:SS` -> the time since its hour's start (None: not a minute and a second), each
    made at its first stamp: a command reading a few lines makes a few, not 3,600."""

    def __missing__(self, key: str) -> timedelta | None:
        minute, second = key[:2], key[3:]
        digits = minute + second
        whole = key[2:3] == ":" and len(digits) == 4 and digits.isascii() and digits.isdigit()
        if not whole or minute > "59" or second > "59":
            return None
        self[key] = since = timedelta(minutes=int(minute), seconds=int(second))
        return since


_MINUTE_SECOND = _SinceHour()
Tail = tuple[bytes, str | None, int | None, str, str]
"""A row's tail (`rows.Chunk.tails`) read: its process (`Name pid=N`, empty: none), the name and the pid,
the level and the KV cache's device."""


class _Times:
    """Stamps to datetimes through the file's clock; the hour's datetime is made once and reused for
    its other stamps unless the hour has a daylight-saving step:
    a stamp after one of the same steady hour is that hour's start plus its minutes and seconds."""

    def __init__(self, clock_for: Callable[[str], YearClock]) -> None:
        self.clock_for = clock_for
        self._hours: dict[str, tuple[int, datetime]] = {}
        self._hour, self._top = "", datetime.min  # the last stamp's steady hour ("" none) and its start

    def __call__(self, stamp: str) -> datetime | None:
        if stamp[:8] == self._hour:
            since = _MINUTE_SECOND[stamp[9:14]]
            if since is not None:
                return self._top + since
        value = self._time(stamp)
        hit = self._hours.get(stamp[:8])
        if hit is not None and hit[0] == self.clock_for(stamp).year and not hit[1].fold:
            self._hour, self._top = stamp[:8], hit[1].replace(minute=0, second=0)
        else:
            self._hour = ""
        return value

    def _time(self, stamp: str) -> datetime | None:
        clock = self.clock_for(stamp)
        hit = self._hours.get(stamp[:8])
        if hit is not None and hit[0] == clock.year:
            try:
                return hit[1].replace(minute=int(stamp[9:11]), second=int(stamp[12:14]))
            except ValueError:
                return clock.to_datetime(stamp)
        value = clock.to_datetime(stamp)
        if value is not None and clock.steady_hour(value):
            self._hours[stamp[:8]] = (clock.year, value)
        return value


def source_records(
    source: Source, zone: tzinfo, year: int | None, tuning: Tuning | None, *,
    kind: str = "launches", numbers: bool = True, steps: bool = False,
) -> Iterator[Event]:
    """What `iter_source_events(source, kind, zone, year)` yields of one source (with `steps`, the
    iteration lines' records too; a stats line written twice counted once for `launches`, the readers
    that count lines), in file order: on the routes of the range workers (`route.py`; `ranges`: on every
    core, `stream`: in this process) each common stats line's `EngineStats` made from the workers'
    numbers. `kind`: `launches` (the summary's lines), `stats` or `iterations` (`parse`). Without
    `numbers`, a big file's lines are not counted: the events' `line` is not theirs (`Lane.numbers`),
    for a reader that uses none."""
    way = route(source, tuning)
    repeats = kind == "launches"
    if way == "general" or tuning is None:
        return iter_source_events(source, kind, zone, year, ITERATION_NEEDLES if steps else (),
                                  repeats=repeats)
    want = WANTS[kind]
    if steps:
        want = Want(want.needles + ITERATION_NEEDLES, want.followers)
    return _routed(source, zone, year, tuning, way == "ranges", numbers, want, repeats)


def _routed(source: Source, zone: tzinfo, year: int | None, tuning: Tuning, ranges: bool,
            numbers: bool, want: Want, repeats: bool) -> Iterator[Event]:
    path = None if source.is_stdin else source.path
    clock: list[YearClock] = []

    def clock_for(stamp: str) -> YearClock:
        if not clock:
            clock.append(YearClock.for_source(path, zone, year, first_stamp=stamp))
        return clock[0]

    assembler = Assembler(source.name, clock_for, repeats=repeats)
    times = _Times(clock_for)
    needles = want.needles
    lane = Lane(keep=needles + VARIANT_NEEDLES + PREFIX_NEEDLES, followers=want.followers, numbers=numbers)
    try:
        if ranges:
            yield from _rows(range_chunks(source, needles, tuning, lane), assembler, times)
        else:
            with opened(source) as (raw, fmt):
                if fmt != "plain":  # a container log on a stream: the general parser (route.py)
                    yield from enveloped_events(raw, fmt, assembler, needles + want.followers)
                else:
                    yield from _rows(stream_chunks(raw, lane=lane, needles=needles), assembler, times)
        yield from assembler.flush()
    except read_errors as exc:
        raise input_error(exc, source) from None


def _rows(chunks: Iterator[tuple[Any, int]], assembler: Assembler, times: _Times) -> Iterator[Event]:
    """The events of the chunks' lines in file order: each row the record the parser and the Assembler
    make of its line (`events.stats_record`), each other line through them (`_slow`)."""
    file = assembler.file
    known: dict[bytes, Tail] = {}  # the few distinct tails, each read once
    for chunk, base in chunks:
        numbers, other_numbers, positions, values = array("Q"), array("Q"), array("Q"), array("d")
        numbers.frombytes(chunk.numbers)
        other_numbers.frombytes(chunk.other_numbers)
        positions.frombytes(chunk.positions)
        values.frombytes(chunk.values)
        others = chunk.others.split(b"\n") if other_numbers else []
        stamps, j, n_pos = chunk.stamps.decode(), 0, len(positions)  # ASCII: `MM-DD HH:MM:SS` each
        tails = [known.get(t) or _tail(known, t) for t in chunk.tails.split(b"\n")] if numbers else []
        processes = [tail[0] for tail in tails]
        rows = zip(*[iter(values)] * VALUES, strict=True)  # each row's numbers, taken run after run
        seen, start, n = assembler.stats_seen, 0, len(tails)
        while start < n:  # the lines before row `start`, then its run of rows up to the next such line
            while j < n_pos and positions[j] == start:
                yield from _slow(assembler, others[j], base + other_numbers[j])
                j += 1
            if assembler.pending:
                yield from assembler.flush()
            end = min(positions[j], n) if j < n_pos else n
            run = [stamps[i * STAMP:(i + 1) * STAMP] for i in range(start, end)]
            dropped = _repeats(assembler, run, values, processes, start, end) if assembler.repeats else set()
            for i in sorted(dropped):
                yield Unparsed(what="duplicate", file=file, line=base + numbers[i])
            # Each process's lines, as `seen` line by line leaves them: its last line's engine.
            for process, i in dict(zip(processes[start:end], range(start, end), strict=True)).items():
                seen(process.decode() if process else None, int(values[i * VALUES]))
            for i, stamp, row, tail in zip(range(start, end), run, rows, tails[start:end], strict=False):
                if dropped and i in dropped:
                    continue
                engine, prompt, generation, running, waiting, kv, prefix, mm = row
                _, name, pid, level, device = tail
                yield stats_record(times(stamp), file, base + numbers[i], stamp, level, name, int(engine),
                                   prompt, generation, int(running), int(waiting), device, kv,
                                   None if prefix != prefix else prefix,  # NaN: not printed
                                   None if mm != mm else mm, pid)
            start = end
        for k in range(j, n_pos):
            yield from _slow(assembler, others[k], base + other_numbers[k])


def _tail(known: dict[bytes, Tail], tail: bytes) -> Tail:
    """A row's tail (`Name pid=N LEVEL DEVICE`) read, and kept in `known` (a few at a time)."""
    if len(known) >= 64:
        known.clear()
    process, level, device = tail.rsplit(b" ", 2)
    name, pid = ((process[:process.find(b" ")].decode(), int(process[process.rfind(b"=") + 1:]))
                 if process else (None, None))
    known[tail] = found = (process, name, pid, level.decode(), device.decode())
    return found


def _repeats(assembler: Assembler, run: list[str], values: Any, processes: list[bytes], start: int,
             end: int) -> set[int]:
    """The rows `start` to `end` (stamped `run`) that repeat the last stats line of their process and
    engine (the same stamp and numbers: `Assembler.repeated`, the rule `feed` applies to the parser's
    lines). When the run's stamps rise row after row, a row can repeat only a line before the run: only
    each process and engine's first row is looked at, and its last one noted; else every row is."""
    span = range(start, end)
    rows: Iterable[int] = span
    if all(map(operator.lt, run, run[1:])):
        keys = list(zip(processes[start:end], values[start * VALUES:end * VALUES:VALUES], strict=True))
        first = dict(zip(reversed(keys), reversed(span), strict=True))
        last = dict(zip(keys, span, strict=True))
        rows = sorted({*first.values(), *last.values()})
    dropped = set()
    for i in rows:
        process, at = processes[i], i * VALUES
        numbers = tuple(v if v == v else None for v in values[at + 1:at + VALUES])  # NaN: none
        line = (run[i - start], numbers)
        if assembler.repeated(process.decode() if process else None, int(values[at]), line):
            dropped.add(i)
    return dropped


def _slow(assembler: Assembler, raw: bytes, number: int) -> list[Event]:
    """A line the workers did not render: the general parser (imported at its first line: a log of
    vLLM's common stats lines alone needs none of its patterns), and the Assembler."""
    from ...parsing.line import parse_line

    event = parse_line(raw.decode("utf-8", "replace"))
    return assembler.feed(event, number) if event is not None else []
