"""The range workers' rows: vLLM's common V1 stats line (`Engine NNN: Avg prompt throughput: ..., <DEV> KV
cache usage: x%[, Prefix ...][, MM ...]`, read by the parser's own pattern, `parsing/needles.py`) as its
numbers and header words (`Chunk`), all but the time and the line number (the parent knows the file's
clock and how many lines came before the range). Every other line a reader wants is passed on as text
for the general parser, with its place among the rows; the parent makes the records of both
(`records.py`), and the writers of `offline/output/` their bytes.
"""

from __future__ import annotations

import math
import re
from array import array
from dataclasses import dataclass
from typing import NamedTuple

from ...parsing.framing import MAX_LINE_BYTES, hit_lines
from ...parsing.needles import CANONICAL_STATS, HEADER, STATS_FOLLOWER_NEEDLES, STATS_NEEDLES, VARIANT_NEEDLES

__all__ = ["STAMP", "STATS_LANE", "VALUES", "Chunk", "Lane", "keeps_all", "render"]

STAMP = 14
"""Bytes of a `MM-DD HH:MM:SS` stamp."""

@dataclass(frozen=True)
class Lane:
    """Which lines the workers pass on besides the common stats lines they read, and whether they count
    lines."""

    followers: tuple[bytes, ...] = STATS_FOLLOWER_NEEDLES
    """The follower lines a hit takes with it (`framing.hit_lines`): V0's prefix line for stats."""
    keep: tuple[bytes, ...] = STATS_NEEDLES + VARIANT_NEEDLES + STATS_FOLLOWER_NEEDLES
    """Lines not read are passed on when they hold one of these."""
    numbers: bool = True
    """Line numbers (and `Chunk.lines`) are counted. Without, the numbers are not the lines' (0, or a
    count within the range) and `lines` is 0, and a sparse range reads at about twice the speed
    (counting newlines costs more than finding the stats lines): for the commands that print no line
    number (`plot`, `parse --openmetrics`)."""


STATS_LANE = Lane()
VALUES = 8
"""Numbers per row of `Chunk.values`: engine, prompt and generation throughput, running, waiting, KV cache
usage, prefix and MM cache hit rates (NaN when absent)."""


_CANON = re.compile(rf"(?m)^{HEADER}{CANONICAL_STATS}\r?\n".encode())
"""A whole line of vLLM's own header and the common stats message (`parsing/needles.py`)."""


class Chunk(NamedTuple):
    """The rows of a block of lines, as compact bytes (cheap to send from a worker).

    Rows read: `stamps` (14 bytes each), `values` (array('d') bytes, `VALUES` per row), `tails` (each
    row's process name, empty without one, level and KV cache device, spaced; joined by newlines),
    `numbers` (array('Q') bytes). Other lines: `others` (joined by newlines), their `other_numbers`, and
    `positions`: how many rows come before each. Numbers are relative to the block's `base`; `lines` is
    how many lines the block had.
    """

    stamps: bytes
    tails: bytes
    numbers: bytes
    others: bytes
    other_numbers: bytes
    positions: bytes
    lines: int
    values: bytes


def keeps_all(lane: Lane, needles: tuple[bytes, ...]) -> bool:
    """Every line found by `needles` (and `lane.followers`) is one `lane` passes on when not read."""
    return set(needles) | set(lane.followers) <= set(lane.keep)


def render(data: bytes | bytearray, size: int, numbers: array[int] | None, *, start: int = 0,
           first_number: int = 1, lane: Lane = STATS_LANE, every: bool = False) -> Chunk:
    """The chunk of the whole lines in `data[start:size]`; `numbers`: their line numbers, or None for
    consecutive lines numbered from `first_number`. Lines over `MAX_LINE_BYTES` bytes are left out.
    `lane`: which other lines to pass on. `every`: each line of `data` is one to pass on (lines found by
    needles that `lane.keep` holds, `keeps_all`), taken as they are instead of searched for again."""
    stamps: list[bytes] = []
    tails: list[bytes] = []
    canon = array("Q")
    others: list[bytes] = []
    other_numbers = array("Q")
    positions = array("Q")
    values = array("d")
    k, pos = 0, start
    keep, nan = lane.keep, math.nan

    def gap(stop: int) -> None:  # the lines between two rows: those holding a `keep` needle
        nonlocal k
        if every:
            for line in data[pos:stop].split(b"\n")[:-1]:
                others.append(bytes(line))
                other_numbers.append(numbers[k] if numbers is not None else k + first_number)
                positions.append(len(canon))
                k += 1
            return
        counted = pos
        for start in hit_lines(data, pos, stop, keep, limit=MAX_LINE_BYTES)[0]:
            k += data.count(b"\n", counted, start)
            counted = start
            others.append(bytes(data[start:data.find(b"\n", start, stop)]))
            other_numbers.append(numbers[k] if numbers is not None else k + first_number)
            positions.append(len(canon))
        k += data.count(b"\n", counted, stop)

    for m in _CANON.finditer(data, start, size):
        if m.start() > pos:
            gap(m.start())
        process, stamp, engine, prompt, gen, running, waiting, device, kv, prefix, mm = m.groups()
        stamps.append(stamp)
        # the tail: the header's process name and level, and the KV cache's device
        tails.append(b"%s %s %s" % (process or b"", b"DEBUG" if data[m.start(2) - 2] == 0x47 else b"INFO",
                                    device))
        values.extend((int(engine), float(prompt), float(gen), int(running), int(waiting), float(kv),
                       float(prefix) if prefix else nan, float(mm) if mm else nan))
        canon.append(numbers[k] if numbers is not None else k + first_number)
        k += 1
        pos = m.end()
    if pos < size:
        gap(size)
    return Chunk(b"".join(stamps), b"\n".join(tails), canon.tobytes(), b"\n".join(others),
                 other_numbers.tobytes(), positions.tobytes(), k, values.tobytes())
