"""`logwatch parse --jsonl` (stats records): the fast lane of `parse --csv`, writing JSON lines.

The workers (`offline/reading/ranges.py`) render the common stats lines as the JSON-lines fields after
`line`; here each row gets its time, file and line number, as `offline/output/csv_rows.py` does for CSV, and
every other line goes through the general parser and the Assembler. Output is the general path's
(`json.dumps(event_to_dict(e), separators=(", ", ": "))`), byte for byte
(tests/integration/test_fastjsonl.py): rendered rows hold only numbers, nulls and two strings (the
ISO time, and the file name escaped once by `json.dumps`), so they need no JSON encoder per line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from ...parsing.stamps import YearClock
from ..reading.inputs import Source
from ..reading.ranges import Lane
from ..reading.stream import ScanStats
from .csv_rows import DEFAULT_TUNING, CsvFastWriter, RowSink, Tuning, write_rows

if TYPE_CHECKING:
    from ...parsing.events import Event

__all__ = ["JsonlFastWriter", "write_jsonl"]


class JsonlFastWriter(CsvFastWriter):
    """`CsvFastWriter` with JSON-lines rows: rendered rows from the workers, the rest via `event_to_dict`."""

    ROW = b'{"kind": "stats", "time": %s, "file": %s, "line": %d%s\n'
    LANE = Lane(json=True)

    @staticmethod
    def file_cell(file: str) -> bytes:
        return json.dumps(file).encode()

    def time_cell(self, stamp: bytes) -> bytes:
        iso = self._time(stamp)
        return b'"%s"' % iso if iso else b"null"

    def _emit_events(self, events: list[Event], rows: list[bytes]) -> None:
        from ...parsing.events import EngineStats
        from ..reading.events import event_to_dict

        for event in events:
            if isinstance(event, EngineStats):
                rows.append(json.dumps(event_to_dict(event), separators=(", ", ": ")).encode() + b"\n")
                self._n += 1


def write_jsonl(sources: list[Source], out: BinaryIO, clock_factory: Callable[[Source, str], YearClock],
                scan: ScanStats, tuning: Tuning = DEFAULT_TUNING) -> int:
    """`logwatch parse --jsonl` (stats): the records of `sources` to `out`; returns how many."""
    return write_rows(sources, RowSink(out, b""), JsonlFastWriter, clock_factory, scan, tuning)
