"""The bulk scanner: the lines of a big stream that hold a few byte strings, at memory speed.

Scanning for the few stats lines among millions of access lines is the whole cost of reading a big
log, so this reads big blocks and looks for the needles with StringZilla's SIMD `find`, and hands over
only the lines that hold them (and the line right after each, for V0's prefix-cache line and the
speculative-decoding lines). Nothing heavy is imported (StringZilla is one C extension, ~1 ms; typed
in `parsing/simd.py`, which the live path's block reader uses too): `logwatch parse --csv` starts fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from ...parsing.framing import MAX_LINE_BYTES, hit_lines
from ...parsing.needles import (
    FOLLOWER_NEEDLES,
    STATS_NEEDLES,
    with_variants,
)
from ...parsing.simd import simd_count, simd_find

__all__ = [
    "ScanStats",
    "read_lines",
    "scan_stream",
    "scan_stream_bytes",
    "simd_count",
    "simd_find",
]

_BLOCK = 8 << 20


@dataclass
class ScanStats:
    """What a scan read, for the summary line and the no-stats hint."""

    bytes: int = 0
    lines: int = 0
    lines_cut: int = 0
    kinds: dict[str, int] = field(default_factory=dict)




def scan_stream(
    stream: BinaryIO,
    needles: tuple[bytes, ...] = STATS_NEEDLES,
    stats: ScanStats | None = None,
    *,
    followers: tuple[bytes, ...] = FOLLOWER_NEEDLES,
    block_size: int = _BLOCK,
) -> Iterator[tuple[int, str]]:
    """Yield `(line_number, text)` for each line of `stream` that contains one of `needles`, and the
    line right after such a line when it contains one of `followers`. Invalid UTF-8 is replaced."""
    for number, raw in scan_stream_bytes(stream, needles, stats, followers=followers, block_size=block_size):
        yield number, raw.decode("utf-8", "replace")


def scan_stream_bytes(
    stream: BinaryIO,
    needles: tuple[bytes, ...] = STATS_NEEDLES,
    stats: ScanStats | None = None,
    *,
    followers: tuple[bytes, ...] = FOLLOWER_NEEDLES,
    block_size: int = _BLOCK,
    detect_variants: bool = True,
) -> Iterator[tuple[int, bytes]]:
    """`scan_stream` without decoding: `(line_number, raw line without its newline)`.

    Constant memory: one block plus the partial line at its end; a line longer than 1 MiB is
    skipped (and counted in `stats.lines_cut`): it is never a stats line. The lines are found by
    `parsing.blocks.hit_lines`, block by block (the first line of a block is a follower's place when
    the block before ended on a hit).
    """
    stats = stats if stats is not None else ScanStats()
    carry = b""
    base = 1  # line number of the first line in the current buffer
    skipping = False  # inside an over-long line: drop bytes up to its newline
    first = True
    check_first = False  # the previous block ended on a hit: its next line may be a follower
    while True:
        chunk = stream.read(block_size)
        if not chunk:
            break
        stats.bytes += len(chunk)
        if first and detect_variants:
            needles = with_variants(needles, chunk)
        first = False
        if skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                continue
            chunk = chunk[nl + 1:]
            base += 1
            skipping = False
        buf = carry + chunk if carry else chunk
        end = buf.rfind(b"\n") + 1
        if end:
            yield from _block(buf, end, base, needles, followers, check_first, stats)
            check_first = _ends_on_hit(buf, end, needles) if followers else False
            base += simd_count(buf, b"\n", 0, end)
        carry = buf[end:]
        if len(carry) > MAX_LINE_BYTES:
            stats.lines_cut += 1
            # the skipped line was the follower candidate: the line after it follows nothing
            carry, skipping, check_first = b"", True, False
    if carry and not skipping:
        carry += b"\n"
        yield from _block(carry, len(carry), base, needles, followers, check_first, stats)
        base += 1
    elif skipping:
        base += 1  # the over-long last line, cut off by the end of the stream
    stats.lines = base - 1


def _block(buf: bytes, end: int, base: int, needles: tuple[bytes, ...], followers: tuple[bytes, ...],
           check_first: bool, stats: ScanStats) -> Iterator[tuple[int, bytes]]:
    starts, cut = hit_lines(buf, 0, end, needles, followers, limit=MAX_LINE_BYTES)
    stats.lines_cut += cut
    if check_first and (not starts or starts[0] != 0):
        stop = buf.find(b"\n", 0, end)
        if stop <= MAX_LINE_BYTES and any(buf.find(f, 0, stop) >= 0 for f in followers):
            starts.insert(0, 0)
    return _lines(buf, end, base, starts)


def _ends_on_hit(buf: bytes, end: int, needles: tuple[bytes, ...]) -> bool:
    """Whether the last line of `buf[:end]` holds a needle (and is not over the cap)."""
    start = buf.rfind(b"\n", 0, end - 1) + 1
    return end - 1 - start <= MAX_LINE_BYTES and any(buf.find(n, start, end) >= 0 for n in needles)


def _lines(buf: bytes, end: int, base: int, starts: list[int]) -> Iterator[tuple[int, bytes]]:
    counted_to, number = 0, base
    for start in starts:
        number += simd_count(buf, b"\n", counted_to, start)
        counted_to = start
        stop = buf.find(b"\n", start, end)
        yield number, buf[start:stop]


def read_lines(stream: BinaryIO, stats: ScanStats | None = None) -> Iterator[tuple[int, str]]:
    """Every line of `stream` as `(line_number, text)`; a line over 1 MiB is cut to 1 MiB and counted."""
    stats = stats if stats is not None else ScanStats()
    number = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES)
        if not raw:
            break
        stats.bytes += len(raw)
        number += 1
        if len(raw) == MAX_LINE_BYTES and not raw.endswith(b"\n"):
            stats.lines_cut += 1
            rest = stream.readline(MAX_LINE_BYTES)
            while rest and not rest.endswith(b"\n"):
                stats.bytes += len(rest)
                rest = stream.readline(MAX_LINE_BYTES)
            stats.bytes += len(rest)
        yield number, raw.decode("utf-8", "replace")
    stats.lines = number
