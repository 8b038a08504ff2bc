"""The workers' half of `logwatch parse --csv`: find the lines that make stats rows, and render them.

Two costs dominate on big logs, and both are paid here, in parallel:
- finding the few stats lines among millions of access lines (and counting lines for their numbers):
  SIMD `find` and `count` (StringZilla) over big blocks, one forked process per range of the file;
- turning hundreds of thousands of stats lines into CSV cells: the common V1 shape
  (`Engine NNN: Avg prompt throughput: ..., <DEV> KV cache usage: x%[, Prefix ...][, MM ...]`) is read
  by one compiled pattern and rendered as bytes, all but the time and the line number (the parent
  knows the file's clock and how many lines came before the range).

Every other line that can make or complete a stats row (V0, extra fields, colours, JSON, ...) is passed
on as text for the general parser, with its place among the rendered rows, so the output is the general
path's, row for row (tests/integration/test_fastcsv.py checks it).
"""

from __future__ import annotations

import math
import os
import re
from array import array
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from typing import BinaryIO, Literal, NamedTuple

from ...parsing.framing import MAX_LINE_BYTES, hit_lines
from ...parsing.needles import STATS_FOLLOWER_NEEDLES, STATS_NEEDLES, VARIANT_NEEDLES, WANTS, with_variants
from ...parsing.shapes import CANONICAL_STATS, HEADER, ITERATION_BODY
from ..children import exit_with_parent
from .stream import ScanStats, scan_stream_bytes, simd_count, simd_find

__all__ = ["CSV_LANE", "DEFAULT_TUNING", "ITERATION_LINE", "VALUES", "Chunk", "Lane", "Tuning", "render",
           "scan_file_chunks", "stream_chunks"]

_WORKER_BLOCK = 1 << 20  # find + count twice over a block that stays in the CPU cache
_MAX_FOLLOWER = 64 << 10
_ROW_NEEDLES = STATS_NEEDLES + VARIANT_NEEDLES + STATS_FOLLOWER_NEEDLES
STAMP = 14
"""Bytes of a `MM-DD HH:MM:SS` stamp."""

@dataclass(frozen=True)
class Tuning:
    """The fast lane's sizes (tests make them small, so a small file takes the multi-process route)."""

    parallel_min_bytes: int = 64 << 20
    """Files from this size on are cut into ranges for the worker processes; smaller ones stream."""
    range_bytes: int = 4 << 20
    """About this much of the file per worker task."""
    dense_probe: int = 64 << 10
    """A range whose first this-many bytes are mostly stats lines is rendered whole."""


DEFAULT_TUNING = Tuning()


@dataclass(frozen=True)
class Lane:
    """What the workers make of the lines: CSV cells (the default), JSON-lines fields, or numbers; of
    which lines: the common stats line, or vLLM's iteration line (`parse --kind iterations`)."""

    shape: Literal["stats", "iterations"] = "stats"
    """The line rendered: `_CANON` (stats rows) or `ITERATION_LINE` (step rows)."""
    followers: tuple[bytes, ...] = STATS_FOLLOWER_NEEDLES
    """The follower lines a hit takes with it (`framing.hit_lines`): V0's prefix line for stats."""
    json: bool = False
    """Tails are JSON-lines fields (`_JSON_TAIL`) instead of CSV cells."""
    values: bool = False
    """Each rendered row's numbers in `Chunk.values` (`VALUES` per row; summary), its process name
    (empty without one) as its tail."""
    keep: tuple[bytes, ...] = _ROW_NEEDLES
    """Lines not rendered are passed on when they hold one of these."""
    numbers: bool = True
    """Line numbers (and `Chunk.lines`) are counted. Without, the numbers are not the lines' (0, or a
    count within the range) and `lines` is 0, and a sparse range reads at about twice the speed
    (counting newlines costs more than finding the stats lines): for the commands that print no line
    number (`plot`, `parse --openmetrics`)."""


CSV_LANE = Lane()
ITERATIONS_LANE = Lane(shape="iterations", followers=WANTS["iterations"].followers,
                       keep=WANTS["iterations"].needles)
VALUES = 8
"""Numbers per row of `Chunk.values`: engine, prompt and generation throughput, running, waiting, KV cache
usage, prefix and MM cache hit rates (NaN when absent)."""


_CANON = re.compile(rf"(?m)^{HEADER}{CANONICAL_STATS}\r?\n".encode())
"""A whole line of vLLM's own header and the common stats message (`parsing/shapes.py`)."""
ITERATION_LINE = re.compile(rf"(?m)^{HEADER}{ITERATION_BODY}\r?\n".encode())
"""A whole line of vLLM's own header and the iteration message: its row is rendered here (and the
summary reads its numbers in the parent: `records.py`); any other iteration line goes to the parser."""


class Chunk(NamedTuple):
    """The rows of a block of lines, as compact bytes (cheap to send from a worker).

    Rendered rows: `stamps` (14 bytes each), `tails` (the cells after the line number, joined by
    newlines), `numbers` (array('Q') bytes). Other lines: `others` (joined by newlines), their
    `other_numbers`, and `positions`: how many rendered rows come before each. Numbers are relative
    to the block's `base`; `lines` is how many lines the block had.
    """

    stamps: bytes
    tails: bytes
    numbers: bytes
    others: bytes
    other_numbers: bytes
    positions: bytes
    lines: int
    values: bytes = b""
    """array('d') bytes of the rows' numbers, with `Lane(values=True)`."""


def _num(text: bytes, empty: bytes) -> bytes:
    """The cell the general path writes for a number: `repr(float(x))`, which is the text itself for
    vLLM's `%.1f` and `%.2f` below 16 digits without a last 0 in two decimals or a leading one (and costs
    a conversion otherwise); `empty` (its empty cell: b"" in CSV, b"null" in JSON) for a number too
    large for a float, as the general path writes an infinity."""
    n, dot = len(text), text.rfind(b".")
    decimals = n - 1 - dot if dot > 0 else 0
    if n < 16 and (decimals == 1 or (decimals == 2 and text[-1] != 0x30)) and (text[0] != 0x30 or dot == 1):
        return text
    value = float(text)
    return empty if math.isinf(value) else repr(value).encode()


_JSON_TAIL = (b', "engine": %d, "prompt_throughput": %s, "generation_throughput": %s, "running": %d, '
              b'"waiting": %d, "swapped": null, "gpu_kv_cache_usage_pct": %s, "cpu_kv_cache_usage_pct": %s, '
              b'"prefix_cache_hit_rate_pct": %s, "prefix_cache_hit_rate_cpu_pct": null, '
              b'"mm_cache_hit_rate_pct": %s, "extra": null}')
"""A rendered row's JSON-lines fields after `line` (`parse --jsonl`): the general path's keys, order and
spacing (`json.dumps(..., separators=(", ", ": "))`), numbers as `repr(float)` like the CSV cells."""


def render(data: bytes | bytearray, size: int, numbers: array[int] | None, *, start: int = 0,
           first_number: int = 1, lane: Lane = CSV_LANE) -> Chunk:
    """The chunk of the whole lines in `data[start:size]`; `numbers`: their line numbers, or None for
    consecutive lines numbered from `first_number`. Lines over `MAX_LINE_BYTES` bytes are left out.
    `lane`: what to render (CSV cells, JSON-lines fields or numbers) and which other lines to pass on."""
    stamps: list[bytes] = []
    tails: list[bytes] = []
    canon = array("Q")
    others: list[bytes] = []
    other_numbers = array("Q")
    positions = array("Q")
    values = array("d")
    k, pos = 0, start
    json, keep, nan = lane.json, lane.keep, math.nan
    steps = lane.shape == "iterations"

    def gap(stop: int) -> None:  # the lines between two rendered rows: those holding a `keep` needle
        nonlocal k
        counted = pos
        for start in hit_lines(data, pos, stop, keep, limit=MAX_LINE_BYTES)[0]:
            k += data.count(b"\n", counted, start)
            counted = start
            others.append(bytes(data[start:data.find(b"\n", start, stop)]))
            other_numbers.append(numbers[k] if numbers is not None else k + first_number)
            positions.append(len(canon))
        k += data.count(b"\n", counted, stop)

    for m in (ITERATION_LINE if steps else _CANON).finditer(data, start, size):
        if m.start() > pos:
            gap(m.start())
        if steps:
            stamps.append(m.group(2))
            tails.append(_step_tail(m.groups()[2:], json))
            canon.append(numbers[k] if numbers is not None else k + first_number)
            k += 1
            pos = m.end()
            continue
        process, stamp, engine, prompt, gen, running, waiting, device, kv, prefix, mm = m.groups()
        stamps.append(stamp)
        if lane.values:  # the tail: the process name, for the Assembler's bookkeeping
            tails.append(process or b"")
            values.extend((int(engine), float(prompt), float(gen), int(running), int(waiting), float(kv),
                           float(prefix) if prefix else nan, float(mm) if mm else nan))
        elif json:
            cpu = device == b"CPU"
            null = b"null"
            tails.append(_JSON_TAIL % (
                int(engine), _num(prompt, null), _num(gen, null), int(running), int(waiting),
                null if cpu else _num(kv, null), _num(kv, null) if cpu else null,
                _num(prefix, null) if prefix else null, _num(mm, null) if mm else null,
            ))
        else:
            kv_cells = (b"," + _num(kv, b"")) if device == b"CPU" else (_num(kv, b"") + b",")
            tails.append(b",%d,%s,%s,%s,%s,,%s,%s,,%s," % (
                int(engine), _num(prompt, b""), _num(gen, b""), running, waiting, kv_cells,
                _num(prefix, b"") if prefix else b"", _num(mm, b"") if mm else b"",
            ))
        canon.append(numbers[k] if numbers is not None else k + first_number)
        k += 1
        pos = m.end()
    if pos < size:
        gap(size)
    return Chunk(b"".join(stamps), b"\n".join(tails), canon.tobytes(), b"\n".join(others),
                 other_numbers.tobytes(), positions.tobytes(), k, values.tobytes())


_STEP_CSV = b",%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s"
_STEP_JSON = (b', "engine": %s, "iteration": %s, "context_requests": %s, "context_tokens": %s, '
              b'"generation_requests": %s, "generation_tokens": %s, "elapsed_ms": %s, "phase": %s, '
              b'"dummy": %s, "kv_cache_usage_pct": %s, "device": %s, "encoder_inputs": %s, '
              b'"encoder_embeddings": %s}')
"""A step row's cells after `line` (`offline/reading/details.py` `ITERATION_COLUMNS`), CSV or JSON
lines' fields: the general path's text (`csv.writer` / `json.dumps` of `iteration_row`)."""


def _step_tail(groups: tuple[bytes | None, ...], json: bool) -> bytes:
    """A step row's rendered cells from the 12 groups of `ITERATION_BODY`."""
    engine, it, creq, ctok, greq, gtok, ms, dummy, device, kv, enc_in, enc_out = groups
    empty = b"null" if json else b""
    ctx, gen = _int(creq), _int(greq)
    idle = gen == b"0"
    phase = (b"idle" if idle else b"decode") if ctx == b"0" else (b"prefill" if idle else b"mixed")
    flag = (b"true" if dummy else b"false") if json else (b"True" if dummy else b"False")
    name = device.upper() if device else None
    return (_STEP_JSON if json else _STEP_CSV) % (
        _int(engine) if engine is not None else empty, _int(it), ctx, _int(ctok), gen, _int(gtok),
        _num(ms or b"", empty), b'"%s"' % phase if json else phase, flag, _num(kv, empty) if kv else empty,
        (b'"%s"' % name if json else name) if name else empty,
        _int(enc_in) if enc_in else empty, _int(enc_out) if enc_out else empty)


def _int(text: bytes | None) -> bytes:
    """The cell of a count: its digits, without leading zeros (`int`'s text)."""
    assert text is not None  # the pattern's groups that are not optional
    return text if text[0] != 0x30 or len(text) == 1 else b"%d" % int(text)


_buffer = bytearray()
"""A worker's read buffer, reused from range to range: a fresh 4 MiB `bytes` per range costs page
faults and allocator work comparable to scanning it."""


def _scan_range(path: str, start: int, end: int, needles: tuple[bytes, ...], inside_long_line: bool,
                at_eof: bool, dense_probe: int, lane: Lane = CSV_LANE) -> Chunk:
    """Worker: the chunk of `path[start:end]`, line numbers relative to the range.

    `inside_long_line`: the range was cut inside a line over `MAX_LINE_BYTES` bytes (never a stats line):
    its first bytes, up to a newline, are the rest of that line. A range that does not end the file
    may end inside such a line too: those last bytes belong to it as well."""
    global _buffer
    want = end - start
    if len(_buffer) < want + 1:
        _buffer = bytearray(want + 1)
    data = _buffer
    with open(path, "rb", buffering=0) as fh:
        fh.seek(start)
        size = fh.readinto(memoryview(data)[:want]) or 0
    if at_eof and size and data[size - 1] != 0x0A:
        data[size] = 0x0A  # the last line, without its newline
        size += 1
    first = simd_find(data, b"\n", 0, size) + 1 if inside_long_line else 0
    complete = data.rfind(b"\n", 0, size) + 1  # whole lines end here (a long line's start may follow)
    if inside_long_line and first == 0:
        first = complete = 0  # all of the range is inside the long line
    probe = min(complete, first + dense_probe)
    if simd_count(data, needles[0], first, probe) * 2 > simd_count(data, b"\n", first, probe):
        # A stats-dense range: every line, read in bulk.
        if not lane.numbers:
            return render(data, complete, None, start=first, first_number=0, lane=lane)._replace(lines=0)
        skipped = simd_count(data, b"\n", 0, first)
        chunk = render(data, complete, None, start=first, first_number=skipped + 1, lane=lane)
        return chunk._replace(lines=simd_count(data, b"\n", 0, size))
    counting = lane.numbers  # without: the numbers stay 0 and no newline is counted
    numbers = array("Q")
    parts: list[bytes] = []
    number, counted = 1, 0  # newlines are counted once, window by window, while the window is in cache
    window = first
    while window < complete:
        # Windows of about 1 MiB, cut at a line end, so `find` and `count` read cached memory.
        stop = simd_find(data, b"\n", min(window + _WORKER_BLOCK, complete - 1), complete) + 1 or complete
        starts, _ = hit_lines(data, window, stop, needles, lane.followers, end=complete,
                              limit=MAX_LINE_BYTES)
        for line_start in starts:
            if counting:
                number += simd_count(data, b"\n", counted, line_start)
                counted = line_start
            numbers.append(number if counting else 0)
            parts.append(bytes(data[line_start:data.find(b"\n", line_start, complete)]))
        if counting:
            number += simd_count(data, b"\n", counted, stop)
            counted = stop
        window = stop
    parts.append(b"")
    blob = b"\n".join(parts)
    lines = number - 1 + simd_count(data, b"\n", counted, size) if counting else 0
    return render(blob, len(blob), numbers, lane=lane)._replace(lines=lines)


def _ranges(path: str, size: int, range_bytes: int) -> list[tuple[int, int, bool]]:
    """Cut the file into ranges of about `range_bytes`: `(start, end, starts inside a long line)`.

    A cut falls after a newline, never just before a follower line (V0's prefix-cache line travels
    with the stats line before it); inside a line over `MAX_LINE_BYTES` bytes it falls where it is, and
    nothing bigger than one block is ever read here."""
    bounds: list[tuple[int, bool]] = [(0, False)]
    with open(path, "rb") as fh:
        pos = range_bytes
        while pos < size:
            fh.seek(pos)
            block = fh.read(_MAX_FOLLOWER)  # a line end is near, unless inside a long line
            newline = block.find(b"\n")
            if newline < 0 and len(block) == _MAX_FOLLOWER:
                found = fh.read(MAX_LINE_BYTES + 1 - _MAX_FOLLOWER).find(b"\n")
                newline = _MAX_FOLLOWER + found if found >= 0 else -1
            if newline < 0:
                cut, inside = pos, True  # inside a long line: any place will do
            else:
                cut, inside = pos + newline + 1, False
                fh.seek(cut)
                line = fh.readline(_MAX_FOLLOWER)
                while line.endswith(b"\n") and any(f in line for f in STATS_FOLLOWER_NEEDLES):
                    cut = fh.tell()
                    line = fh.readline(_MAX_FOLLOWER)
            if cut >= size:
                break
            if cut > bounds[-1][0]:
                bounds.append((cut, inside))
            pos = cut + range_bytes
    return [(begin, bounds[i + 1][0] if i + 1 < len(bounds) else size, inside)
            for i, (begin, inside) in enumerate(bounds)]


def _variants_in_head(path: str, needles: tuple[bytes, ...]) -> tuple[bytes, ...]:
    """The variant needles the file's first 8 MiB hold (and `needles` do not): those 8 MiB are not
    kept (the generator's frame lives as long as the scan, and its workers fork from it)."""
    with open(path, "rb") as fh:
        head = fh.read(8 << 20)
    return with_variants(needles, head)


def scan_file_chunks(
    path: str,
    needles: tuple[bytes, ...],
    stats: ScanStats,
    workers: int | None = None,
    progress: Callable[[int], object] | None = None,
    tuning: Tuning = DEFAULT_TUNING,
    lane: Lane = CSV_LANE,
) -> Iterator[tuple[Chunk, int]]:
    """The chunks of a big regular file, range by range in file order, each with its base (the lines
    before it); `lane`: what the workers render (`render`).

    Ranges are scanned by a pool of forked processes, at most one range per worker (plus one) in flight so
    memory stays flat whatever the file size.
    """
    size = os.path.getsize(path)
    needles = needles + _variants_in_head(path, needles)
    ranges = _ranges(path, size, tuning.range_bytes)
    workers = workers or min(len(ranges), os.cpu_count() or 1, 8)
    base = 0
    with ProcessPoolExecutor(workers, mp_context=get_context("fork"), initializer=exit_with_parent,
                             initargs=(os.getpid(),)) as pool:

        def submit(rng: tuple[int, int, bool]) -> Future[Chunk]:
            return pool.submit(_scan_range, path, rng[0], rng[1], needles, rng[2], rng[1] == size,
                               tuning.dense_probe, lane)

        pending: list[Future[Chunk]] = []
        todo = iter(ranges)
        for rng in todo:
            pending.append(submit(rng))
            if len(pending) > workers:
                break
        while pending:
            chunk = pending.pop(0).result()
            if progress is not None:
                progress(tuning.range_bytes)
            nxt = next(todo, None)
            if nxt is not None:
                pending.append(submit(nxt))
            yield chunk, base
            base += chunk.lines
    stats.bytes += size
    stats.lines = base


def stream_chunks(stream: BinaryIO, stats: ScanStats, batch: int = 4096, lane: Lane = CSV_LANE,
                  needles: tuple[bytes, ...] = STATS_NEEDLES) -> Iterator[tuple[Chunk, int]]:
    """The same as `scan_file_chunks` for any stream (stdin, .gz, small files), in one process; the
    numbers are absolute (base 0)."""
    numbers = array("Q")
    parts: list[bytes] = []
    for number, raw in scan_stream_bytes(stream, needles, stats, followers=lane.followers):
        numbers.append(number)
        parts.append(raw)
        if len(parts) >= batch:
            parts.append(b"")
            blob = b"\n".join(parts)
            yield render(blob, len(blob), numbers, lane=lane), 0
            numbers, parts = array("Q"), []
    if parts:
        parts.append(b"")
        blob = b"\n".join(parts)
        yield render(blob, len(blob), numbers, lane=lane), 0
