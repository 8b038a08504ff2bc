"""The bulk scanner: the lines of a big stream that hold a few byte strings, at memory speed.

Scanning for the few stats lines among millions of access lines is the whole cost of reading a big
log, so this reads big blocks and looks for the needles with StringZilla's SIMD `find`, and hands over
only the lines that hold them (and the line right after each, for V0's prefix-cache line and the
speculative-decoding lines). Nothing heavy is imported (StringZilla is one C extension, shared with
the live path's block reader in `parsing/framing.py`): `logwatch parse --csv` starts fast.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from ...parsing.framing import MAX_LINE_BYTES, Framer, LineBlock, hit_lines, simd_count, simd_find
from ...parsing.needles import (
    FOLLOWER_NEEDLES,
    STATS_NEEDLES,
    with_variants,
)

__all__ = ["Frame", "block_lines", "scan_lines", "simd_count", "simd_find"]

_BLOCK = 8 << 20


@dataclass(slots=True)
class Frame(Framer):
    """The framer's state for bytes read once from the start (a stream); it holds its own counts (the
    framer's `Counts`: `frame.consume(data, out, cap, frame)`)."""

    path: str = ""
    pos: int = 0
    line_start: int = 0
    next_number: int = 1
    discarding: bool = False
    buf: bytearray = field(default_factory=bytearray)
    lines: int = 0
    lines_cut: int = 0


def scan_lines(
    stream: BinaryIO,
    needles: tuple[bytes, ...] | None = STATS_NEEDLES,
    *,
    followers: tuple[bytes, ...] = FOLLOWER_NEEDLES,
    block_size: int = _BLOCK,
) -> Iterator[tuple[int, bytes]]:
    """`(line_number, raw line without its newline)` for each line of `stream` that contains one of
    `needles` (every line with None), and the line right after such a line when it contains one of
    `followers`.

    Constant memory: one block plus the partial line at its end (the one `Framer`); a line longer than
    1 MiB is cut, and left out when looking for needles: it is never a stats line.
    """
    frame = Frame()
    blocks: list[LineBlock] = []
    check_first = False  # the previous block ended on a hit: its next line may be a follower
    while chunk := stream.read(block_size):
        if frame.pos == 0 and needles is not None:
            needles = with_variants(needles, chunk)
        frame.consume(chunk, blocks, MAX_LINE_BYTES, frame)
        for block in blocks:
            check_first = yield from block_lines(block, needles, followers, check_first)
        blocks.clear()
    frame.flush_partial(blocks, frame)
    for block in blocks:
        yield from block_lines(block, needles, followers, check_first)


def block_lines(block: LineBlock, needles: tuple[bytes, ...] | None, followers: tuple[bytes, ...],
           check_first: bool) -> Generator[tuple[int, bytes], None, bool]:
    """The wanted lines of one block; returns whether its last line is a hit."""
    data, end = block.data, len(block.data)
    if needles is None:
        for k, line in enumerate(data.split(b"\n")[:-1]):
            yield block.number + k, line
        return False
    if block.cut:  # never a stats line, nor a follower: the line after it follows nothing
        return False
    starts, _ = hit_lines(data, 0, end, needles, followers)
    if check_first and (not starts or starts[0] != 0):
        stop = data.find(b"\n")
        if any(data.find(f, 0, stop) >= 0 for f in followers):
            starts.insert(0, 0)
    number, counted_to = block.number, 0
    for start in starts:
        number += simd_count(data, b"\n", counted_to, start)
        counted_to = start
        yield number, data[start:data.find(b"\n", start, end)]
    last = data.rfind(b"\n", 0, end - 1) + 1
    return bool(followers) and any(data.find(n, last, end) >= 0 for n in needles)
