"""Run mode's parser: chunks of the child's output -> events -> metrics, in a thread of its own, each
chunk framed as watch frames a file and its complete lines read as one block by the live modes' one
ingest core (`ingest.LaunchReader`).

Each chunk's arrival is read when the supervisor hands it over, before the queue, and times its lines
(`ingest.measure`): a detail line's latency, a stats line's age.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, tzinfo
from typing import Any

from ..exporting.exporter import ExporterMetrics
from ..following.openfile import FollowerStats, LineBlock, OpenFile
from ..parsing.assemble import Assembler
from ..parsing.events import EngineStats, Event, ServerInfo
from ..parsing.framing import MAX_LINE_BYTES
from ..parsing.stamps import YearClock
from ..supervising.tee import QUEUE_BYTES, QueuedWorker
from .ingest import Arrival, LaunchReader, LineErrors

_GAP = "\0gap"  # queue markers: output was dropped here, in the middle of a line
_GAP_AT_LINE = "\0gap at a line"  # ... after a newline


class LineFeeder(QueuedWorker):
    """Feed it chunks (`put`); it frames them as watch frames a file (`OpenFile.consume`): the partial
    last line waits for its newline, a line over the cap is cut, counted, and the rest of it skipped."""

    def __init__(
        self,
        metrics: ExporterMetrics,
        zone: tzinfo,
        source: str | None = None,
        facts: dict[str, str | int] | None = None,
        max_bytes: int = QUEUE_BYTES,
        records: Callable[[list[Event]], None] | None = None,
    ) -> None:
        """`facts`: what the command line says (served model name, port), applied at each launch.
        `max_bytes`: the bound of the hand-off; a chunk that does not fit is dropped from parsing only
        (the file and stdout have their own queues), counted in `stats.bytes_dropped`. `records`: the
        record stream's `put` (`records.py`)."""
        self.metrics = metrics
        self._records = records
        self.zone = zone
        self.facts: dict[str, Any] = dict(facts or {})
        self._arrivals: deque[Arrival] = deque()  # read time of each queued chunk, in queue order
        self._arrived = Arrival.now()
        self._counts = FollowerStats()  # lines, bytes and lines cut, over all launches
        self.errors = LineErrors()
        self.new_source(source)
        super().__init__("logwatch-parse", max_bytes)

    def new_source(self, source: str | None) -> None:
        """A new launch (a restarted child writes a new log file)."""
        self._frame = OpenFile.framing(source or "-")  # the partial last line, the cap: as watch frames
        assembler = Assembler(source, YearClock.for_source(source, self.zone), hold=False, repeats=True)
        self._reader = LaunchReader(self.metrics, assembler, self.errors, numbered=False,
                                    retime=self._retime, envelopes=False,  # vLLM's own output
                                    records=self._records)

    def put(self, data: bytes) -> None:
        """Hand a chunk over; if the parser is too far behind it is dropped (counted), and the parser
        is told so it does not join the lines on both sides of the gap."""
        dropped = self.stats.bytes_dropped
        self._arrivals.append(Arrival.now())  # read time, before any queueing: it times vLLM's lines
        super().put(data)
        if self.stats.bytes_dropped != dropped:
            self._arrivals.pop()
            self.put_marker(_GAP_AT_LINE if data.endswith(b"\n") else _GAP)

    def relaunch(self, source: str | None) -> None:
        """Called from the supervisor: queue the switch so it lands between the right chunks."""
        self.put_marker(source)

    def _marker(self, source: str | None) -> None:
        if source in (_GAP, _GAP_AT_LINE):
            self._frame.buf.clear()  # the partial line before the gap has lost its end
            self._frame.discarding = source == _GAP  # and the bytes after it start in a line's middle
            return
        self._finish()
        self.metrics.new_launch(source)
        if self.facts:
            self.metrics.apply(ServerInfo(**self.facts))
        self.new_source(source)

    def _write(self, data: bytes) -> None:
        self._arrived = self._arrivals.popleft() if self._arrivals else Arrival.now()
        self._counts.bytes += len(data)
        blocks: list[LineBlock] = []
        self._frame.consume(data, blocks, MAX_LINE_BYTES, self._counts)
        self._read(blocks)

    def _finish(self) -> None:
        """The end of a launch's output (a relaunch, the child gone): its partial last line, then a
        record the assembler holds."""
        blocks: list[LineBlock] = []
        self._frame.flush_partial(blocks, self._counts)
        self._read(blocks)
        self._reader.flush()
        self._report()

    def _read(self, blocks: list[LineBlock]) -> None:
        for block in blocks:
            self._reader.read(block.data, cap=MAX_LINE_BYTES, arrival=self._arrived)
        if blocks:
            self._report()

    def _retime(self, event: Event) -> Event:
        """Live output: the line's time is the moment it was read (its own stamp has whole seconds);
        its latency comes from the same reading, on the monotonic clock."""
        if isinstance(event, EngineStats):
            return replace(event, time=datetime.fromtimestamp(self._arrived.wall, self.zone))
        return event

    def _report(self) -> None:
        self.metrics.set_follower_stats(
            lines=self._counts.lines, bytes=self._counts.bytes, rotations=0, truncations=0,
            read_errors=0, lines_cut=self._counts.lines_cut,
        )
