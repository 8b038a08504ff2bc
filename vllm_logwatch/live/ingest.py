"""The one ingest core of the live modes: a block of one launch's complete lines -> the metrics, for
watch (`pipeline.py`) and run (`feed.py`) alike (docs/design.md, "The path of a line"). Access lines
carry no state through the Assembler, so counting them per block changes nothing but the moment a first
request is seen (by at most a block).

A line read as it is written is timed by its arrival (`Arrival`, `measure`): a detail line's latency, a
stats line's age. vLLM's stamps have whole seconds; the line was printed a few milliseconds before
we read it, so the moment of the read, on our monotonic clock, times it to about our own scheduling
delay (the latency state takes it from there; the token counters do not: `exporting/tokens.py`). The
stamp is the check: vLLM printed the line within the stamp's second, so a read later than that
second's end is our delay and is cut back to it, and a read much later (a backlog, a file read from
its start, a replay) or before the stamp (another zone, another host's clock) is no measure at all:
such a line is timed by its stamp. Run mode reads the clocks when a chunk of the child's output
arrives, before it is queued (`feed.py`), and hands that `Arrival` to `LaunchReader.read`.
"""

from __future__ import annotations

import contextlib
import logging
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from ..exporting.exporter import ExporterMetrics
from ..parsing.assemble import Assembler
from ..parsing.envelope import Format, Unwrapped, Unwrapper, container_time, detect
from ..parsing.events import EngineStats, Event, IterationStats, RequestLine, Unparsed
from ..parsing.framing import MAX_LINE_BYTES
from ..parsing.line import parse_line, scan_block, shutdown_at

log = logging.getLogger(__name__)

BACKLOG_SECONDS = 2.0
"""A line read more than this after its stamp's second ended was not read as it was written."""
CLOCK_SKEW_SECONDS = 0.5
"""A line read this long before its own stamp comes from a clock (or zone) other than ours."""


@dataclass(frozen=True)
class Arrival:
    """The moment a block was read, on both clocks: monotonic for gaps, wall to compare stamps."""

    monotonic: float
    wall: float

    @classmethod
    def now(cls) -> Arrival:
        return cls(time.monotonic(), time.time())


def print_time(stamp: float, arrival: Arrival) -> float | None:
    """When a line stamped `stamp` (wall seconds) and read at `arrival` was printed, on the monotonic
    clock; None when the read does not measure it (see the module's docstring).

    >>> print_time(100.0, Arrival(monotonic=7.0, wall=100.25))   # read 0.25 s into its second
    7.0
    >>> print_time(100.0, Arrival(monotonic=7.0, wall=101.5))    # our read was 0.5 s late at least
    6.5
    >>> print_time(100.0, Arrival(monotonic=7.0, wall=160.0)) is None   # a backlog line
    True
    """
    late = arrival.wall - stamp
    resolution = 1.0 if stamp == int(stamp) else 0.001  # whole-second stamps, or milliseconds
    if not -CLOCK_SKEW_SECONDS <= late <= resolution + BACKLOG_SECONDS:
        return None
    return arrival.monotonic - max(0.0, late - resolution)


def measure(events: Sequence[Event], arrival: Arrival) -> dict[int, float]:
    """Index of each stats, iteration or request event of a block read at `arrival` that was read live
    -> when it was printed (monotonic); for `ExporterMetrics.apply_many`."""
    out: dict[int, float] = {}
    for index, event in enumerate(events):
        if isinstance(event, (EngineStats, IterationStats, RequestLine)) and event.time is not None:
            printed = print_time(event.time.timestamp(), arrival)
            if printed is not None:
                out[index] = printed
    return out


class LineErrors:
    """What a reader's lines cost, over all its launches: a bug on one line (in the parser, the
    assembler or the metrics), counted as a parse error and logged once (our traceback: the message may
    hold log text), never raised, so a reader that runs for months goes on; and a container log's
    joined lines cut at the cap (the follower cuts the others)."""

    def __init__(self) -> None:
        self.internal = 0
        self.cut = 0

    def internal_error(self, metrics: ExporterMetrics, source: str | None, number: int | None,
                       exc: Exception) -> None:
        self.internal += 1
        with contextlib.suppress(Exception):  # the metrics themselves broken: `internal` still tells
            metrics.apply(Unparsed(what="stats", file=source, line=number))
        if self.internal == 1:
            log.error(
                "internal error on %s line %s: %s (message withheld: it may hold log text); the line is "
                "counted as a parse error and later ones are only counted\n%s",
                source, number, type(exc).__name__,
                "".join(traceback.format_tb(exc.__traceback__)).rstrip())


class LaunchReader:
    """Reads one launch's lines into `metrics` through its own `assembler`.

    `errors`: where a bug on a line and a cut joined line are counted (the reader's, over its launches).
    `numbered=False`: events get no line numbers (run mode). `retime`: applied to each complete event
    before the metrics take it. `timed`: the source is read as it is written, so `read` reads the
    clocks unless given the `arrival` (run mode reads them before its queue); a block read with an
    arrival has its lines timed by it (`measure`: latency, ages). `records`: given each block's
    complete events as the metrics take them (the record stream, `records.py`).

    A container log (`parsing/envelope.py`: docs/design.md says what unwrapping does) is told from the
    first block that holds a line, once, and its blocks unwrapped before the scan; a joined line cut at
    the cap is counted in `errors`. `envelopes=False` (run mode: vLLM's own output) reads every block as
    plain.
    """

    def __init__(
        self,
        metrics: ExporterMetrics,
        assembler: Assembler,
        errors: LineErrors | None = None,
        *,
        numbered: bool = True,
        retime: Callable[[Event], Event] | None = None,
        envelopes: bool = True,
        timed: bool = False,
        records: Callable[[list[Event]], None] | None = None,
    ) -> None:
        self.metrics = metrics
        self._records = records
        self.assembler = assembler
        self.errors = errors or LineErrors()
        self._numbered = numbered
        self._retime = retime
        self._timed = timed
        self.format: Format | None = None if envelopes else "plain"
        """The source's format, once told (None: not yet)."""
        self._unwrapper: Unwrapper | None = None

    def read(
        self, data: bytes, first: int = 1, *, cap: int | None = None, arrival: Arrival | None = None
    ) -> None:
        """Apply the complete lines in `data` (`first`: the number of the first; `cap`: lines longer
        are read cut to it; `arrival`: when the block was read)."""
        if arrival is None and self._timed:
            arrival = Arrival.now()
        if self.format is None:
            self.format = detect(data[:512])
            if self.format is not None and self.format != "plain":
                self._unwrapper = Unwrapper(self.format, cap=cap or MAX_LINE_BYTES)
        if self._unwrapper is not None:
            self._read_unwrapped(self._unwrapper.unwrap(data, first), cap, arrival)
        else:
            self._read_lines(data, first, cap, arrival, [])

    def flush(self) -> None:
        """The end of the launch: a part of a line still open (a container log's), then a record the
        assembler still holds."""
        if self._unwrapper is not None:
            self._read_unwrapped(self._unwrapper.flush(), None, None)
        self._apply(self.assembler.flush(), None, None)

    def _read_unwrapped(self, got: Unwrapped, cap: int | None, arrival: Arrival | None) -> None:
        """The lines a container log's block held, with their envelope numbers and container times."""
        file = self.assembler.file
        events: list[Event] = [Unparsed(what="envelope", file=file, line=n if self._numbered else None)
                               for n in got.malformed]
        self.errors.cut += got.cut
        self._read_lines(got.data, 1, cap, arrival, events, got)

    def _read_lines(self, data: bytes, first: int, cap: int | None, arrival: Arrival | None,
                    events: list[Event], got: Unwrapped | None = None) -> None:
        """The complete lines of `data` (numbered from `first`; `got`: their envelopes' numbers and
        times) after `events`, into the metrics."""
        access, hits = scan_block(data, first, cap=cap)
        shutdown = _shutdown_line(data, first)
        ended_from = None
        for number, text in hits:
            if ended_from is None and shutdown is not None and number > shutdown:
                ended_from = len(events)
            when = None
            if got is not None:
                when = container_time(got.stamps[number - 1])
                number = got.numbers[number - 1]
            self._feed(events, text, number if self._numbered else None, when)
        self._apply(events, access, arrival, ended_from if shutdown is None or ended_from is not None
                    else len(events))

    def _feed(self, events: list[Event], text: str, line: int | None, when: datetime | None) -> None:
        try:
            event = parse_line(text)
            if event is not None:
                events.extend(self.assembler.feed(event, line, when))
        except Exception as exc:
            self.errors.internal_error(self.metrics, self.assembler.file, line, exc)

    def _apply(self, events: list[Event], access: dict[tuple[str, str, int], int] | None,
               arrival: Arrival | None, ended_from: int | None = None) -> None:
        """`ended_from`: the index of the first event after the block's shutdown line (the launch ends
        there: `ExporterMetrics.apply_many`)."""
        measured = None
        if arrival is not None:
            measured = measure(events, arrival)  # from the stamps, before any retime
        if self._records is not None and events:
            self._records(events)  # with the log's own stamps, as `parse --jsonl` reads them
        if self._retime is not None:
            events = [self._retime(event) for event in events]
        failed = self.metrics.apply_many(events, access, measured, ended_from=ended_from)
        for event, exc in failed:
            self.errors.internal_error(self.metrics, event.file, event.line, exc)


def _shutdown_line(data: bytes, first: int) -> int | None:
    """The number of the block's first shutdown line (`first`: the block's first), or None. One
    substring search a block."""
    if b"hutdown" not in data or (at := shutdown_at(data)) is None:
        return None
    return first + data.count(b"\n", 0, at)
