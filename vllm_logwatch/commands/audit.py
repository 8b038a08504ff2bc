"""`logwatch audit`: read benchmark result files, find each run's window in the server's logs, say what
the server really ran in it (offline/audit/), print it and, with an output, draw it."""

from __future__ import annotations

import math
import sys
from datetime import timedelta, tzinfo
from typing import IO

from ..errors import NoStatsError, UsageError
from ..offline.audit.measures import Audited, build_audit_figure, find_windows, judge, measure, render_audit
from ..offline.audit.results import join_share, log_request_keys, read_results
from ..offline.reading.launches import iter_summary_records
from ..offline.reading.ranges import DEFAULT_TUNING
from ..parsing.events import EngineStats, IterationStats
from ..parsing.stamps import resolve_zone
from ..shown import shown_path

MAX_CLOCK_OFFSET = 1e9
"""Seconds (about 31 years): a clock offset past it is a typo, and datetime cannot move by much more."""


def run_audit(
    results: list[str],
    logs: list[str],
    *,
    fmt: str = "text",
    output: str | None = None,
    clock_offset: float = 0.0,
    year: int | None = None,
    tz: str | None = None,
    out: IO[str] | None = None,
    observability: str | None = None,
) -> list[Audited]:
    """Audit the runs of `results` against the server logs `logs`; print it (`fmt`: text, markdown or
    json) to `out` (stdout), draw it into `output` when given; return it.

    `clock_offset`: seconds to add to the benchmark's times to get the log's (the log's clock minus the
    client's; finite, at most MAX_CLOCK_OFFSET either way). `year`: of the log's year-less stamps
    (default: as `summary`). `tz`: the zone of the log's stamps and of the result files' zone-less times
    (default: this machine's). `observability`: a folder to write each run's Benchmark Report partial
    into (`run-N.observability.yaml`, N as in the table: offline/audit/measures.py).

    Raises `UsageError` for a bad image name or clock offset, `InputError` for a result file that
    cannot be read or is of no known format, `NoStatsError` when the logs have no stats line or no run
    found its window with the benchmark's model in them (the message says which and why).

    Example: `run_audit(["bench.json"], ["serve.log"])` is `logwatch audit bench.json --log serve.log`.
    """
    if output is not None:
        from ..offline.plot.collect import check_image_output

        check_image_output(output)
    if not (math.isfinite(clock_offset) and abs(clock_offset) <= MAX_CLOCK_OFFSET):
        raise UsageError(f"--clock-offset {clock_offset:g}: not a number of seconds between "
                         f"-{MAX_CLOCK_OFFSET:g} and {MAX_CLOCK_OFFSET:g}")
    try:
        zone = resolve_zone(tz)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    runs = read_results(results, zone)
    if not runs:
        raise NoStatsError("the result files hold no benchmark run")
    # The stats and iteration lines as `summary` reads them (the time between tokens reads their cadence).
    records = ((launch, e) for launch, e in iter_summary_records(logs, year=year, tz=tz, fast=DEFAULT_TUNING,
                                                                 steps=True)
               if isinstance(e, (EngineStats, IterationStats)))
    windows, span = find_windows(runs, records, timedelta(seconds=clock_offset))
    keys = _log_request_keys(logs, zone, year) if any(run.request_ids for run in runs) else set()
    audits = []
    for window in windows:
        m = measure(window)
        audits.append(Audited(window, m, judge(window, m), join_share(window.run, keys)))
    if not any(a.window.lines for a in audits):
        raise NoStatsError(_nothing_matched(audits, span, clock_offset))
    if observability is not None:
        _write_observability(audits, observability)
    (out if out is not None else sys.stdout).write(render_audit(audits, fmt))
    if output is not None:
        from ..offline.plot.collect import write_figure

        write_figure(build_audit_figure(audits), output)
    return audits


def _log_request_keys(logs: list[str], zone: tzinfo, year: int | None) -> set[str]:
    """The request ids of the logs' request lines (`parse --kind requests`), as clients' X-Request-IDs
    read them."""
    from ..offline.reading.details import REQUEST_COLUMNS, source_rows
    from ..offline.reading.inputs import resolve_inputs

    sources, _ = resolve_inputs(logs, None)
    at = REQUEST_COLUMNS.index("request_id")
    return log_request_keys(str(row[at]) for source in sources
                            for row in source_rows(source, "requests", zone, year))


def _write_observability(audits: list[Audited], folder: str) -> None:
    """Each run's Benchmark Report partial into `folder` (made if missing); `UsageError` in one line when
    it cannot be written."""
    import os

    import yaml

    from ..offline.audit.measures import observability_partial

    try:
        os.makedirs(folder, exist_ok=True)
        for n, a in enumerate(audits, 1):
            with open(os.path.join(folder, f"run-{n}.observability.yaml"), "w", encoding="utf-8") as fh:
                yaml.safe_dump(observability_partial(a.window), fh, sort_keys=False)
    except OSError as exc:
        raise UsageError(f"--observability {shown_path(folder)}: cannot write ({exc.strerror or exc})") \
            from None


def _nothing_matched(audits: list[Audited], span: object, offset: float) -> str:
    """The one line when no run found its window: another model's log, or other times."""
    others = sorted({name for a in audits for name in a.window.other_models})
    if others:
        asked = sorted({a.window.run.model or "?" for a in audits})
        return (f"the logs serve another model in the benchmark's windows: {', '.join(others)} (the "
                f"benchmark's: {', '.join(asked)})")
    first = audits[0].window.run
    last = audits[-1].window.run
    logs = getattr(span, "first", None), getattr(span, "last", None)
    shift = f" with --clock-offset {offset:g}" if offset else ""
    covered = (f"the logs' stats lines run from {logs[0]:%Y-%m-%d %H:%M:%S} to {logs[1]:%Y-%m-%d %H:%M:%S}"
               if logs[0] is not None and logs[1] is not None else "the logs' stats lines have no time")
    return (f"no run's window{shift} ({first.start:%Y-%m-%d %H:%M:%S} to {last.end:%Y-%m-%d %H:%M:%S}) "
            f"has a stats line: {covered} (another server's log? a clock offset: --clock-offset, --tz?)")
