"""`logwatch parse`'s writers, one per format, whatever route read the records (the range workers' or the
general parser's, `offline/reading/route.py`): CSV rows and JSON lines (OpenMetrics: `openmetrics.py`).
The readers find the lines and make the records; only these turn them into bytes."""

from __future__ import annotations

import csv
import io
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
        self.out = out
        self._text = io.StringIO()  # the batch
        self._csv = csv.writer(self._text, lineterminator="\n")
        self.columns = columns
        self.rows = 0
        self._files: dict[str | None, str] = {}  # a file name -> its cell

    def row(self, cells: Sequence[Any]) -> None:
        """One row (None for an empty cell)."""
        self._next()
        self._csv.writerow(cells)

    def event(self, event: Event) -> None:
        """A record's row: a stats record's (CSV holds no other kind), its `extra` as compact JSON. Only
        the file's and the extra's cells can need quoting (the csv module quotes them); the numbers and
        the time are written as it would write them, in one f-string: half the time of a `writerow`,
        and `parse --csv` writes a row per stats line."""
        if not isinstance(event, EngineStats):
            return
        self._next()
        (time, file, line, engine, prompt, generation, running, waiting, swapped, gpu_kv, cpu_kv, prefix,
         prefix_cpu, mm, extra) = stats_row(event)
        where = self._files.get(file) or self._file_cell(file)
        self._text.write(
            f"{'' if time is None else time},{where},{'' if line is None else line},"
            f"{'' if engine is None else engine},{'' if prompt is None else prompt},"
            f"{'' if generation is None else generation},{'' if running is None else running},"
            f"{'' if waiting is None else waiting},{'' if swapped is None else swapped},"
            f"{'' if gpu_kv is None else gpu_kv},{'' if cpu_kv is None else cpu_kv},"
            f"{'' if prefix is None else prefix},{'' if prefix_cpu is None else prefix_cpu},"
            f"{'' if mm is None else mm},{'' if extra is None else _quoted(_COMPACT_JSON(extra))}\n")

    def _file_cell(self, file: str | None) -> str:
        if len(self._files) >= 64:
            self._files.clear()
        self._files[file] = cell = "" if file is None else _quoted(file)
        return cell

    def _next(self) -> None:
        """Before a row: the header ahead of the first, the batch written every `_BATCH` rows."""
        if self.rows == 0:
            self._csv.writerow(self.columns)
        elif self.rows % _BATCH == 0:
            self.flush()
        self.rows += 1

    def flush(self) -> None:
        """Write the rows held."""
        text = self._text.getvalue()
        if not text:
            return
        with _writing():
            self.out.write(text)
        self._text.seek(0)
        self._text.truncate()


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
"""Rows held before a write (one `write`), not a call of each per row."""


def _quoted(text: str) -> str:
    """A text cell as the csv module writes it among others (quoted when it holds a comma, a quote or a
    newline; an empty one is nothing)."""
    if not text:
        return ""
    cell = io.StringIO()
    csv.writer(cell, lineterminator="\n").writerow([text])
    return cell.getvalue()[:-1]


@contextmanager
def _writing() -> Iterator[None]:
    try:
        yield
    except OSError as exc:  # raised in a reader's loop, it would pass for an error of the input
        raise OutputError(f"cannot write the output: {exc.strerror or exc}") from None


Writer = CsvWriter | JsonlWriter
