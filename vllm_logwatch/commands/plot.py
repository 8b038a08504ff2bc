"""`logwatch plot`: select the stats records to draw, draw them (`plot.build_figure`), write the image."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator

from ..errors import InputError, NoStatsError, OutputError, UsageError
from ..offline.launches import Launch, iter_launch_records
from ..offline.plot import DPI, build_figure, parse_when, require_matplotlib
from ..offline.rangescan import DEFAULT_TUNING, Tuning
from ..parsing.events import EngineStats, SpecDecodeStats, TransferStats
from ..parsing.stamps import resolve_zone

__all__ = ["run_plot"]


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

    `tuning`: the fast lane's sizes (the summary's, `offline/fastsummary.py`); None reads every line
    through the general parser (the reference).

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
    import matplotlib

    matplotlib.use("Agg")
    try:
        zone = resolve_zone(tz)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    start = parse_when(since, zone) if since else None
    end = parse_when(until, zone) if until else None
    drawn = 0

    def selected() -> Iterator[tuple[Launch, EngineStats]]:
        nonlocal drawn
        records = iter_launch_records(inputs, year=year, tz=tz, spec=tuning is not None, fast=tuning)
        if start is None and end is None:
            for launch, e in records:
                if not isinstance(e, (SpecDecodeStats, TransferStats)) and e.time is not None:
                    drawn += 1
                    yield launch, e
            return
        for launch, e in records:  # EngineStats, or the fast lane's FastStats in its place
            if not isinstance(e, (SpecDecodeStats, TransferStats)) and e.time is not None \
                    and (start is None or e.time >= start) and (end is None or e.time <= end):
                drawn += 1
                yield launch, e

    fig = build_figure(selected())  # streamed: the figure keeps compact arrays, not the records
    if not drawn:
        raise NoStatsError(
            f"no stats lines with a time between {since or 'the start'} and {until or 'the end'}")
    # Rendered in memory, then written by us: matplotlib's own file writes lose errors such as a full
    # disk (the command would succeed with a cut image).
    image = io.BytesIO()
    try:
        kind = "png" if to_stdout else os.path.splitext(output)[1][1:].lower() or None
        fig.savefig(image, dpi=DPI, format=kind)
    except ValueError as exc:  # an unknown image format
        raise UsageError(f"{output}: {exc}") from None
    if to_stdout:
        try:
            sys.stdout.flush()
            sys.stdout.buffer.write(image.getbuffer())
            sys.stdout.buffer.flush()
        except OSError as exc:
            raise OutputError(f"cannot write the output: {exc.strerror or exc}") from None
        return drawn
    try:
        with open(output, "wb") as fh:
            fh.write(image.getbuffer())
    except OSError as exc:
        raise OutputError(f"{output}: cannot write ({exc.strerror or exc})") from None
    return drawn
