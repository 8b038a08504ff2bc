"""`logwatch plot`: select the stats records to draw, draw them (`plot/collect.py`), write the
image."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from ..errors import InputError, NoStatsError, OutputError, UsageError
from ..offline.plot.collect import DPI, Drawer, collect, facets, parse_when, require_matplotlib, unrelated
from ..offline.reading.launches import Launch, iter_summary_records
from ..offline.reading.ranges import DEFAULT_TUNING, Tuning
from ..parsing.events import EngineStats
from ..parsing.stamps import resolve_zone, utc


def run_plot(
    inputs: list[str],
    output: str,
    *,
    since: str | None = None,
    until: str | None = None,
    year: int | None = None,
    tz: str | None = None,
    tuning: Tuning | None = DEFAULT_TUNING,
) -> int:
    """Draw the run of `inputs` (between `since` and `until`) into `output`; return the lines drawn.
    `output` `-` is standard output (PNG), refused when it is a terminal.

    `tuning`: the range workers' sizes (the summary's, `offline/reading/records.py`); None reads every
    line through the general parser (the reference).

    Example: `run_plot(["logs/serve_*.log"], "run.png")` is `logwatch plot 'logs/serve_*.log' -o run.png`.
    """
    to_stdout = output == "-"
    if to_stdout:
        if sys.stdout is None:  # started with standard output closed (>&-)
            raise OutputError("-o -: standard output is closed: nowhere to write")
        if sys.stdout.isatty():
            raise UsageError("-o -: standard output is a terminal: redirect it (-o - > run.png) or give a "
                             "file name")
    require_matplotlib()
    try:
        zone = resolve_zone(tz)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    # In UTC: two times of one zone compare on their wall clocks, wrong in a fall-back's repeated hour.
    start = utc(parse_when(since, zone)) if since else None
    end = utc(parse_when(until, zone)) if until else None
    drawn = 0

    def within(t: datetime | None) -> bool:
        if t is None or (start is None and end is None):
            return t is not None
        at = utc(t)
        return (start is None or at >= start) and (end is None or at <= end)

    def selected() -> Iterator[tuple[Launch, EngineStats]]:
        nonlocal drawn
        records = iter_summary_records(inputs, year=year, tz=tz, fast=tuning, numbers=False)
        for launch, e in records:
            if isinstance(e, EngineStats) and within(e.time):
                drawn += 1
                yield launch, e

    with Drawer() as drawer:  # imports matplotlib while the log is read (offline/plot/collect.py)
        data = collect(selected())  # streamed: no more points than the figure's pixels
        if not drawn:
            raise NoStatsError(
                f"no stats lines with a time between {since or 'the start'} and {until or 'the end'}")
        warning = unrelated(data.launches, data.ends, facets(data.launches, data.ends))
        if warning is not None:  # several models, or days between launches: one line, drawn anyway
            print(f"logwatch plot: {warning}", file=sys.stderr, flush=True)
        # Rendered in memory, then written by us: matplotlib's own file writes lose errors such as a
        # full disk (the command would succeed with a cut image).
        kind = "png" if to_stdout else os.path.splitext(output)[1][1:].lower() or None
        # zlib's fastest level: 10% more bytes, a tenth of the drawing time saved (bench/RESULTS.md)
        fast: dict[str, Any] = {"pil_kwargs": {"compress_level": 1}} if kind in ("png", None) else {}
        try:
            image = drawer.image(data, kind, dpi=DPI, **fast)
        except ValueError as exc:  # an unknown image format
            raise UsageError(f"{output}: {exc}") from None
    if to_stdout:  # a write error is the command line's to say (`cli.main`), as for any offline command
        sys.stdout.flush()
        sys.stdout.buffer.write(image)
        sys.stdout.buffer.flush()
        return drawn
    try:
        with open(output, "wb") as fh:
            fh.write(image)
    except OSError as exc:
        raise OutputError(f"{output}: cannot write ({exc.strerror or exc})") from None
    return drawn

