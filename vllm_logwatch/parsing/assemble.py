"""From lines (or whole files) to events in file order.

`Assembler` is the small amount of state between lines (docs/design.md says what it keeps).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from .events import (
    EngineStats,
    Event,
    LogMessage,
    PrefixCacheRates,
    ServerInfo,
    SpecDecodeStats,
    TransferStats,
    Unparsed,
)
from .stamps import YearClock


def who(process: str | None, pid: int | None) -> str | None:
    """The writer of a line: its `(Name pid=N)` prefix as `Name pid=N` (what the offline fast lane reads
    of vLLM's own header, `needles.HEADER`), the name alone without a pid, None without a prefix. Two
    servers writing one log are two writers: their records never meet.

    >>> who("APIServer", 7), who("MainProcess", None), who(None, None)
    ('APIServer pid=7', 'MainProcess', None)
    """
    return process if pid is None else f"{process} pid={pid}"

_FACT = object()
"""The location of an open record begun by a fact's line (`ServerInfo` has none): its traceback's lines,
of the same level and stamp, belong to it."""
_TRACEBACK_LEVELS = frozenset({"WARNING", "ERROR", "CRITICAL"})
_HELD = 16
"""At most this many records are held for their tracebacks (a run of warnings holds no more)."""


@dataclass(slots=True)
class _Open:
    """A writer's open multi-line record: the header (level, location, stamp) its lines repeat, the
    problem tags it reported, and the exception type of its traceback so far."""

    key: tuple[object, ...]
    problems: set[str] = field(default_factory=set)
    exception: str | None = None


class Assembler:
    """Feed events in line order; get them back complete.

    `hold=True` (offline) keeps a record until the next record to complete it: a V0 stats record, to
    merge its prefix-cache line into it; a warning's, an error's or a fact's record, to keep the exception
    type of the traceback after it (`exception`). Live followers pass `hold=False` (a record counts when
    its line is read; its traceback's exception type is not kept) and let the metrics apply the prefix line.
    """

    def __init__(
        self,
        file: str | None = None,
        clock: YearClock | Callable[[str], YearClock] | None = None,
        *,
        hold: bool = True,
        repeats: bool = False,
    ):
        """`clock` is a YearClock, or a factory given the first stamp seen (for the mtime rule)."""
        self.file = file
        self.clock = clock if isinstance(clock, YearClock) else None
        self._clock_factory = None if isinstance(clock, YearClock) else clock
        self.hold = hold
        self._pending: EngineStats | None = None
        self._held: list[tuple[LogMessage | ServerInfo, _Open]] = []
        """Records held for their tracebacks' exception types (several: writers' tracebacks interleave),
        in file order, each with its open record."""
        self._last_engine: dict[str | None, int | None] = {}  # by writer (`who`)
        self.repeats = repeats
        self._last_stats: dict[tuple[str | None, int | None, int | None], object] = {}
        """(writer, engine, engines aggregated) -> its last stats line: the event as parsed (no file,
        line or time), or the fast lane's (stamp, numbers)."""
        self._open_log: dict[str | None, _Open] = {}  # per writer (`who`)

    def feed(self, event: Event, line: int | None = None, time: datetime | None = None) -> list[Event]:
        """Take the event of line number `line`; return the events now complete, in order. `time`: the
        line's own instant (a container log's stamp), taken instead of vLLM's year-less stamp."""
        update: dict[str, Any] = {"file": self.file, "line": line}
        writer = who(event.process, event.pid)
        if time is not None:
            update["time"] = time
        elif event.stamp is not None:
            clock = self.clock_for(event.stamp)
            if clock is not None:
                update["time"] = clock.to_datetime(event.stamp)
        out: list[Event] = []
        if isinstance(event, PrefixCacheRates):
            pending = self._pending
            if pending is not None and pending.stamp == event.stamp and pending.process == event.process \
                    and pending.pid == event.pid:
                self._pending = replace(pending, prefix_cache_hit_rate_pct=event.gpu_pct,
                                        prefix_cache_hit_rate_cpu_pct=event.cpu_pct)
                return out
            out.extend(self.flush())
            out.append(replace(event, **update))
            return out
        opened: _Open | None = None
        if isinstance(event, LogMessage):
            # Every line of a multi-line record (a traceback) repeats its header; records of other
            # processes may be interleaved. A continuation line counts only for a problem not seen yet
            # in its record (a root cause such as `CUDA out of memory` at the end of the traceback); its
            # last line names the exception.
            key = (event.level, event.location, event.stamp)
            record = self._open_log.get(writer)
            if record is not None and record.key[1] is _FACT and record.key[::2] == key[::2]:
                record.key = key  # the traceback of a fact's line
            if record is not None and record.key == key:
                record.exception = event.exception or record.exception
                if event.problem is None or event.problem in record.problems:
                    return out
                record.problems.add(event.problem)
                update["exception"] = None  # a line of the record, given for its problem alone
            elif event.level not in _TRACEBACK_LEVELS:
                return out  # an INFO line shaped like a traceback's last, of no open record
            else:
                opened = self._open_log[writer] = _Open(key, {event.problem} if event.problem else set(),
                                                        event.exception)
        elif isinstance(event, ServerInfo) and event.stamp is not None:
            # a fact's line (`I/O failed for job 17`, `[FT] Engine 0 status -> UNHEALTHY:`): the traceback
            # after it is its own
            opened = self._open_log[writer] = _Open((event.level, _FACT, event.stamp),
                                                    {event.problem} if event.problem else set())
        elif event.stamp is not None:
            self._open_log.pop(writer, None)  # another record of that writer ends it
        seen = event if time is None else (event, time)  # a container's own stamp tells copies apart too
        if isinstance(event, EngineStats) and self.repeats and self.repeated(
                writer, event.engine, seen, event.engines_aggregated):
            return [*self._release(), Unparsed(what="duplicate", file=self.file, line=line)]
        if opened is not None and self.hold and isinstance(event, (LogMessage, ServerInfo)):  # opened: always
            if self._pending is not None:
                out.extend(self.flush())
            self._held.append((replace(event, **update), opened))
            return out + self._release(len(self._held) - _HELD)
        out.extend(self.flush())
        if isinstance(event, EngineStats):
            self._last_engine[writer] = event.engine
            stats = replace(event, **update)
            if self.hold and stats.is_v0:
                self._pending = stats
                return out
            out.append(stats)
            return out
        if isinstance(event, (SpecDecodeStats, TransferStats)) and event.engine is None:
            update["engine"] = self._last_engine.get(writer)
        for name, value in update.items():  # the parser's fresh record, completed in place: no copy
            setattr(event, name, value)
        out.append(event)
        return out

    def clock_for(self, stamp: str) -> YearClock | None:
        """The file's clock, made from its first stamp when a factory was given."""
        if self.clock is None and self._clock_factory is not None:
            self.clock = self._clock_factory(stamp)
        return self.clock

    def stats_seen(self, process: str | None, engine: int | None) -> None:
        """A stats line of writer `process` (`who`) read without `feed` (the offline fast lane): what
        `feed` notes of it (spec and transfer lines after it name its engine; it ends the writer's open
        log record)."""
        self._open_log.pop(process, None)
        self._last_engine[process] = engine

    def repeated(self, process: str | None, engine: int | None, line: object,
                 aggregated: int | None = None) -> bool:
        """True when the stats line `line` (what tells two lines apart: the parsed event, or the fast
        lane's stamp and numbers) is the last stats line of its writer (`who`) and engine again, a duplicate;
        it is that last line from now on."""
        key = (process, engine, aggregated)
        if self._last_stats.get(key) == line:
            return True
        self._last_stats[key] = line
        return False

    @property
    def pending(self) -> bool:
        """A record is held: a V0 stats record waiting for its prefix-cache line, or a record for its
        traceback."""
        return self._pending is not None or bool(self._held)

    def flush(self) -> list[Event]:
        """The held record, if any (call at end of input)."""
        if self._pending is None:
            return self._release()
        pending, self._pending = self._pending, None
        return [pending]

    def _release(self, count: int | None = None) -> list[Event]:
        """The records held for their tracebacks (the first `count`; all without), given their exception
        types."""
        done = self._held[:count] if count is None or count > 0 else []
        del self._held[:len(done)]
        return [event if rec.exception is None else replace(event, exception=rec.exception)
                for event, rec in done]


def iter_events(
    lines: Iterable[str],
    file: str | None = None,
    clock: YearClock | Callable[[str], YearClock] | None = None,
) -> Iterator[Event]:
    """Every event of a sequence of lines, in order, with file, line number and (given a clock) time.

    >>> [e.kind for e in iter_events(["INFO:     1.2.3.4:5 - \\"GET /health HTTP/1.1\\" 200 OK"])]
    ['access']
    """
    from .line import parse_line  # the parser's patterns are compiled when first needed

    assembler = Assembler(file, clock)
    for number, text in enumerate(lines, 1):
        event = parse_line(text)
        if event is not None:
            yield from assembler.feed(event, number)
    yield from assembler.flush()
