"""`logwatch parse`: log files to CSV, JSON lines or OpenMetrics, on stdout.

CSV and JSON lines of stats records take the fast lane (`offline/output/csv_rows.py`, `jsonl_rows.py`:
no pydantic model, no parser unless a line needs it); other kinds go through the general parser;
OpenMetrics through the exporter's own state (`output/openmetrics.py`), fed the summary's records
(`offline/reading/records.py`).
"""

from __future__ import annotations

import sys
from datetime import tzinfo
from functools import partial
from typing import IO, TYPE_CHECKING, BinaryIO, Literal, cast

from ..errors import NoStatsError
from ..offline.output.csv_rows import DEFAULT_TUNING, CsvFastWriter, Tuning, write_csv
from ..offline.reading.inputs import Source, resolve_inputs
from ..offline.reading.stream import ScanStats
from ..parsing.stamps import YearClock

if TYPE_CHECKING:  # the CSV lane loads no pydantic model: the general path's modules come on demand
    from ..offline.output.openmetrics import OpenMetricsWriter
    from ..offline.reading.events import ParseResult
    from ..parsing.events import Event

__all__ = ["run_csv", "run_openmetrics", "run_parse"]


def run_csv(inputs: list[str], *, year: int | None = None, tz: str | None = None,
            tuning: Tuning = DEFAULT_TUNING) -> int:
    """`logwatch parse --csv FILE...` to stdout; raises `NoStatsError` (with its hint) if none."""
    sources, zone = resolve_inputs(inputs, tz)
    scan = ScanStats()
    sys.stdout.flush()
    rows = write_csv(sources, sys.stdout.buffer, partial(_clock, zone, year), scan, tuning)
    sys.stdout.buffer.flush()
    if rows == 0:
        from ..offline.reading.events import no_stats_hint

        raise NoStatsError(no_stats_hint(sources))
    return rows


def _clock(zone: tzinfo, year: int | None, source: Source, stamp: str) -> YearClock:
    """A source's clock, from its first stamp (the fast writers make it when they need it)."""
    return YearClock.for_source(None if source.is_stdin else source.path, zone, year, first_stamp=stamp)


def _wanted(event: Event, kind: str) -> bool:
    return kind == "all" or event.kind == kind or (kind == "log" and event.kind == "unparsed")


def run_parse(
    inputs: list[str],
    *,
    fmt: Literal["csv", "jsonl"] = "csv",
    kind: str = "stats",
    year: int | None = None,
    tz: str | None = None,
    out: IO[str] | None = None,
    tuning: Tuning | None = DEFAULT_TUNING,
) -> ParseResult:
    """Write the records of `inputs` to `out` as CSV or JSON lines; raise `NoStatsError` if none.
    Stats records take the fast routes (`offline/reading/route.py`) unless `tuning` is None (the
    general parser, the reference the tests compare with); other kinds take the general parser.

    Example: `run_parse(["logs/serve_*.log"], fmt="csv")` is `logwatch parse 'logs/serve_*.log' --csv`.
    """
    import csv
    import json

    from ..offline.reading.events import (
        ParseResult,
        event_to_dict,
        iter_source_events,
        no_rows_hint,
        no_stats_hint,
        stats_csv_row,
    )
    from ..parsing.events import STATS_COLUMNS, EngineStats, ServerInfo

    out = out if out is not None else sys.stdout
    sources, zone = resolve_inputs(inputs, tz)
    result = ParseResult()
    if kind in ("stats", "iterations") and tuning is not None:  # the fast routes (`output/csv_rows.py`, ...)
        from ..offline.output.csv_rows import StepCsvWriter
        from ..offline.output.jsonl_rows import JsonlFastWriter, StepJsonlWriter, write_jsonl

        binary = cast(BinaryIO, getattr(out, "buffer", None) or _TextOut(out))
        steps, clock = kind == "iterations", partial(_clock, zone, year)
        out.flush()
        result.files = len(sources)
        if fmt == "csv":
            written = write_csv(sources, binary, clock, result.scan, tuning,
                                StepCsvWriter if steps else CsvFastWriter)
        else:
            written = write_jsonl(sources, binary, clock, result.scan, tuning,
                                  StepJsonlWriter if steps else JsonlFastWriter)
        result.counts[kind] = written
        if written == 0:
            raise NoStatsError(no_rows_hint(sources, kind, _KIND_LINES[kind])
                               if steps else no_stats_hint(sources, result.stats_disabled))
        return result
    if kind in ("iterations", "requests"):
        _write_details(sources, kind, fmt, zone, year, out, result)
        return result
    csv_out = csv.writer(out, lineterminator="\n") if fmt == "csv" else None
    written = 0
    for source in sources:
        result.files += 1
        for event in iter_source_events(source, kind, zone, year, result.scan):
            result.counts[event.kind] += 1
            if isinstance(event, ServerInfo) and event.stats_logging_disabled:
                result.stats_disabled = True
            if not _wanted(event, kind):
                continue
            written += 1
            if csv_out is not None and isinstance(event, EngineStats):
                if result.counts["stats"] == 1:  # header with the first row: no half output on errors
                    csv_out.writerow(STATS_COLUMNS)
                csv_out.writerow(stats_csv_row(event))
            elif csv_out is None:
                out.write(json.dumps(event_to_dict(event), separators=(", ", ": ")) + "\n")
    if result.counts["stats"] == 0 and kind in ("stats", "all"):
        raise NoStatsError(no_stats_hint(sources, result.stats_disabled))
    if written == 0:
        n = len(sources)
        raise NoStatsError(f"no {kind} records in {n} file{'s' if n != 1 else ''} "
                           f"({_KIND_LINES.get(kind, kind)})")
    return result


class _TextOut:
    """A text output (one without `.buffer`, such as a `StringIO`) taking the fast writers' bytes."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def write(self, data: bytes) -> int:
        return self.out.write(data.decode())

    def flush(self) -> None:
        self.out.flush()


def _write_details(sources: list[Source], kind: str, fmt: str, zone: tzinfo, year: int | None, out: IO[str],
                   result: ParseResult) -> None:
    """`--kind requests` (and `iterations` through the general parser): one row per request or step
    (`offline/reading/details.py`)."""
    import csv
    import json

    from ..offline.reading.details import ITERATION_COLUMNS, REQUEST_COLUMNS, source_rows

    columns = ITERATION_COLUMNS if kind == "iterations" else REQUEST_COLUMNS
    writer = csv.writer(out, lineterminator="\n") if fmt == "csv" else None
    written = 0
    for source in sources:
        result.files += 1
        for row in source_rows(source, kind, zone, year, result.scan):
            if writer is not None:
                if written == 0:
                    writer.writerow(columns)
                writer.writerow(row)
            else:
                out.write(json.dumps({"kind": kind[:-1], **dict(zip(columns, row, strict=True))},
                                     separators=(", ", ": ")) + "\n")
            written += 1
    result.counts[kind] = written
    if written == 0:
        from ..offline.reading.events import no_rows_hint

        raise NoStatsError(no_rows_hint(sources, kind, _KIND_LINES[kind]))


_KIND_LINES = {
    "iterations": "no iteration lines: vLLM runs without --enable-logging-iteration-details (vLLM >= 0.14)",
    "requests": "no request lines: vLLM runs without --enable-log-requests",
    "spec": "no speculative-decoding metrics lines",
    "transfer": "no KV or EC transfer metrics lines: vLLM runs without a KV connector",
    "mfu": "no MFU lines: vLLM runs without --enable-mfu-metrics (vLLM >= 0.14)",
    "info": "no start-up lines: the logs may begin after vLLM started",
    "access": "no HTTP access lines: vLLM may run with --disable-uvicorn-access-log",
    "log": "no warning or error lines",
}
"""Why a kind other than stats found nothing, for its exit-1 message."""


def run_openmetrics(
    inputs: list[str],
    *,
    year: int | None = None,
    tz: str | None = None,
    labels: list[str] | None = None,
    out: IO[str] | None = None,
    tuning: Tuning | None = DEFAULT_TUNING,
    millis: bool = False,
) -> OpenMetricsWriter:
    """Write the OpenMetrics backfill of `inputs` to `out` (stdout). Raises `NoStatsError`.
    `millis`: the same series as Prometheus text with millisecond timestamps (`parse --vm-import`).

    Example: `run_openmetrics(["logs/serve_*.log"], tz="UTC")` is
    `logwatch parse 'logs/serve_*.log' --openmetrics --tz UTC`; then
    `promtool tsdb create-blocks-from openmetrics vllm.om data/`. `labels`: `KEY=VALUE` strings
    added to every series. `tuning`: the range workers' sizes (`offline/reading/records.py`: the common stats
    lines read by the workers, a big file's ranges in worker processes); None reads every line through
    the general parser (the reference).
    """
    from ..offline.output.openmetrics import OpenMetricsWriter, parse_labels
    from ..offline.reading.events import no_stats_hint, repeats_note
    from ..offline.reading.records import source_records
    from ..parsing.events import ServerInfo

    out = out if out is not None else sys.stdout
    sources, zone = resolve_inputs(inputs, tz)
    writer = OpenMetricsWriter(parse_labels(labels or []), millis=millis)
    scan = ScanStats()
    disabled = False
    try:
        for source in sources:
            writer.new_launch(source.name)
            events = source_records(source, zone, year, scan, tuning, numbers=False)
            for event in events:
                if isinstance(event, ServerInfo) and event.stats_logging_disabled:
                    disabled = True
                writer.feed(event)
        if writer.stats_lines == 0:
            raise NoStatsError(no_stats_hint(sources, disabled))
        writer.write(out)
    finally:
        writer.close()
    if writer.dropped:
        print(f"logwatch parse: {writer.dropped} samples left out: not after the previous sample of "
              "their series (give the files oldest first)", file=sys.stderr)
    if writer.repeats:
        print(f"logwatch parse: {repeats_note(writer.repeats)}", file=sys.stderr)
    return writer
