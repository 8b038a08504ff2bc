"""`logwatch summary`: read the logs, summarise them (`summary/build.py`), print the tables
(`summary/tables.py`)."""

from __future__ import annotations

import sys
from typing import IO

from ..errors import UsageError
from ..offline.reading.launches import iter_summary_records
from ..offline.reading.ranges import DEFAULT_TUNING, Tuning
from ..offline.summary.answers import Asked
from ..offline.summary.build import By, Summary, summarize
from ..offline.summary.tables import render

__all__ = ["run_summary"]


def run_summary(
    inputs: list[str],
    *,
    by: By = "launch",
    fmt: str = "text",
    year: int | None = None,
    tz: str | None = None,
    out: IO[str] | None = None,
    tuning: Tuning | None = DEFAULT_TUNING,
    asked: Asked | None = None,
) -> Summary:
    """Read `inputs`, print their summary (`fmt`: text, markdown or json) to `out` (stdout), return it.

    Raises `NoStatsError` when the inputs hold no stats line. `tuning`: the fast lane's sizes
    (`offline/reading/records.py`); None reads every line through the general parser (the reference).
    `asked`: the answers asked for (`--target-tps`, `--gpu-hour-cost`, `--gpus`).

    Example: `run_summary(["logs/serve_*.log"], fmt="markdown")` is
    `logwatch summary 'logs/serve_*.log' --markdown`.
    """
    if by not in ("launch", "engine", "none") or fmt not in ("text", "markdown", "json"):
        raise UsageError(
            f"summary by {by!r} as {fmt!r}: by is launch, engine or none; fmt text, markdown or json")
    summary = summarize(iter_summary_records(inputs, year=year, tz=tz, fast=tuning, mfu=True), by)
    (out if out is not None else sys.stdout).write(render(summary, fmt, asked))
    return summary
