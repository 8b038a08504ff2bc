"""Container log envelopes: the vLLM lines inside Docker json-file, CRI and `docker logs --timestamps`
records, and the container's stamp of each. Pure: no I/O, no clock.

A source's format is told once, from its first line (`detect`); an `Unwrapper` per source then turns
blocks of complete envelope lines into blocks of plain, newline-terminated vLLM lines, in order, with
the envelope line number and the container stamp of each line it produces:

* Docker json-file (`{"log":"...\\n","stream":"stdout","attrs":{...},"time":"...Z"}`): a `log` that
  does not end in a newline is continued by the next record of the same stream (lines over 16 KiB,
  output flushed mid-line); every part carries the first part's `time`.
* CRI (`STAMP STREAM TAG CONTENT`, containerd's RFC 3339 stamps with any number of fraction digits,
  `Z` or an offset, CRI-O's nine digits and an offset): `P` parts are joined per stream until the
  `F` part (the first character of the tag decides, as kubelet reads it).
* `docker logs --timestamps` (`STAMP LINE`): the stamp taken off (a line without one is read as it
  is, timed by vLLM's own stamp).

Parts are joined per stream (stdout and stderr interleave); a joined line is numbered by the envelope
line that ends it and stamped with its first part's time. A joined line longer than the cap is cut
there (`cut` counts it), the rest of it dropped; a part still open at the end of a source is flushed
by `flush()`. A line that is not an envelope of the source's format is skipped, and its number kept in
`malformed` for the caller to count (a parse error of kind `envelope`); nothing here raises.

Ray wraps each line instead: its process prefixes are read by `parse_line`, its log deduplication's
suffix by `ray_repeats`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from orjson import loads as _loads  # twice the standard library's speed on json-file records

from .framing import MAX_LINE_BYTES, trim_partial_utf8

Format = Literal["plain", "docker-json", "cri", "docker-timestamps"]

_STAMP = rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)"
_CRI = re.compile(_STAMP + rb" (?:stdout|stderr) [^ \n]")
_TIMESTAMPS = re.compile(_STAMP + rb" ")
_DOCKER_JSON = re.compile(rb'\{\s*"log"\s*:\s*"')
_STREAMS = {"stdout": b"stdout", "stderr": b"stderr"}
_RAY_MARK = " [repeated "
_RAY_REPEATED = re.compile(
    r" \[repeated ([1-9]\d{0,8})x across cluster\](?: \(Ray deduplicates logs by default\.[^()]{0,400}\))?"
    r"[ \t\r]*$"
)


def ray_repeats(line: str) -> tuple[str, int | None]:
    """`line` without Ray's log deduplication suffix (colours already taken off), and the suffix's count
    N: the line stands for N prints across the cluster, N-1 of them held back by Ray. `(line, None)` for
    a line without the suffix.

    >>> ray_repeats("INFO 11-20 10:00:01 [loggers.py:259] Engine 000: x [repeated 3x across cluster]")
    ('INFO 11-20 10:00:01 [loggers.py:259] Engine 000: x', 3)
    """
    at = line.rfind(_RAY_MARK)
    if at < 0:
        return line, None
    m = _RAY_REPEATED.match(line, at)
    if m is None:
        return line, None
    return line[:at], int(m.group(1))


def detect(head: bytes) -> Format | None:
    """The format of a source from its first bytes (a few hundred are enough), or None while they hold
    no line yet (nothing but blank lines, or not even the start of a line: ask again with more)."""
    start = len(head) - len(head.lstrip(b"\r\n"))
    if start == len(head):
        return None
    if _DOCKER_JSON.match(head, start):
        return "docker-json"
    end = head.find(b"\n", start)
    first = head[start:] if end < 0 else head[start:end]
    if _CRI.match(first):
        return "cri"
    if _TIMESTAMPS.match(first):
        return "docker-timestamps"
    if end < 0 and len(first) < 64 and (first[:1] == b"{" or first[:1].isdigit()):
        return None  # too short to tell an envelope from a plain line yet
    return "plain"


def container_time(stamp: bytes) -> datetime | None:
    """The instant of an RFC 3339 container stamp (its own zone kept; nanoseconds cut to micro), or
    None if it is not one."""
    text = stamp.decode("ascii", "replace")
    dot = text.find(".")
    if dot > 0:  # fromisoformat reads at most six fraction digits: drop the rest
        end = dot + 1
        while end < len(text) and text[end].isdigit():
            end += 1
        if end - dot > 7:
            text = text[: dot + 7] + text[end:]
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


@dataclass
class Unwrapped:
    """One block unwrapped: `data` holds the produced lines (each ends in a newline); `numbers[i]` and
    `stamps[i]` are the envelope line number and the container stamp of its i-th line."""

    data: bytes = b""
    numbers: list[int] = field(default_factory=list)
    stamps: list[bytes] = field(default_factory=list)
    malformed: list[int] = field(default_factory=list)
    """Envelope lines that were not of the source's format (skipped)."""
    cut: int = 0
    """Joined lines longer than the cap (cut there)."""


@dataclass(slots=True)
class _Partial:
    """The parts of one stream's line so far."""

    parts: list[bytes] = field(default_factory=list)
    size: int = 0
    stamp: bytes = b""
    number: int = 0
    skipping: bool = False  # past the cap: drop parts up to the line's end


class Unwrapper:
    """Per source: blocks of envelope lines in, blocks of plain lines out (`unwrap`, `flush`)."""

    def __init__(self, fmt: Format, *, cap: int = MAX_LINE_BYTES) -> None:
        if fmt == "plain":
            raise ValueError("a plain source needs no unwrapping")
        self.format = fmt
        self.cap = cap
        self._partials: dict[bytes, _Partial] = {}
        self._record: Callable[[bytes], tuple[bytes, bytes, bytes, bool] | None] = {
            "docker-json": _docker_record, "cri": _cri_record, "docker-timestamps": _timestamps_record,
        }[fmt]

    def unwrap(self, data: bytes, first: int = 1) -> Unwrapped:
        """The lines of `data` (complete envelope lines; a last one without its newline is read as one),
        the first numbered `first`."""
        out = Unwrapped()
        chunks: list[bytes] = []
        lines = data.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()
        record = self._record
        for number, raw in enumerate(lines, first):
            if not raw:
                continue  # a blank line holds no record and no vLLM line
            parsed = record(raw)
            if parsed is None:
                out.malformed.append(number)
                continue
            stream, stamp, content, full = parsed
            partial = self._partials.get(stream)
            if partial is None:
                if full and len(content) <= self.cap:  # the common case: a whole line in one record
                    chunks.append(content + b"\n" if content[-1:] != b"\n" else content)
                    self._mark(out, content, number, stamp)
                    continue
                partial = self._partials[stream] = _Partial()
            self._part(out, chunks, partial, content, full, number, stamp)
        out.data = b"".join(chunks)
        return out

    def flush(self) -> Unwrapped:
        """The lines still open at the end of a source (a dangling partial), oldest first."""
        out = Unwrapped()
        chunks: list[bytes] = []
        for partial in sorted(self._partials.values(), key=lambda p: p.number):
            if partial.parts:
                self._emit(out, chunks, partial, partial.number)
        self._partials.clear()
        out.data = b"".join(chunks)
        return out

    def _part(
        self, out: Unwrapped, chunks: list[bytes], partial: _Partial, content: bytes, full: bool,
        number: int, stamp: bytes,
    ) -> None:
        if partial.skipping:
            partial.skipping = not full
            return
        if not partial.parts:
            partial.stamp, partial.number = stamp, number
        if content:
            partial.parts.append(content)
            partial.size += len(content)
        if partial.size > self.cap:
            out.cut += 1
            joined = trim_partial_utf8(b"".join(partial.parts)[: self.cap])
            partial.parts, partial.size = [joined], len(joined)
            self._emit(out, chunks, partial, number)
            partial.skipping = not full
        elif full:
            self._emit(out, chunks, partial, number)

    def _emit(self, out: Unwrapped, chunks: list[bytes], partial: _Partial, number: int) -> None:
        line = b"".join(partial.parts)
        if line[-1:] != b"\n":
            line += b"\n"
        chunks.append(line)
        self._mark(out, line, number, partial.stamp)
        partial.parts, partial.size = [], 0

    @staticmethod
    def _mark(out: Unwrapped, line: bytes, number: int, stamp: bytes) -> None:
        """One number and stamp for each line `line` makes (a `log` holding inner newlines makes more)."""
        n = line.count(b"\n", 0, len(line) - 1) + 1
        out.numbers.extend([number] * n)
        out.stamps.extend([stamp] * n)


def _docker_record(raw: bytes) -> tuple[bytes, bytes, bytes, bool] | None:
    """(stream, stamp, content, whole) of a json-file record; None if it is not one."""
    try:
        rec: Any = _loads(raw)
    except ValueError:
        return None
    if type(rec) is not dict:
        return None
    log, stream, stamp = rec.get("log"), rec.get("stream"), rec.get("time")
    if type(log) is not str or type(stamp) is not str:
        return None
    content = log.encode("utf-8", "replace")
    name = _STREAMS.get(stream, b"?") if type(stream) is str else b"?"
    return name, stamp.encode(), content, content[-1:] == b"\n"


def _cri_record(raw: bytes) -> tuple[bytes, bytes, bytes, bool] | None:
    """(stream, stamp, content, whole) of a CRI line; None if it is not one."""
    one = raw.find(b" ")
    two = raw.find(b" ", one + 1)
    if one < 20 or two < 0 or raw[4:5] != b"-" or raw[10:11] != b"T":
        return None
    stream = raw[one + 1 : two]
    if stream != b"stdout" and stream != b"stderr":
        return None
    three = raw.find(b" ", two + 1)
    tag = raw[two + 1 :] if three < 0 else raw[two + 1 : three]
    if not tag:
        return None
    return stream, raw[:one], b"" if three < 0 else raw[three + 1 :], tag[:1] != b"P"


def _timestamps_record(raw: bytes) -> tuple[bytes, bytes, bytes, bool]:
    """(stream, stamp, content, whole) of a `docker logs --timestamps` line; a line without the stamp
    (a pipe that mixes in other output) is read as it is, without a container time."""
    one = raw.find(b" ")
    if one < 20 or raw[4:5] != b"-" or raw[10:11] != b"T":
        return b"", b"", raw, True
    return b"", raw[:one], raw[one + 1 :], True
