"""`logwatch parse --jsonl` (stats records): the fast lane of `parse --csv`, writing JSON lines.

The workers (`offline/reading/rows.py`) render the common stats lines as the JSON-lines fields after
`line`; here each row gets its time, file and line number, as `offline/output/csv_rows.py` does for CSV, and
every other line goes through the general parser and the Assembler. Output is the general path's
(`json.dumps(event_to_dict(e), separators=(", ", ": "))`), byte for byte
(tests/integration/test_fastjsonl.py): rendered rows hold only numbers, nulls and two strings (the
ISO time, and the file name escaped once by `json.dumps`), so they need no JSON encoder per line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, BinaryIO

from ...parsing.columns import ITERATION_COLUMNS
from ...parsing.needles import WANTS
from ...parsing.stamps import YearClock
from ..reading.inputs import Source
from ..reading.rows import ITERATIONS_LANE, Lane
from ..reading.stream import ScanStats
from .csv_rows import DEFAULT_TUNING, CsvFastWriter, RowSink, Tuning, write_rows

if TYPE_CHECKING:
    from ...parsing.events import Event

__all__ = ["JsonlFastWriter", "StepJsonlWriter", "write_jsonl"]


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

    @staticmethod
    def record(event: Event) -> dict[str, Any] | None:
        """The JSON object of a record of the general parser, None for a record of another kind."""
        from ...parsing.events import EngineStats
        from ..reading.events import event_to_dict

        return event_to_dict(event) if isinstance(event, EngineStats) else None

    def _emit_events(self, events: list[Event], rows: list[bytes]) -> None:
        for event in events:
            record = self.record(event)
            if record is not None:
                rows.append(json.dumps(record, separators=(", ", ": ")).encode() + b"\n")
                self._n += 1


class StepJsonlWriter(JsonlFastWriter):
    """`parse --kind iterations --jsonl`: an object per engine step (`ITERATION_COLUMNS` after `kind`)."""

    ROW = b'{"kind": "iteration", "time": %s, "file": %s, "line": %d%s\n'
    LANE = replace(ITERATIONS_LANE, json=True)
    WANT = WANTS["iterations"]

    @staticmethod
    def record(event: Event) -> dict[str, Any] | None:
        from ...parsing.events import IterationStats
        from ..reading.details import iteration_row

        if not isinstance(event, IterationStats):
            return None
        return {"kind": "iteration", **dict(zip(ITERATION_COLUMNS, iteration_row(event), strict=True))}


def write_jsonl(sources: list[Source], out: BinaryIO, clock_factory: Callable[[Source, str], YearClock],
                scan: ScanStats, tuning: Tuning = DEFAULT_TUNING,
                kind: type[JsonlFastWriter] = JsonlFastWriter) -> int:
    """`logwatch parse --jsonl`: the records of `sources` (stats, or the `kind` writer's) to `out`;
    returns how many."""
    return write_rows(sources, RowSink(out, b""), kind, clock_factory, scan, tuning)
