"""Bytes to lines, the parts every reader shares: the line cap, finding the lines over it without a
step per line, and cutting one there without splitting a UTF-8 character. Pure, and light: the
offline scanner imports it without loading any pydantic model."""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["MAX_LINE_BYTES", "long_lines", "trim_partial_utf8"]

MAX_LINE_BYTES = 1 << 20
"""The line cap: a longer line is cut and counted (live) or left out (offline); it is never a stats
line (a dumped prompt, binary junk)."""


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
