"""`logwatch parse`'s writers, one per format, whatever route read the records (the range workers' or the
general parser's, `offline/reading/route.py`): CSV rows and JSON lines (OpenMetrics: `openmetrics.py`).
The readers find the lines and make the records; only these turn them into bytes."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any

from ...errors import OutputError
from ...parsing.events import EngineStats, Event, event_to_dict, json_line, stats_row

__all__ = ["CsvWriter", "JsonlWriter", "Writer"]

_COMPACT_JSON = json.JSONEncoder(separators=(",", ":")).encode


class CsvWriter:
    """Rows under `columns`, written a batch at a time (`flush`); the header goes out with the first
    batch (no half output on errors)."""

    def __init__(self, out: IO[str], columns: Sequence[str]) -> None:
        self._csv = csv.writer(out, lineterminator="\n")
        self.columns = columns
        self.rows = 0
        self._batch: list[Sequence[Any]] = []

    def row(self, cells: Sequence[Any]) -> None:
        """One row (None for an empty cell)."""
        self._batch.append(cells)
        self.rows += 1
        if len(self._batch) == _BATCH:
            self.flush()

    def event(self, event: Event) -> None:
        """A record's row: a stats record's (CSV holds no other kind), its `extra` as compact JSON."""
        if isinstance(event, EngineStats):
            row = stats_row(event)
            if row[-1] is not None:
                row[-1] = _COMPACT_JSON(row[-1])
            self.row(row)

    def flush(self) -> None:
        """Write the rows held."""
        if not self._batch:
            return
        with _writing():
            if self.rows == len(self._batch):
                self._csv.writerow(self.columns)
            self._csv.writerows(self._batch)
        self._batch.clear()


class JsonlWriter:
    """An object per line: a record's (`event_to_dict`), or a row's under `columns` after `"kind"`;
    written a batch at a time (`flush`)."""

    def __init__(self, out: IO[str], columns: Sequence[str], kind: str) -> None:
        self.out = out
        self.columns = columns
        self.kind = kind
        self.rows = 0
        self._batch: list[str] = []

    def _line(self, record: dict[str, Any]) -> None:
        self._batch.append(json_line(record))
        self.rows += 1
        if len(self._batch) == _BATCH:
            self.flush()

    def row(self, cells: Sequence[Any]) -> None:
        self._line({"kind": self.kind, **dict(zip(self.columns, cells, strict=True))})

    def event(self, event: Event) -> None:
        self._line(event_to_dict(event))

    def flush(self) -> None:
        """Write the lines held."""
        if not self._batch:
            return
        with _writing():
            self.out.write("\n".join(self._batch) + "\n")
        self._batch.clear()


_BATCH = 1024
"""Rows held before a write (`writerows`, one `write`), not a call of each per row."""


@contextmanager
def _writing() -> Iterator[None]:
    try:
        yield
    except OSError as exc:  # raised in a reader's loop, it would pass for an error of the input
        raise OutputError(f"cannot write the output: {exc.strerror or exc}") from None


Writer = CsvWriter | JsonlWriter
