"""How a source is read, decided in one place for every offline command (`route`): `ranges` (a big
plain regular file, by the range workers on every core), `stream` (any other plain source, the same
workers' record form made in this process) or `general` (a container log, or a caller that asked for the
reference: `parse_line` and the Assembler). docs/design.md ("Reading") says why; the products are the
same whatever the route (tests/integration/test_fast*.py).
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO, Literal

from ...parsing.envelope import Format, detect
from .inputs import Source, open_source, progress_bar
from .ranges import Tuning, scan_file_chunks
from .rows import Chunk, Lane

__all__ = ["Route", "opened", "range_chunks", "route", "sniff"]

_HEAD = 512

Route = Literal["ranges", "stream", "general"]


def route(source: Source, tuning: Tuning | None) -> Route:
    """The way `source` is read (see the module's text); `tuning` None asks for the general parser."""
    if tuning is None:
        return "general"
    if source.is_stream:
        return "stream"
    try:
        with open_source(source) as raw:
            if sniff(raw) != "plain":
                return "general"
            size = 0 if isinstance(raw, gzip.GzipFile) else os.stat(source.path).st_size
    except Exception:  # the stream route opens it again and says why, in the caller's words
        return "stream"
    return "ranges" if size >= tuning.parallel_min_bytes else "stream"


def range_chunks(source: Source, needles: tuple[bytes, ...], tuning: Tuning, lane: Lane
                 ) -> Iterator[tuple[Chunk, int]]:
    """The `ranges` route: `ranges.scan_file_chunks`, with a progress bar on a terminal."""
    with progress_bar(source) as update:
        yield from scan_file_chunks(source.path, needles, progress=update, tuning=tuning, lane=lane)


@contextmanager
def opened(source: Source) -> Iterator[tuple[BinaryIO, Format]]:
    """The `stream` route: the source opened (a progress bar on a terminal) and its format, which sends
    a container log found on a stream to the general parser."""
    with open_source(source, progress=True) as raw:
        yield raw, sniff(raw)


def sniff(stream: BinaryIO) -> Format:
    """The format of one of `open_source`'s streams (each can be peeked) from its first bytes, looked at
    without reading them (one that shows too little is read as plain)."""
    return detect(stream.peek(_HEAD)[:_HEAD]) or "plain"  # type: ignore[attr-defined]

