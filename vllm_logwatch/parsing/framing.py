"""Bytes to lines, the parts every reader shares: the line cap, the one framer (`Framer`), the one
rule for finding the lines of a block that hold a needle (`hit_lines`), finding the lines over the cap
without a step per line, and cutting one there without splitting a UTF-8 character; StringZilla's SIMD
`find` and `count`. Pure, and light: the offline scanner imports it without loading the parser."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import stringzilla

simd_find: Callable[[bytes | bytearray, bytes, int, int], int] = stringzilla.find
"""`text.find(sub, start, end)` by StringZilla's SIMD search (log text defeats CPython's skip table)."""
simd_count: Callable[[bytes | bytearray, bytes, int, int], int] = stringzilla.count
"""`text.count(sub, start, end)` by StringZilla (CPython counts newlines one byte at a time)."""

MAX_LINE_BYTES = 1 << 20
"""The line cap: a longer line is cut and counted (live) or left out (offline); it is never a stats
line (a dumped prompt, binary junk)."""


TEXT_MESSAGES = (b"Received request ", b"Generated response ")
"""The request lines that carry users' text (a prompt, an output), in which any needle may stand ("took",
"version"): such a line is a hit only for a reader that looks for them (its needles hold these)."""
_TEXT_HEAD = 256
"""A line's message starts within this many bytes (vLLM's header, a container's prefix before it)."""


def long_lines(data: bytes, start: int, end: int, cap: int) -> Iterator[int]:
    """The start offset of each line of `data[start:end]` longer than `cap` bytes (`end` just after a
    newline). Strided: one backward search every `cap` bytes, none per line."""
    p = start
    while p + cap < end - 1:  # a line starting at p and longer than cap ends past p + cap
        q = data.rfind(b"\n", p, p + cap + 1)
        if q >= 0:
            p = q + 1
            continue
        yield p
        p = data.find(b"\n", p + cap, end) + 1
        if p == 0:
            return


def trim_partial_utf8(raw: bytes) -> bytes:
    """Drop a multi-byte character cut in half at the cap, instead of turning it into U+FFFD."""
    for back in range(1, min(4, len(raw)) + 1):
        byte = raw[-back]
        if byte & 0xC0 != 0x80:  # the last character starts here
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return raw[:-back] if byte >= 0xC0 and back < need else raw
    return raw


def hit_lines(
    data: bytes | bytearray, lo: int, hi: int, needles: tuple[bytes, ...], followers: tuple[bytes, ...] = (),
    *, end: int | None = None, limit: int | None = None,
) -> tuple[list[int], int]:
    """(the starts of the lines holding one of `needles` at an offset in `data[lo:hi]`, in order, and
    how many such lines were left out for their length): the one rule every reader (live and offline)
    finds its lines by.

    The line right after a hit is a hit too when it holds one of `followers` (V0's prefix-cache line,
    the speculative-decoding lines: they sit after a stats line and matter only there). `end`: where the
    whole lines of `data` end (`hi` by default); a line or a follower not ended by then is read up to
    it. With `limit`, a line longer than `limit` bytes is left out, and counted, and its follower is not
    looked at (a line over the cap is never a stats line). A request line with users' text is a hit only
    when `needles` look for it (`TEXT_MESSAGES`).

    >>> hit_lines(b"a\\nStats 1\\nPrefix\\nPrefix\\n", 0, 24, (b"Stats",), (b"Prefix",))
    ([2, 10], 0)
    """
    stop_all = hi if end is None else end
    starts: set[int] = set()
    cut: set[int] = set()
    texts = () if any(m in needles for m in TEXT_MESSAGES) else TEXT_MESSAGES
    for needle in needles:
        pos = simd_find(data, needle, lo, hi)
        while pos >= 0:
            start = data.rfind(b"\n", 0, pos) + 1
            stop = data.find(b"\n", pos, stop_all)
            if stop < 0:
                stop = stop_all
            if limit is not None and stop - start > limit:
                cut.add(start)
            elif texts and any(data.find(t, start, min(stop, start + _TEXT_HEAD)) >= 0 for t in texts):
                pass  # a needle in a prompt or an output (`TEXT_MESSAGES`)
            else:
                starts.add(start)
                nxt = stop + 1
                if followers and nxt < stop_all:
                    nstop = data.find(b"\n", nxt, stop_all)
                    if nstop < 0:
                        nstop = stop_all
                    if (limit is None or nstop - nxt <= limit) and any(
                            data.find(f, nxt, nstop) >= 0 for f in followers):
                        starts.add(nxt)
            pos = simd_find(data, needle, stop + 1, hi) if stop + 1 < hi else -1
    return sorted(starts), len(cut)


@dataclass(frozen=True, slots=True)
class LineBlock:
    """Complete lines of one source, as read: `count` lines in `data`, each ending in `\\n`.

    `offset` is the byte offset of the first line in `source` (its path), `number` its line number
    (1-based, counted from the file start when read from there, else from where reading started). `cut`:
    one line, longer than the cap, truncated to it (its `data` is no slice of the file then). The lines'
    `\\r` and UTF-8 are left as read: the block scan sees to them.
    """

    source: str
    offset: int
    number: int
    data: bytes
    count: int
    cut: bool = False
    key: tuple[tuple[str, str], ...] = ()
    """The labels of the source it came from (a many-source watch: `following/many.py`), else ()."""


class Counts(Protocol):
    """What the framer counts: lines handed over, and those cut at the cap."""

    lines: int
    lines_cut: int


class Framer:
    """The one framer of every reader (a followed file, run mode's pipe, the offline stream and range
    readers): read bytes in, blocks of complete lines out.

    A read becomes one `LineBlock`: the bytes up to its last newline, as read, with their first line's
    number and offset and a SIMD count of their lines; no per-line work. A partial last line waits for
    its newline; a line longer than the cap (found by a strided search, `long_lines`) is cut at a
    character boundary, counted and handed over alone, the rest of it skipped, so memory stays bounded
    whatever the source holds. The state lives in the subclass's fields.
    """

    path: str
    pos: int  # next byte a read returns
    line_start: int  # offset of the first byte in buf (the next line to deliver)
    next_number: int
    discarding: bool  # inside a line already delivered cut (or begun before reading started)
    buf: bytearray

    def consume(self, data: bytes, out: list[LineBlock], cap: int, stats: Counts) -> None:
        """Hand the complete lines of `data` (read at `self.pos`) to `out` as blocks; hold a partial last
        line, never more than the cap of it."""
        base = self.pos
        self.pos += len(data)
        i, n = 0, len(data)
        if self.discarding:
            nl = data.find(b"\n")
            if nl < 0:
                return
            self.discarding = False
            i = nl + 1
            self.line_start = base + i
        if self.buf:  # the line begun in an earlier read
            nl = data.find(b"\n", i)
            end, held = n if nl < 0 else nl, len(self.buf)
            if held + end - i > cap:
                raw = bytes(self.buf) + data[i : i + cap - held]
                self.buf.clear()
                self.emit(raw, True, out, stats)
                if nl < 0:
                    self.discarding = True
                    return
            elif nl < 0:
                self.buf += data[i:]
                return
            else:
                raw = bytes(self.buf) + data[i:nl]
                self.buf.clear()
                self.emit(raw, False, out, stats)
            i = nl + 1
            self.line_start = base + i
        last = data.rfind(b"\n", i) + 1
        for long in (*long_lines(data, i, last, cap), last):
            if long > i:
                block = data if i == 0 and long == n else data[i:long]
                self.emit_block(block, simd_count(block, b"\n", 0, len(block)), out, stats)
                self.line_start = base + long
            if long == last:
                break
            self.emit(data[long : long + cap], True, out, stats)
            i = data.find(b"\n", long + cap) + 1
            self.line_start = base + i
        i = max(i, last)
        if n - i > cap:  # a line over the cap without its newline yet: cut now, skip its rest
            self.emit(data[i : i + cap], True, out, stats)
            self.discarding = True
        elif i < n:
            self.buf += data[i:]

    def flush_partial(self, out: list[LineBlock], stats: Counts) -> None:
        """The file is done (rotated, truncated, superseded): a held partial line is all there is."""
        if self.buf and not self.discarding:
            self.emit(bytes(self.buf), False, out, stats)
            self.buf.clear()
            self.line_start = self.pos
        self.discarding = False

    def emit(self, raw: bytes, cut: bool, out: list[LineBlock], stats: Counts) -> None:
        """One line (without its newline) as a block of its own: cut at the cap, or assembled."""
        if cut:
            raw = trim_partial_utf8(raw)
            stats.lines_cut += 1
        self.emit_block(raw + b"\n", 1, out, stats, cut=cut)

    def emit_block(self, data: bytes, count: int, out: list[LineBlock], stats: Counts, *,
                   cut: bool = False) -> None:
        out.append(LineBlock(self.path, self.line_start, self.next_number, data, count, cut))
        self.next_number += count
        stats.lines += count
