"""The range workers of every offline reader: find the lines a reader wants in a big file on every
core, and render them (`rows.py`).

Finding the few wanted lines among millions of access lines (and counting lines for their numbers)
costs most on big logs: SIMD `find` and `count` (StringZilla) over big blocks, one forked process per
range of the file, each range's lines rendered in its worker (`rows.render`). `chunk_of` is the one
chunk reader: a worker's range, or each block of the one framer over any stream in this process
(`stream_chunks`).
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO

from ...parsing.framing import MAX_LINE_BYTES, LineBlock, hit_lines
from ...parsing.needles import STATS_FOLLOWER_NEEDLES, STATS_NEEDLES, with_variants
from ..children import exit_with_parent
from .rows import STATS_LANE, Chunk, Lane, keeps_all, render
from .stream import Frame, simd_count, simd_find

if TYPE_CHECKING:
    from concurrent.futures import Future

__all__ = ["DEFAULT_TUNING", "Tuning", "scan_file_chunks", "stream_chunks"]

_WORKER_BLOCK = 1 << 20  # find + count twice over a block that stays in the CPU cache
_MAX_FOLLOWER = 64 << 10
_STREAM_BLOCK = 8 << 20


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


_buffer = bytearray()
"""A worker's read buffer, reused from range to range: a fresh 4 MiB `bytes` per range costs page
faults and allocator work comparable to scanning it."""


def _scan_range(path: str, start: int, end: int, needles: tuple[bytes, ...], inside_long_line: bool,
                at_eof: bool, dense_probe: int, lane: Lane = STATS_LANE) -> Chunk:
    """Worker: the chunk of `path[start:end]`, line numbers relative to the range.

    `inside_long_line`: the range was cut inside a line over `MAX_LINE_BYTES` bytes (never a stats line):
    its first bytes, up to a newline, are the rest of that line. A range that does not end the file
    may end inside such a line too: those last bytes belong to it as well. Ranges are cut at line
    ends (`_ranges`), so no partial line is carried: the framer's work here is these two edges."""
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
    chunk = chunk_of(data, first, complete, 1, needles, lane, dense_probe)
    if not lane.numbers:
        return chunk
    return chunk._replace(lines=chunk.lines + simd_count(data, b"\n", complete, size))


def _scan_ranges(path: str, task: list[tuple[int, int, bool]], size: int, needles: tuple[bytes, ...],
                 dense_probe: int, lane: Lane) -> list[Chunk]:
    """Worker: the chunks of a few consecutive ranges of `path` (`_scan_range` each)."""
    return [_scan_range(path, start, end, needles, inside, end == size, dense_probe, lane)
            for start, end, inside in task]


def chunk_of(data: bytes | bytearray, first: int, complete: int, number: int, needles: tuple[bytes, ...],
             lane: Lane, dense_probe: int, follows_hit: bool = False) -> Chunk:
    """The chunk of the whole lines of `data[first:complete]` that hold `needles` (and their followers),
    the line at `data[0]` numbered `number`: the one chunk reader of the range workers and of a stream
    (`stream_chunks`). `follows_hit`: the line before `data` held a needle, so the first line is a
    follower's place. Without `lane.numbers` no newline is counted: the numbers and `lines` are 0."""
    first_number, probe = number, min(complete, first + dense_probe)
    if simd_count(data, needles[0], first, probe) * 2 > simd_count(data, b"\n", first, probe):
        # A stats-dense block: every line, read in bulk.
        if not lane.numbers:
            return render(data, complete, None, start=first, first_number=0, lane=lane)._replace(lines=0)
        skipped = simd_count(data, b"\n", 0, first)
        chunk = render(data, complete, None, start=first, first_number=number + skipped, lane=lane)
        return chunk._replace(lines=skipped + chunk.lines)
    counting = lane.numbers  # without: the numbers stay 0 and no newline is counted
    numbers = array("Q")
    parts: list[bytes] = []
    counted = 0  # newlines are counted once, window by window, while the window is in cache
    window = first
    while window < complete:
        # Windows of about 1 MiB, cut at a line end, so `find` and `count` read cached memory.
        stop = simd_find(data, b"\n", min(window + _WORKER_BLOCK, complete - 1), complete) + 1 or complete
        starts, _ = hit_lines(data, window, stop, needles, lane.followers, end=complete,
                              limit=MAX_LINE_BYTES)
        if follows_hit and window == first and (not starts or starts[0] != first):
            line_end = data.find(b"\n", first, complete)
            if any(data.find(f, first, line_end) >= 0 for f in lane.followers):
                starts.insert(0, first)
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
    lines = number - first_number + simd_count(data, b"\n", counted, complete) if counting else 0
    return render(blob, len(blob), numbers, lane=lane, every=keeps_all(lane, needles))._replace(lines=lines)


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


def _head(path: str, needles: tuple[bytes, ...]) -> tuple[tuple[bytes, ...], bool]:
    """`needles` and the variant needles the file's first 8 MiB hold, and whether those are stats-dense
    (more than half their lines hits, as `chunk_of` tells a dense block): those 8 MiB are not kept
    (the generator's frame lives as long as the scan, and its workers fork from it)."""
    with open(path, "rb") as fh:
        head = fh.read(8 << 20)
    end = len(head)
    dense = simd_count(head, needles[0], 0, end) * 2 > simd_count(head, b"\n", 0, end)
    return with_variants(needles, head), dense


MMAP_THRESHOLD = 4 << 20
"""Allocations of this size or more get pages of their own, given back when freed (`_steady_heap`)."""


def _steady_heap() -> None:
    """Fix glibc's mmap threshold at `MMAP_THRESHOLD`. Left dynamic, it rises to the size of the
    biggest buffer freed (up to 32 MiB), and the chunks that come from the workers, a few MiB each,
    are then cut from the heap, whose freed pieces the process keeps: `plot` of the 200 MB stats-only
    log peaked at 157 MB RSS with it dynamic, 145 MB fixed, in the same time (bench/RESULTS.md).
    Nothing on a C library without `mallopt`. The symbols the process already has: no library search."""
    import ctypes  # only where a file is read in ranges: `parse --csv` of a small file does without

    try:
        mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    except OSError:
        mallopt = None
    if mallopt is not None:
        mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD


def scan_file_chunks(
    path: str,
    needles: tuple[bytes, ...],
    workers: int | None = None,
    progress: Callable[[int], object] | None = None,
    tuning: Tuning = DEFAULT_TUNING,
    lane: Lane = STATS_LANE,
) -> Iterator[tuple[Chunk, int]]:
    """The chunks of a big regular file, range by range in file order, each with its base (the lines
    before it); `lane`: what the workers render (`render`).

    Ranges are scanned by a pool of forked processes, at most one task per worker (plus one) in flight so
    memory stays flat whatever the file size.
    """
    from concurrent.futures import ProcessPoolExecutor  # a file read in one process does without
    from multiprocessing import get_context

    size = os.path.getsize(path)
    _steady_heap()
    needles, dense = _head(path, needles)
    ranges = _ranges(path, size, tuning.range_bytes)
    # A task costs this process's pool threads a hand-off (~0.15 ms, taken from the workers' cores), and
    # a range is read whole, so a bigger one falls out of the CPU's cache: a sparse file's ranges go to
    # the workers a few at a time, in about 64 tasks; a dense file's one at a time (their chunks are
    # big, and those of the tasks in flight are held here).
    per_task = 1 if dense else max(1, len(ranges) // 64)
    tasks = [ranges[i:i + per_task] for i in range(0, len(ranges), per_task)]
    workers = workers or min(len(tasks), os.cpu_count() or 1, 8)
    base = 0
    with ProcessPoolExecutor(workers, mp_context=get_context("fork"), initializer=exit_with_parent,
                             initargs=(os.getpid(),)) as pool:

        def submit(task: list[tuple[int, int, bool]]) -> Future[list[Chunk]]:
            return pool.submit(_scan_ranges, path, task, size, needles, tuning.dense_probe, lane)

        pending: list[Future[list[Chunk]]] = []
        todo = iter(tasks)
        for task in todo:
            pending.append(submit(task))
            if len(pending) > workers:
                break
        while pending:
            chunks = pending.pop(0).result()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append(submit(nxt))
            for chunk in chunks:
                if progress is not None:
                    progress(tuning.range_bytes)
                yield chunk, base
                base += chunk.lines


def stream_chunks(stream: BinaryIO, lane: Lane = STATS_LANE,
                  needles: tuple[bytes, ...] = STATS_NEEDLES) -> Iterator[tuple[Chunk, int]]:
    """The same as `scan_file_chunks` for any stream (stdin, .gz, small files), in one process: the
    blocks of the one framer (`parsing/framing.py`), each read by `chunk_of`; the numbers are absolute
    (base 0)."""
    frame, blocks = Frame(), list[LineBlock]()
    follows_hit = False  # the block before ended on a hit: a follower may start this one
    while data := stream.read(_STREAM_BLOCK):
        if frame.pos == 0:
            needles = with_variants(needles, data)
        frame.consume(data, blocks, MAX_LINE_BYTES, frame)
        follows_hit = yield from _framed(blocks, needles, lane, follows_hit)
    frame.flush_partial(blocks, frame)
    yield from _framed(blocks, needles, lane, follows_hit)


def _framed(blocks: list[LineBlock], needles: tuple[bytes, ...], lane: Lane,
            follows_hit: bool) -> Generator[tuple[Chunk, int], None, bool]:
    """The chunks of the framer's blocks (emptied); whether the last one ends on a hit."""
    for block in blocks:
        data = block.data
        if block.cut:  # a line over the cap is never a stats line, nor a follower
            follows_hit = False
            continue
        yield chunk_of(data, 0, len(data), block.number, needles, lane, DEFAULT_TUNING.dense_probe,
                       follows_hit), 0
        last = data.rfind(b"\n", 0, len(data) - 1) + 1
        follows_hit = bool(lane.followers) and any(data.find(n, last) >= 0 for n in needles)
    blocks.clear()
    return follows_hit
