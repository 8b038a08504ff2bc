"""Offline: container logs (Docker json-file, CRI, `docker logs --timestamps`) read through their
envelopes (`parsing/envelope.py`) by the general parser, never the range workers (a part of a line may
sit in another byte range: `route.py`): blocks of envelope lines are unwrapped, the lines worth a parse
found with the same needles the bulk scanner uses, and their events given the envelope line number and
the container stamp as their time (not `--tz`, not the file's mtime). A line that is not a record of
the format is an `Unparsed(what="envelope")` event; an envelope line past the cap (no record: the
runtimes cut at 16 KiB) is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import BinaryIO

from ...parsing.assemble import Assembler
from ...parsing.envelope import Format, Unwrapped, Unwrapper, container_time
from ...parsing.events import Event, Unparsed
from ...parsing.framing import MAX_LINE_BYTES, LineBlock
from ...parsing.needles import with_variants
from .stream import Frame, block_lines

__all__ = ["enveloped_events"]

_BLOCK = 4 << 20
_RECORD_CAP = MAX_LINE_BYTES + (64 << 10)  # a record holds at most a capped line and its envelope


def enveloped_events(
    stream: BinaryIO, fmt: Format, assembler: Assembler, needles: tuple[bytes, ...] | None,
) -> Iterator[Event]:
    """Every event of a container log (after `route.sniff`), in order. `needles`: parse only the lines that
    hold one (give the followers' needles too); None: every line."""
    unwrapper, frame, blocks = Unwrapper(fmt), Frame(), list[LineBlock]()
    while data := stream.read(_BLOCK):
        frame.consume(data, blocks, _RECORD_CAP, frame)
        yield from _unwrapped(unwrapper, blocks, assembler, needles)
    frame.flush_partial(blocks, frame)
    yield from _unwrapped(unwrapper, blocks, assembler, needles)
    yield from _events(unwrapper.flush(), assembler, needles)


def _unwrapped(unwrapper: Unwrapper, blocks: list[LineBlock], assembler: Assembler,
               needles: tuple[bytes, ...] | None) -> Iterator[Event]:
    """The events of the framer's blocks; an envelope line over the cap (cut) is no record: skipped."""
    for block in blocks:
        if not block.cut:
            yield from _events(unwrapper.unwrap(block.data, block.number), assembler, needles)
    blocks.clear()


def _events(got: Unwrapped, assembler: Assembler, needles: tuple[bytes, ...] | None) -> Iterator[Event]:
    """The events of one unwrapped block: its lines that hold one of `needles` (None: every line), each
    timed by its container stamp, among its malformed envelope lines' `Unparsed`."""
    from ...parsing.line import parse_line  # its patterns are compiled when first needed

    bad = got.malformed[::-1]  # yielded among the events in line order
    wanted = None if needles is None else with_variants(needles, got.data)
    lines = block_lines(LineBlock("", 0, 1, got.data, len(got.numbers)), wanted, (), False)
    times: dict[bytes, datetime | None] = {}
    for index, raw in lines:
        while bad and bad[-1] < got.numbers[index - 1]:
            yield Unparsed(what="envelope", file=assembler.file, line=bad.pop())
        event = parse_line(raw.decode("utf-8", "replace"))
        if event is None:
            continue
        stamp = got.stamps[index - 1]
        when = times.get(stamp)
        if when is None:
            when = times[stamp] = container_time(stamp)
        yield from assembler.feed(event, got.numbers[index - 1], when)
    while bad:
        yield Unparsed(what="envelope", file=assembler.file, line=bad.pop())

