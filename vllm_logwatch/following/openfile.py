"""One open file of the follower and the lines in it: read bytes in, complete lines out.

A half-written last line waits for its newline; a line longer than the cap is cut (at a character
boundary) and counted, the rest of it skipped, so memory stays bounded whatever the file holds; bad
UTF-8 is replaced, never fatal. No log text is kept beyond the line being assembled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "FINGERPRINT_BYTES", "FollowerStats", "LogLine", "OpenFile", "fingerprint_of", "open_log", "read_at",
    "trim_partial_utf8",
]

FINGERPRINT_BYTES = 1024  # the state file recognises a file by the hash of its first bytes


@dataclass(frozen=True, slots=True)
class LogLine:
    """One complete line of a followed file, as the parser and the metrics see it.

    ``offset`` is the byte offset of the line start in ``source``; ``number`` is 1-based, counted from
    the file start when we read it from there, else from where we started. ``text`` has its ``\\n``
    and trailing ``\\r`` removed; ``cut`` says it was longer than the cap and truncated.
    """

    source: str
    offset: int
    number: int
    text: str
    cut: bool = False


@dataclass(slots=True)
class FollowerStats:
    """Counters the exporter publishes about itself (no log text, ever: logs hold users' prompts)."""

    lines: int = 0
    bytes: int = 0
    rotations: int = 0
    truncations: int = 0
    read_errors: int = 0
    lines_cut: int = 0
    files_opened: int = 0
    file_switches: int = 0
    state_errors: int = 0
    last_error: str | None = None  # the last read error (counted in read_errors)
    last_state_error: str | None = None  # the last state file error (counted in state_errors)


@dataclass(slots=True)
class OpenFile:
    """The open file and where we are in it."""

    fd: int
    path: str
    dev: int
    ino: int
    pos: int  # next byte read() returns
    line_start: int  # offset of the first byte in buf (the next line to deliver)
    next_number: int
    discarding: bool = False  # inside a line already delivered cut (or begun before we started)
    buf: bytearray = dataclasses.field(default_factory=bytearray)
    fingerprint: tuple[str, int] | None = None  # (sha256, bytes) of the first bytes, up to FINGERPRINT_BYTES
    start: int = 0  # the offset reading started at

    @property
    def committed(self) -> int:
        """Offset just after the last line delivered: where a restart must resume."""
        return self.pos if self.discarding else self.line_start

    def consume(self, data: bytes, out: list[LogLine], cap: int, stats: FollowerStats) -> None:
        """Split ``data`` (read at ``self.pos``) into lines; hold a partial one, never more than the cap."""
        base = self.pos
        self.pos += len(data)
        i, n = 0, len(data)
        while i < n:
            nl = data.find(b"\n", i)
            if self.discarding:
                if nl < 0:
                    return
                self.discarding = False
                i = nl + 1
                self.line_start = base + i
                continue
            end = n if nl < 0 else nl
            held = len(self.buf)
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
            elif held:
                raw = bytes(self.buf) + data[i:nl]
                self.buf.clear()
                self.emit(raw, False, out, stats)
            else:
                self.emit(data[i:nl], False, out, stats)
            i = nl + 1
            self.line_start = base + i

    def flush_partial(self, out: list[LogLine], stats: FollowerStats) -> None:
        """The file is done (rotated, truncated, superseded): a held partial line is all there is."""
        if self.buf and not self.discarding:
            self.emit(bytes(self.buf), False, out, stats)
            self.buf.clear()
            self.line_start = self.pos
        self.discarding = False

    def emit(self, raw: bytes, cut: bool, out: list[LogLine], stats: FollowerStats) -> None:
        if cut:
            raw = trim_partial_utf8(raw)
            stats.lines_cut += 1
        elif raw.endswith(b"\r"):
            raw = raw[:-1]
        out.append(LogLine(self.path, self.line_start, self.next_number, raw.decode("utf-8", "replace"), cut))
        self.next_number += 1
        stats.lines += 1


def open_log(path: str, place: Callable[[int, os.stat_result], tuple[int, int, bool]]
             ) -> tuple[OpenFile, os.stat_result] | None:
    """`path` opened read-only at `place(fd, stat)` = (offset, next line number, inside a line), with
    its first bytes' fingerprint; None if it does not exist. Raises OSError (the descriptor closed)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        start, number, discarding = place(fd, st)
        if start:
            os.lseek(fd, start, os.SEEK_SET)
        fingerprint = fingerprint_of(read_at(fd, FINGERPRINT_BYTES, 0))
    except OSError:
        os.close(fd)
        raise
    return OpenFile(fd, path, st.st_dev, st.st_ino, start, start, number, discarding,
                    fingerprint=fingerprint, start=start), st


def fingerprint_of(head: bytes) -> tuple[str, int]:
    """(hash, length) of a file's first bytes."""
    return hashlib.sha256(head).hexdigest(), len(head)


def read_at(fd: int, size: int, offset: int) -> bytes:
    """Read without moving the descriptor's position (the follower's read position lives there)."""
    return os.pread(fd, size, offset) if size > 0 else b""


def trim_partial_utf8(raw: bytes) -> bytes:
    """Drop a multi-byte character cut in half at the cap, instead of turning it into U+FFFD."""
    for back in range(1, min(4, len(raw)) + 1):
        byte = raw[-back]
        if byte & 0xC0 != 0x80:  # the last character starts here
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return raw[:-back] if byte >= 0xC0 and back < need else raw
    return raw
