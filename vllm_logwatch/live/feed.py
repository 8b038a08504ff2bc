"""Run mode's parser: chunks of the child's output -> events -> metrics, in a thread of its own.

A chatty server prints thousands of access lines a second, so lines are sorted cheaply first: access
lines are counted by one bytes pattern and added to the metrics per chunk; only lines that can carry
something else (stats, spec, start-up facts, warnings) go through the full parser.
"""

from __future__ import annotations

import re
import time
from collections import Counter, deque
from datetime import datetime, tzinfo

from ..exporting.exporter import ExporterMetrics
from ..parsing.assemble import Assembler
from ..parsing.events import EngineStats, ServerInfo
from ..parsing.line import parse_line, worth_parsing
from ..parsing.stamps import YearClock
from ..supervising.sinks import QueuedWorker

__all__ = ["LineFeeder"]

_ACCESS = re.compile(rb'"([A-Z]{3,10}) (\S+) HTTP/[\d.]+" (\d{3})')
_MAX_LINE = 1 << 20
_GAP = "\0gap"  # a queue marker: output was dropped here


class LineFeeder(QueuedWorker):
    """Feed it chunks (`put`); it keeps the partial last line until its newline arrives."""

    def __init__(
        self,
        metrics: ExporterMetrics,
        zone: tzinfo,
        source: str | None = None,
        facts: dict[str, str | int] | None = None,
    ) -> None:
        """`facts`: what the command line says (served model name, port), applied at each launch."""
        self.metrics = metrics
        self.zone = zone
        self.facts = facts or {}
        self._arrivals: deque[float] = deque()  # read time of each queued chunk, in queue order
        self._arrived = 0.0
        self._carry = b""
        self.lines = 0
        self.bytes = 0
        self.lines_cut = 0
        self.new_source(source)
        super().__init__("logwatch-parse")

    def new_source(self, source: str | None) -> None:
        """A new launch (a restarted child writes a new log file)."""
        self._source = source
        self._assembler = Assembler(source, YearClock.for_source(source, self.zone), hold_v0=False)

    def put(self, data: bytes) -> None:
        """Hand a chunk over; if the parser is too far behind it is dropped (counted), and the parser
        is told so it does not join the lines on both sides of the gap."""
        dropped = self.stats.bytes_dropped
        arrived = time.time()  # read time, before any queueing: it times vLLM's stats interval
        self._arrivals.append(arrived)
        super().put(data)
        if self.stats.bytes_dropped != dropped:
            self._arrivals.pop()
            self.put_marker(_GAP)

    def relaunch(self, source: str | None) -> None:
        """Called from the supervisor: queue the switch so it lands between the right chunks."""
        self.put_marker(source)

    def _marker(self, source: str | None) -> None:
        if source == _GAP:
            self._carry = b""  # the partial line before the gap has lost its end
            return
        self._flush_carry()
        self.metrics.new_launch(source)
        if self.facts:
            self.metrics.apply(ServerInfo.model_validate(self.facts))
        self.new_source(source)

    def _write(self, data: bytes) -> None:
        self._arrived = self._arrivals.popleft() if self._arrivals else time.time()
        self.bytes += len(data)
        if self._carry:
            data = self._carry + data
        cut = data.rfind(b"\n")
        if cut < 0:
            self._carry = data
            if len(self._carry) > _MAX_LINE:  # a giant line: drop it, counted
                self._carry, self.lines_cut = b"", self.lines_cut + 1
            return
        self._carry = data[cut + 1:]
        self._lines(data[:cut].split(b"\n"))
        self._report()

    def _flush_carry(self) -> None:
        if self._carry:
            self._lines([self._carry])
            self._carry = b""
        self._report()

    def _finish(self) -> None:
        self._flush_carry()

    def _lines(self, lines: list[bytes]) -> None:
        access: Counter[tuple[bytes, bytes, bytes]] = Counter()
        for raw in lines:
            self.lines += 1
            if b"HTTP/" in raw and b'" ' in raw:
                m = _ACCESS.search(raw)
                if m is not None and b"] " not in raw[: m.start()]:
                    access[(m.group(1), m.group(2).split(b"?", 1)[0], m.group(3))] += 1
                    continue
            if len(raw) > _MAX_LINE:
                self.lines_cut += 1
                raw = raw[:_MAX_LINE]
            if not worth_parsing(raw):
                continue
            event = parse_line(raw.decode("utf-8", "replace"))
            if event is not None:
                for done in self._assembler.feed(event, None):
                    if isinstance(done, EngineStats):
                        # Live output: the moment the line was read times vLLM's interval to the ms
                        # (its own stamp has whole seconds), so the token counters add up exactly.
                        read_at = datetime.fromtimestamp(self._arrived, self.zone)
                        done = done.model_copy(update={"time": read_at})
                    self.metrics.apply(done)
        for (method, path, status), n in access.items():
            self.metrics.add_http(method.decode(), path.decode("utf-8", "replace"), int(status), n)

    def _report(self) -> None:
        self.metrics.set_follower_stats(
            lines=self.lines, bytes=self.bytes, rotations=0, truncations=0,
            read_errors=0, lines_cut=self.lines_cut,
        )
