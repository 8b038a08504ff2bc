"""Bytes to lines, the parts every reader shares: the line cap, the one rule for finding the lines of
a block that hold a needle (`hit_lines`), finding the lines over the cap without a step per line, and
cutting one there without splitting a UTF-8 character. Pure, and light: the offline scanner imports
it without loading the parser."""

from __future__ import annotations

from collections.abc import Iterator

from .simd import simd_find

__all__ = ["MAX_LINE_BYTES", "TEXT_MESSAGES", "hit_lines", "long_lines", "trim_partial_utf8"]

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
