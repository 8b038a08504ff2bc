"""The fast path of `logwatch parse --csv` for big files.

Two costs dominate on big logs, and each has its own remedy:
- finding the few stats lines among millions of access lines (and counting lines for their numbers):
  SIMD `find` and `count` (StringZilla) over big blocks, split over the machine's cores (one process per
  range of the file, forked: the scan releases nothing to share);
- turning hundreds of thousands of stats lines into CSV rows: the common V1 shape
  (`Engine NNN: Avg prompt throughput: ..., <DEV> KV cache usage: x%[, Prefix ...][, MM ...]`) is read
  by one compiled pattern over the whole block and written as bytes. Every other line (V0, extra
  fields, colours, JSON, ...) goes through the general parser, so the output is the same as the slow
  path's, row for row (tests/test_fastcsv.py checks it).
"""

from __future__ import annotations

import csv
import io
import os
import re
import sys
from array import array
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from functools import partial
from multiprocessing import get_context
from typing import TYPE_CHECKING, Any, BinaryIO

from .bulkscan import (
    STATS_FOLLOWER_NEEDLES,
    STATS_NEEDLES,
    VARIANT_NEEDLES,
    ScanStats,
    scan_stream_bytes,
    simd_count,
    simd_find,
)
from .columns import STATS_COLUMNS
from .sources import Source, input_error, open_source, read_errors, resolve_inputs
from .timeparse import YearClock

if TYPE_CHECKING:
    from .events import Event
    from .scan import Assembler

__all__ = ["PARALLEL_MIN_BYTES", "CsvFastWriter", "RowSink", "scan_file_blobs", "stream_blobs", "write_csv"]

PARALLEL_MIN_BYTES = 64 << 20
_RANGE = 4 << 20
_WORKER_BLOCK = 1 << 20  # find + count twice over a block that stays in the CPU cache
_MAX_FOLLOWER = 64 << 10
_DENSE_PROBE = 64 << 10  # a range whose first 64 KiB are mostly stats lines is sent whole
_ROW_NEEDLES = STATS_NEEDLES + VARIANT_NEEDLES + STATS_FOLLOWER_NEEDLES

_CANON = re.compile(
    rb"(?m)^(?:\(\w+ pid=\d+\) )?(?:INFO|DEBUG) (\d\d-\d\d \d\d:\d\d:\d\d) \[[\w./]+:\d+\] "
    rb"Engine (\d{3,}): Avg prompt throughput: (\d+\.\d) tokens/s, Avg generation throughput: (\d+\.\d) "
    rb"tokens/s, Running: (\d+) reqs, Waiting: (\d+) reqs, ([A-Z]+) KV cache usage: (\d+\.\d)%"
    rb"(?:, Prefix cache hit rate: (\d+\.\d)%)?(?:, MM cache hit rate: (\d+\.\d)%)?\r?\n"
)


def _num(text: bytes) -> bytes:
    """The CSV cell the general path writes for a `%.1f` number: `repr(float(x))`, which is the text
    itself below 16 digits (and costs a conversion above)."""
    return text if len(text) < 16 else repr(float(text)).encode()


_buffer = bytearray()
"""A worker's read buffer, reused from range to range: a fresh 4 MiB `bytes` per range costs page
faults and allocator work comparable to scanning it."""


def _scan_range(path: str, start: int, end: int, needles: tuple[bytes, ...]) -> tuple[bytes, bytes, int]:
    """Worker: the wanted lines of `path[start:end]` as one blob, their line numbers (relative to the
    range, as array('Q') bytes) and the number of lines in the range."""
    global _buffer
    want = end - start
    if len(_buffer) < want + 1:
        _buffer = bytearray(want + 1)
    data = _buffer
    with open(path, "rb", buffering=0) as fh:
        fh.seek(start)
        size = fh.readinto(memoryview(data)[:want]) or 0
    if size and data[size - 1] != 0x0A:
        data[size] = 0x0A
        size += 1
    probe = min(size, _DENSE_PROBE)
    if simd_count(data, needles[0], 0, probe) * 2 > simd_count(data, b"\n", 0, probe):
        # A stats-dense range: every line goes to the parent, whose fast lane reads them in bulk.
        lines = simd_count(data, b"\n", 0, size)
        return bytes(data[:size]), array("Q", range(1, lines + 1)).tobytes(), lines
    numbers = array("Q")
    parts: list[bytes] = []
    number, counted = 1, 0
    window = 0
    while window < size:
        # Windows of about 1 MiB, cut at a line end, so `find` and `count` read cached memory.
        stop = simd_find(data, b"\n", min(window + _WORKER_BLOCK, size - 1), size) + 1 or size
        for line_start in _hit_starts(data, window, stop, size, needles):
            number += simd_count(data, b"\n", counted, line_start)
            counted = line_start
            numbers.append(number)
            parts.append(bytes(data[line_start:data.find(b"\n", line_start, size)]))
        number += simd_count(data, b"\n", counted, stop)
        counted = stop
        window = stop
    parts.append(b"")
    return b"\n".join(parts), numbers.tobytes(), number - 1


def _hit_starts(data: bytearray, lo: int, hi: int, size: int, needles: tuple[bytes, ...]) -> list[int]:
    """Starts of the lines in `data[lo:hi]` holding a needle, plus follower lines right after them
    (`size`: where the range's data ends in the buffer; every line there ends in a newline)."""
    starts: set[int] = set()
    for needle in needles:
        pos = simd_find(data, needle, lo, hi)
        while pos >= 0:
            starts.add(data.rfind(b"\n", 0, pos) + 1)
            nxt = data.find(b"\n", pos, size) + 1
            nstop = data.find(b"\n", nxt, size) if nxt else -1
            if nstop > 0 and any(data.find(f, nxt, nstop) >= 0 for f in STATS_FOLLOWER_NEEDLES):
                starts.add(nxt)
            pos = simd_find(data, needle, nxt, hi) if nxt else -1
    return sorted(starts)


def _ranges(path: str, size: int) -> list[tuple[int, int]]:
    """Cut the file at line ends into ranges of about `_RANGE` bytes, never just before a follower
    line (V0 prefix-cache, spec decode): it must travel with the stats line before it."""
    bounds = [0]
    with open(path, "rb") as fh:
        pos = _RANGE
        while pos < size:
            fh.seek(pos)
            fh.readline()
            cut = fh.tell()
            line = fh.readline(_MAX_FOLLOWER)
            while line and any(f in line for f in STATS_FOLLOWER_NEEDLES):
                cut = fh.tell()
                line = fh.readline(_MAX_FOLLOWER)
            if cut >= size:
                break
            if cut > bounds[-1]:
                bounds.append(cut)
            pos = cut + _RANGE
    bounds.append(size)
    return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def scan_file_blobs(
    path: str,
    needles: tuple[bytes, ...],
    stats: ScanStats,
    workers: int | None = None,
    progress: Callable[[int], object] | None = None,
) -> Iterator[tuple[bytes, array[int]]]:
    """The wanted lines of a big regular file, range by range in file order, as (blob, line numbers).

    Ranges are scanned by a pool of forked processes, at most one range per worker (plus one) in flight so
    memory stays flat whatever the file size.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        head = fh.read(8 << 20)
    needles = needles + tuple(n for n in VARIANT_NEEDLES if n in head and n not in needles)
    ranges = _ranges(path, size)
    workers = workers or min(len(ranges), os.cpu_count() or 1, 8)
    base = 0
    with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:
        pending: list[Future[tuple[bytes, bytes, int]]] = []
        todo = iter(ranges)
        for rng in todo:
            pending.append(pool.submit(_scan_range, path, rng[0], rng[1], needles))
            if len(pending) > workers:
                break
        while pending:
            blob, raw_numbers, lines = pending.pop(0).result()
            if progress is not None:
                progress(_RANGE)
            nxt = next(todo, None)
            if nxt is not None:
                pending.append(pool.submit(_scan_range, path, nxt[0], nxt[1], needles))
            numbers = array("Q")
            numbers.frombytes(raw_numbers)
            for i in range(len(numbers)):
                numbers[i] += base
            base += lines
            yield blob, numbers
    stats.bytes += size
    stats.lines = base


def stream_blobs(stream: BinaryIO, stats: ScanStats, batch: int = 4096) -> Iterator[tuple[bytes, array[int]]]:
    """The same as `scan_file_blobs` for any stream (stdin, .gz, small files), in one process."""
    numbers = array("Q")
    parts: list[bytes] = []
    for number, raw in scan_stream_bytes(stream, STATS_NEEDLES, stats, followers=STATS_FOLLOWER_NEEDLES):
        numbers.append(number)
        parts.append(raw)
        if len(parts) >= batch:
            parts.append(b"")
            yield b"\n".join(parts), numbers
            numbers, parts = array("Q"), []
    if parts:
        parts.append(b"")
        yield b"\n".join(parts), numbers


class RowSink:
    """The binary CSV output: the header goes out with the first row (no half output on errors)."""

    def __init__(self, out: BinaryIO, header: bytes) -> None:
        self.out, self.header, self.rows = out, header, 0

    def write(self, data: bytes, rows: int) -> None:
        if rows and not self.rows:
            self.out.write(self.header)
        self.rows += rows
        if data:
            self.out.write(data)


class CsvFastWriter:
    """Writes the stats rows of blobs of candidate lines, fast lane first, general parser otherwise.

    The general parser (and its pydantic models) is loaded only when a line needs it."""

    def __init__(self, sink: RowSink, file: str, clock_factory: Callable[[str], YearClock]) -> None:
        self.sink = sink
        self.file = file
        self._clock_factory = clock_factory
        self.clock: YearClock | None = None
        self._assembler: Assembler | None = None
        cell = io.StringIO()
        csv.writer(cell, lineterminator="").writerow([file])
        self._file = cell.getvalue().encode()
        self._text = io.StringIO()
        self._csv = csv.writer(self._text, lineterminator="\n")
        self._iso: dict[bytes, tuple[int, bytes, bytes]] = {}
        self._n = 0

    def clock_for(self, stamp: str) -> YearClock:
        """The file's clock, made from its first stamp (the mtime rule needs it)."""
        if self.clock is None:
            self.clock = self._clock_factory(stamp)
        return self.clock

    @property
    def assembler(self) -> Assembler:
        if self._assembler is None:
            from .scan import Assembler

            self._assembler = Assembler(self.file, self.clock_for)
        return self._assembler

    def _time(self, stamp: bytes) -> bytes:
        """ISO 8601 of a stamp; the date part is computed once per hour of log (the zone's offset
        can only change at an hour), and always through the clock so New Year moves the year on."""
        clock = self.clock_for(stamp.decode())
        hit = self._iso.get(stamp[:8])
        if hit is None or hit[0] != clock.year:
            value = clock.to_datetime(stamp.decode())
            if value is None:
                return b""
            iso = value.isoformat().encode()  # YYYY-MM-DDTHH:MM:SS+zz:zz
            hit = (clock.year, iso[:13], iso[19:])
            self._iso[stamp[:8]] = hit
        return hit[1] + stamp[8:] + hit[2]

    def write_blob(self, blob: bytes, numbers: array[int]) -> None:
        rows: list[bytes] = []
        self._n = 0
        pos = idx = 0
        for m in _CANON.finditer(blob):
            start = m.start()
            if start > pos:
                idx = self._slow(blob[pos:start], numbers, idx, rows)
            stamp, engine, prompt, gen, running, waiting, device, kv, prefix, mm = m.groups()
            if self._assembler is not None and self._assembler.pending:
                self._emit_events(self._assembler.flush(), rows)
            kv_cells = (b"," + _num(kv)) if device == b"CPU" else (_num(kv) + b",")
            rows.append(b"%s,%s,%d,%d,%s,%s,%s,%s,,%s,%s,,%s,\n" % (
                self._time(stamp), self._file, numbers[idx], int(engine), _num(prompt), _num(gen),
                running, waiting, kv_cells, _num(prefix) if prefix else b"", _num(mm) if mm else b"",
            ))
            self._n += 1
            idx += 1
            pos = m.end()
        if pos < len(blob):
            idx = self._slow(blob[pos:], numbers, idx, rows)
        self.sink.write(b"".join(rows), self._n)

    def finish(self) -> None:
        rows: list[bytes] = []
        self._n = 0
        if self._assembler is not None:
            self._emit_events(self._assembler.flush(), rows)
        self.sink.write(b"".join(rows), self._n)

    def _slow(self, chunk: bytes, numbers: array[int], idx: int, rows: list[bytes]) -> int:
        """The general parser for the lines the fast lane did not read; a stats-dense range brings
        every line, and only those that can make or complete a stats row are parsed."""
        from .parse import parse_line

        for raw in chunk.split(b"\n")[:-1]:
            if not any(needle in raw for needle in _ROW_NEEDLES):
                idx += 1
                continue
            event = parse_line(raw.decode("utf-8", "replace"))
            if event is not None:
                self._emit_events(self.assembler.feed(event, numbers[idx]), rows)
            idx += 1
        return idx

    def _emit_events(self, events: list[Event], rows: list[bytes]) -> None:
        from .events import EngineStats
        from .report import stats_csv_row

        for event in events:
            if isinstance(event, EngineStats):
                self._csv.writerow(stats_csv_row(event))
                self._n += 1
        if self._text.tell():
            rows.append(self._text.getvalue().encode())
            self._text.seek(0)
            self._text.truncate()


def write_csv(sources: list[Source], out: BinaryIO, clock_factory: Callable[[Source, str], YearClock],
              scan: ScanStats) -> int:
    """`logwatch parse --csv`: the stats rows of `sources` to `out`; returns how many were written."""
    sink = RowSink(out, (",".join(STATS_COLUMNS) + "\n").encode())
    for source in sources:
        writer = CsvFastWriter(sink, source.name, partial(clock_factory, source))
        try:
            size = 0 if source.is_stdin else _plain_file_size(source.path)
            if size >= PARALLEL_MIN_BYTES:
                bar = _progress_bar(source.path, size)
                for blob, numbers in scan_file_blobs(source.path, STATS_NEEDLES, scan,
                                                     progress=bar.update if bar else None):
                    writer.write_blob(blob, numbers)
                if bar is not None:
                    bar.close()
            else:
                with open_source(source) as raw:
                    for blob, numbers in stream_blobs(raw, scan):
                        writer.write_blob(blob, numbers)
            writer.finish()
        except read_errors as exc:
            raise input_error(exc, source) from None
    return sink.rows


def _plain_file_size(path: str) -> int:
    """Size of a regular, uncompressed file; 0 for anything else (those take the streaming path)."""
    try:
        if not os.path.isfile(path):
            return 0
        with open(path, "rb") as fh:
            if fh.read(2) == b"\x1f\x8b":
                return 0
        return os.stat(path).st_size
    except OSError:
        return 0


def _progress_bar(path: str, size: int) -> Any:
    """A tqdm bar on stderr when it is a terminal (big files only reach here)."""
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=size, desc=os.path.basename(path), unit="B", unit_scale=True, leave=False,
                file=sys.stderr)


def run_csv(inputs: list[str], *, year: int | None = None, tz: str | None = None) -> int:
    """`logwatch parse --csv FILE...` to stdout; raises `NoStatsError` (with its hint) if none."""
    from .errors import NoStatsError

    sources, zone = resolve_inputs(inputs, tz)
    scan = ScanStats()

    def clock(source: Source, stamp: str) -> YearClock:
        path = None if source.is_stdin else source.path
        return YearClock.for_source(path, zone, year, first_stamp=stamp)

    sys.stdout.flush()
    rows = write_csv(sources, sys.stdout.buffer, clock, scan)
    sys.stdout.buffer.flush()
    if rows == 0:
        from .report import no_stats_hint

        raise NoStatsError(no_stats_hint(sources))
    return rows
