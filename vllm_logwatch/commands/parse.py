"""`logwatch parse`: log files to CSV, JSON lines or OpenMetrics, on stdout.

Every route reads records the same way (`offline/reading/records.py`: the range workers' numbers for
vLLM's common stats line, the general parser for the rest) and one writer per format writes them
(`offline/output/writers.py`, `openmetrics.py`).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Literal

from ..errors import NoStatsError
from ..offline.reading.inputs import resolve_inputs
from ..offline.reading.ranges import DEFAULT_TUNING, Tuning

if TYPE_CHECKING:
    from ..offline.output.openmetrics import OpenMetricsWriter
    from ..offline.output.writers import Writer
    from ..parsing.events import Event


@dataclass
class ParseResult:
    """What a parse run found, for the exit code and the no-stats hint."""

    counts: Counter[str] = field(default_factory=Counter)
    stats_disabled: bool = False


def _write(events: Iterator[Event], kind: str, writer: Writer, result: ParseResult) -> int:
    """Write the records of `kind` of `events`, count every record in `result`; how many were written."""
    from ..parsing.events import ServerInfo

    counts, written = result.counts, 0
    for event in events:
        got = event.kind
        counts[got] += 1
        if isinstance(event, ServerInfo) and event.stats_logging_disabled:
            result.stats_disabled = True
        if got == kind or kind == "all" or (kind == "log" and got == "unparsed"):
            writer.event(event)
            written += 1
    return written


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

    Example: `run_parse(["logs/serve_*.log"], fmt="csv")` is `logwatch parse 'logs/serve_*.log' --csv`.
    """
    from ..offline.output.writers import CsvWriter, JsonlWriter
    from ..offline.reading.details import ITERATION_COLUMNS, REQUEST_COLUMNS, rows_of
    from ..offline.reading.events import iter_source_events, n_files, no_rows_hint, no_stats_hint
    from ..offline.reading.records import source_records
    from ..parsing.columns import STATS_COLUMNS

    out = out if out is not None else sys.stdout
    sources, zone = resolve_inputs(inputs, tz)
    result = ParseResult()
    columns = {"iterations": ITERATION_COLUMNS, "requests": REQUEST_COLUMNS}.get(kind, STATS_COLUMNS)
    writer = CsvWriter(out, columns) if fmt == "csv" else JsonlWriter(out, columns, kind[:-1])
    detail = kind in ("iterations", "requests")
    written = 0
    try:
        for source in sources:
            if kind in ("stats", "iterations"):  # the range workers' routes (None tuning: the general parser)
                events = source_records(source, zone, year, tuning, kind=kind)
            else:
                events = iter_source_events(source, kind, zone, year)
            if detail:  # a row per step or request (`offline/reading/details.py`)
                for row in rows_of(kind, events):
                    writer.row(row)
                continue
            written += _write(events, kind, writer, result)
    finally:  # what was read before an error is written, as the records before it
        writer.flush()
    if detail:
        result.counts[kind] = writer.rows
        if writer.rows == 0:
            raise NoStatsError(no_rows_hint(sources, kind, _KIND_LINES[kind]))
        return result
    if result.counts["stats"] == 0 and kind in ("stats", "all"):
        raise NoStatsError(no_stats_hint(sources, result.stats_disabled))
    if written == 0:
        raise NoStatsError(f"no {kind} records in {n_files(len(sources))} ({_KIND_LINES.get(kind, kind)})")
    return result


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
    `labels`: `KEY=VALUE` strings added to every series. `tuning`: the range workers' sizes (None: the
    general parser, the reference).

    Example: `run_openmetrics(["logs/serve_*.log"], tz="UTC")` is
    `logwatch parse 'logs/serve_*.log' --openmetrics --tz UTC`.
    """
    from ..offline.output.openmetrics import OpenMetricsWriter, parse_labels
    from ..offline.reading.events import no_stats_hint, repeats_note
    from ..offline.reading.records import source_records

    out = out if out is not None else sys.stdout
    sources, zone = resolve_inputs(inputs, tz)
    writer = OpenMetricsWriter(parse_labels(labels or []), millis=millis)
    try:
        for source in sources:
            writer.new_launch(source.name)
            for event in source_records(source, zone, year, tuning, numbers=False):
                writer.feed(event)
        if writer.stats_lines == 0:
            raise NoStatsError(no_stats_hint(sources, writer.stats_disabled))
        writer.write(out)
    finally:
        writer.close()
    if writer.dropped:
        print(f"logwatch parse: {writer.dropped} samples left out: not after the previous sample of "
              "their series (give the files oldest first)", file=sys.stderr)
    if writer.repeats:
        print(f"logwatch parse: {repeats_note(writer.repeats)}", file=sys.stderr)
    return writer
