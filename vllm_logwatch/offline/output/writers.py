"""`logwatch parse`'s writers, one per format, whatever route read the records (the range workers' or the
general parser's, `offline/reading/route.py`): CSV rows and JSON lines (OpenMetrics: `openmetrics.py`).
The readers find the lines and make the records; only these turn them into bytes."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from typing import IO, Any

from ...errors import OutputError
from ...parsing.events import EngineStats, Event, event_to_dict, json_line
from ..reading.events import stats_csv_row

__all__ = ["CsvWriter", "JsonlWriter", "Writer"]


class CsvWriter:
    """Rows under `columns`; the header goes out with the first row (no half output on errors)."""

    def __init__(self, out: IO[str], columns: Sequence[str]) -> None:
        self._csv = csv.writer(out, lineterminator="\n")
        self.columns = columns
        self.rows = 0

    def row(self, cells: Sequence[Any]) -> None:
        """One row (None for an empty cell)."""
        try:
            if not self.rows:
                self._csv.writerow(self.columns)
            self._csv.writerow(cells)
        except OSError as exc:  # raised in a reader's loop, it would pass for an error of the input
            raise OutputError(f"cannot write the output: {exc.strerror or exc}") from None
        self.rows += 1

    def event(self, event: Event) -> None:
        """A record's row: a stats record's (CSV holds no other kind)."""
        if isinstance(event, EngineStats):
            self.row(stats_csv_row(event))


class JsonlWriter:
    """An object per line: a record's (`event_to_dict`), or a row's under `columns` after `"kind"`."""

    def __init__(self, out: IO[str], columns: Sequence[str], kind: str) -> None:
        self.out = out
        self.columns = columns
        self.kind = kind
        self.rows = 0

    def _line(self, record: dict[str, Any]) -> None:
        try:
            self.out.write(json_line(record) + "\n")
        except OSError as exc:
            raise OutputError(f"cannot write the output: {exc.strerror or exc}") from None
        self.rows += 1

    def row(self, cells: Sequence[Any]) -> None:
        self._line({"kind": self.kind, **dict(zip(self.columns, cells, strict=True))})

    def event(self, event: Event) -> None:
        self._line(event_to_dict(event))


Writer = CsvWriter | JsonlWriter
