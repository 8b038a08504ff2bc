"""The parent's half of `logwatch parse --csv` (and `--kind iterations`): chunks from the workers
(`reading/ranges.py`, `rows.py`) to CSV rows.

The workers render vLLM's common line of the kind (the stats line; the iteration line), all but two
cells; here each rendered row gets its time (through the file's clock, so New Year moves the year on)
and its line number, and every other line goes through the general parser and its Assembler (V0's
prefix-cache line merged into its stats row), at its place among the rows. Output is the general
path's, row for row (tests/integration/test_fastcsv.py, tests/unit/offline/test_parse_details.py).
"""

from __future__ import annotations

import csv
import io
import itertools
from array import array
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, BinaryIO

from ...parsing.columns import ITERATION_COLUMNS, STATS_COLUMNS
from ...parsing.needles import WANTS
from ...parsing.stamps import YearClock
from ..reading.inputs import Source, input_error, read_errors
from ..reading.ranges import DEFAULT_TUNING, Tuning, stream_chunks
from ..reading.route import container_format, opened, range_chunks, route
from ..reading.rows import CSV_LANE, ITERATIONS_LANE, STAMP, Chunk
from ..reading.stream import ScanStats

if TYPE_CHECKING:
    from ...parsing.assemble import Assembler
    from ...parsing.events import Event

__all__ = ["DEFAULT_TUNING", "CsvFastWriter", "RowSink", "StepCsvWriter", "Tuning", "write_csv", "write_rows"]

class RowSink:
    """The binary CSV output: the header goes out with the first row (no half output on errors)."""

    def __init__(self, out: BinaryIO, header: bytes) -> None:
        self.out, self.header, self.rows = out, header, 0

    def write(self, data: bytes, rows: int) -> None:
        try:
            if rows and not self.rows:
                self.out.write(self.header)
            self.rows += rows
            if data:
                self.out.write(data)
        except OSError as exc:  # raised here, it would pass for an error of the input being read
            from ...errors import OutputError

            raise OutputError(f"cannot write the output: {exc.strerror or exc}") from None


class CsvFastWriter:
    """Writes the stats rows of blobs of candidate lines, fast lane first, general parser otherwise.

    The general parser (and its pydantic models) is loaded only when a line needs it."""

    ROW = b"%s,%s,%d%s\n"
    """A rendered row: time cell, file cell, line number, the worker's tail."""
    LANE = CSV_LANE
    """What the workers render: CSV cells (JSON-lines fields for `offline/output/jsonl_rows.py`)."""
    WANT = WANTS["stats"]
    """The lines read (`parsing/needles.py`)."""
    COLUMNS = STATS_COLUMNS

    def __init__(self, sink: RowSink, file: str, clock_factory: Callable[[str], YearClock]) -> None:
        self.sink = sink
        self.file = file
        self._clock_factory = clock_factory
        self.clock: YearClock | None = None
        self._assembler: Assembler | None = None
        self._file = self.file_cell(file)
        self._text = io.StringIO()
        self._csv = csv.writer(self._text, lineterminator="\n")
        self._iso: dict[bytes, tuple[int, bytes, bytes]] = {}
        self._n = 0

    @staticmethod
    def file_cell(file: str) -> bytes:
        cell = io.StringIO()
        csv.writer(cell, lineterminator="").writerow([file])
        return cell.getvalue().encode()

    def clock_for(self, stamp: str) -> YearClock:
        """The file's clock, made from its first stamp (the mtime rule needs it)."""
        if self.clock is None:
            self.clock = self._clock_factory(stamp)
        return self.clock

    @property
    def assembler(self) -> Assembler:
        if self._assembler is None:
            from ...parsing.assemble import Assembler

            self._assembler = Assembler(self.file, self.clock_for)
        return self._assembler

    def _time(self, stamp: bytes) -> bytes:
        """ISO 8601 of a stamp; the date part is computed once per hour of log, and always through
        the clock so New Year moves the year on. An hour with a daylight-saving step in it (the
        repeated hour of a fall-back) is never reused: each of its stamps goes through the clock."""
        clock = self.clock_for(stamp.decode())
        hit = self._iso.get(stamp[:8])
        if hit is None or hit[0] != clock.year:
            value = clock.to_datetime(stamp.decode())
            if value is None:
                return b""
            iso = value.isoformat().encode()  # YYYY-MM-DDTHH:MM:SS+zz:zz
            hit = (clock.year, iso[:13], iso[19:])
            if not clock.steady_hour(value):
                return iso
            self._iso[stamp[:8]] = hit
        return hit[1] + stamp[8:] + hit[2]

    time_cell = _time
    """The time cell of a rendered row (JSON lines quote it)."""

    def write_chunk(self, chunk: Chunk, base: int) -> None:
        """The rows of one chunk, in file order; `base`: the lines before it in the file."""
        rows: list[bytes] = []
        self._n = 0
        numbers, other_numbers, positions = array("Q"), array("Q"), array("Q")
        numbers.frombytes(chunk.numbers)
        other_numbers.frombytes(chunk.other_numbers)
        positions.frombytes(chunk.positions)
        tails = chunk.tails.split(b"\n") if numbers else []
        others = chunk.others.split(b"\n") if other_numbers else []
        stamps, file_cell, j = chunk.stamps, self._file, 0
        row, time_cell, last, cell = self.ROW, self.time_cell, b"", b""
        for i, tail in enumerate(tails):
            while j < len(positions) and positions[j] == i:
                self._slow(others[j], base + other_numbers[j], rows)
                j += 1
            if self._assembler is not None and self._assembler.pending:
                self._emit_events(self._assembler.flush(), rows)
            stamp = stamps[i * STAMP:(i + 1) * STAMP]
            if stamp != last:  # engine steps: tens of rows a second
                last, cell = stamp, time_cell(stamp)
            rows.append(row % (cell, file_cell, base + numbers[i], tail))
        self._n += len(tails)
        for k in range(j, len(positions)):
            self._slow(others[k], base + other_numbers[k], rows)
        self.sink.write(b"".join(rows), self._n)

    def finish(self) -> None:
        rows: list[bytes] = []
        self._n = 0
        if self._assembler is not None:
            self._emit_events(self._assembler.flush(), rows)
        self.sink.write(b"".join(rows), self._n)

    def write_events(self, events: Iterable[Event]) -> None:
        """The rows of records read by the general path (a container log's)."""
        batch: list[Event] = []
        for event in itertools.chain(events, [None]):
            if event is not None:
                batch.append(event)
            if len(batch) >= 4096 or (event is None and batch):
                rows: list[bytes] = []
                self._n = 0
                self._emit_events(batch, rows)
                self.sink.write(b"".join(rows), self._n)
                batch = []

    def _slow(self, raw: bytes, number: int, rows: list[bytes]) -> None:
        """A line the workers did not render: the general parser, and the Assembler."""
        from ...parsing.line import parse_line

        event = parse_line(raw.decode("utf-8", "replace"))
        if event is not None:
            self._emit_events(self.assembler.feed(event, number), rows)

    @staticmethod
    def cells(event: Event) -> list[Any] | None:
        """The row of a record of the general parser, None for a record of another kind."""
        from ...parsing.events import EngineStats
        from ..reading.events import stats_csv_row

        return stats_csv_row(event) if isinstance(event, EngineStats) else None

    def _emit_events(self, events: list[Event], rows: list[bytes]) -> None:
        for event in events:
            cells = self.cells(event)
            if cells is not None:
                self._csv.writerow(cells)
                self._n += 1
        if self._text.tell():
            rows.append(self._text.getvalue().encode())
            self._text.seek(0)
            self._text.truncate()


class StepCsvWriter(CsvFastWriter):
    """`parse --kind iterations --csv`: a row per engine step."""

    LANE = ITERATIONS_LANE
    WANT = WANTS["iterations"]
    COLUMNS = ITERATION_COLUMNS

    @staticmethod
    def cells(event: Event) -> list[Any] | None:
        from ...parsing.events import IterationStats
        from ..reading.details import iteration_row

        return iteration_row(event) if isinstance(event, IterationStats) else None


def write_csv(sources: list[Source], out: BinaryIO, clock_factory: Callable[[Source, str], YearClock],
              scan: ScanStats, tuning: Tuning = DEFAULT_TUNING,
              kind: type[CsvFastWriter] = CsvFastWriter) -> int:
    """`logwatch parse --csv`: the rows of `sources` (stats, or the `kind` writer's) to `out`; returns how
    many were written."""
    sink = RowSink(out, (",".join(kind.COLUMNS) + "\n").encode())
    return write_rows(sources, sink, kind, clock_factory, scan, tuning)


def write_rows(sources: list[Source], sink: RowSink, kind: type[CsvFastWriter],
               clock_factory: Callable[[Source, str], YearClock], scan: ScanStats,
               tuning: Tuning = DEFAULT_TUNING) -> int:
    """The stats rows of `sources` to `sink`, by writers of class `kind`; returns how many."""
    for source in sources:
        writer = kind(sink, source.name, partial(clock_factory, source))
        way = route(source, tuning)
        try:
            if way == "general":  # a container log (offline/reading/route.py)
                from ..reading.containers import source_events

                writer.write_events(source_events(source, container_format(source), writer.assembler, scan,
                                                  kind.WANT.needles + kind.WANT.followers))
                continue
            if way == "ranges":
                for chunk, base in range_chunks(source, kind.WANT.needles, scan, tuning, kind.LANE):
                    writer.write_chunk(chunk, base)
            else:
                with opened(source) as (raw, fmt):
                    if fmt != "plain":  # a container log on a stream
                        from ..reading.containers import enveloped_events

                        events = enveloped_events(raw, fmt, writer.assembler, scan,
                                                  kind.WANT.needles + kind.WANT.followers)
                        writer.write_events(events)
                    else:
                        chunks = stream_chunks(raw, scan, lane=kind.LANE, needles=kind.WANT.needles)
                        for chunk, base in chunks:
                            writer.write_chunk(chunk, base)
            writer.finish()
        except read_errors as exc:
            raise input_error(exc, source) from None
    return sink.rows
