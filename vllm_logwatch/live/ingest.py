"""The one ingest core of the live modes: a block of one launch's complete lines -> the metrics.

    block --scan_block--> access counts + the few lines worth a parse --parse_line--> Assembler
          --> ExporterMetrics.apply_many (one lock a block)

Watch (`pipeline.py`, blocks from the follower) and run (`feed.py`, chunks of the child's output) both
read through `LaunchReader`, so the same bytes give the same metrics in both. Access lines carry no
state through the Assembler and their counters do not depend on order, so counting them per block
changes nothing but the moment a first request is seen (by at most a block).
"""

from __future__ import annotations

from collections.abc import Callable

from ..exporting.exporter import ExporterMetrics
from ..parsing.assemble import Assembler
from ..parsing.blocks import scan_block, split_lines
from ..parsing.events import Event
from ..parsing.line import parse_line

__all__ = ["LaunchReader"]


class LaunchReader:
    """Reads one launch's lines into `metrics` through its own `assembler`.

    `parse`: the line parser; any other than `parse_line` (tests inject a faulty one) is given every
    line, since the block scan knows only `parse_line`'s needles. `on_error(file, line, exc)`: a bug
    on one line (in the parser, the assembler or the metrics), counted by the caller; never raised.
    `numbered=False`: events get no line numbers (run mode). `retime`: applied to each complete event
    before the metrics take it (run mode times stats lines by their arrival).
    """

    def __init__(
        self,
        metrics: ExporterMetrics,
        assembler: Assembler,
        on_error: Callable[[str | None, int | None, Exception], None],
        *,
        parse: Callable[[str], Event | None] = parse_line,
        numbered: bool = True,
        retime: Callable[[Event], Event] | None = None,
    ) -> None:
        self.metrics = metrics
        self.assembler = assembler
        self._on_error = on_error
        self._parse = parse
        self._numbered = numbered
        self._retime = retime

    def read(self, data: bytes, first: int = 1, *, cap: int | None = None) -> None:
        """Apply the complete lines in `data` (`first`: the number of the first; `cap`: lines longer
        are read cut to it)."""
        if self._parse is parse_line:
            access, hits = scan_block(data, first, cap=cap)
        else:
            access, hits = {}, split_lines(data, first)
        events: list[Event] = []
        for number, text in hits:
            line = number if self._numbered else None
            try:
                event = self._parse(text)
                if event is not None:
                    events.extend(self.assembler.feed(event, line))
            except Exception as exc:
                self._on_error(self.assembler.file, line, exc)
        self._apply(events, access)

    def flush(self) -> None:
        """The end of the launch: a record the assembler still holds."""
        self._apply(self.assembler.flush(), None)

    def _apply(self, events: list[Event], access: dict[tuple[str, str, int], int] | None) -> None:
        if self._retime is not None:
            events = [self._retime(event) for event in events]
        for event, exc in self.metrics.apply_many(events, access):
            self._on_error(event.file, event.line, exc)
