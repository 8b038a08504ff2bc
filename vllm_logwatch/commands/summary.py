"""`logwatch summary`: read the logs, summarise them (`summary/build.py`), print the tables
(`summary/tables.py`)."""

from __future__ import annotations

import json
import sys
from functools import partial
from typing import IO, Literal

from ..errors import NoStatsError
from ..offline.reading.launches import iter_summary_records
from ..offline.reading.ranges import DEFAULT_TUNING, Tuning
from ..offline.summary.adapters import adapters_json, adapters_lines, collect_adapters
from ..offline.summary.answers import Asked
from ..offline.summary.build import By, Summary, summarize
from ..offline.summary.steps import StepCollector
from ..offline.summary.tables import render, table_lines


def run_summary(
    inputs: list[str],
    *,
    by: By | Literal["lora"] = "launch",
    fmt: str = "text",
    year: int | None = None,
    tz: str | None = None,
    out: IO[str] | None = None,
    tuning: Tuning | None = DEFAULT_TUNING,
    asked: Asked | None = None,
    explain: bool = False,
) -> Summary:
    """Read `inputs`, print their summary (`fmt`: text, markdown or json) to `out` (stdout), return it.

    Raises `NoStatsError` when the inputs hold no stats line. `tuning`: the fast lane's sizes
    (`offline/reading/records.py`); None reads every line through the general parser (the reference).
    `asked`: the answers asked for (`--target-tps`, `--gpu-hour-cost`, `--gpus`); `explain`: what the
    columns mean, after the tables (`--explain`).

    Example: `run_summary(["logs/serve_*.log"], fmt="markdown")` is
    `logwatch summary 'logs/serve_*.log' --markdown`.
    """
    if by == "lora":
        _by_lora(inputs, fmt, year, tz, out)
        return Summary(by="lora", groups=[])
    collector = StepCollector()  # iteration lines, where the logs have them: read in the same pass
    records = iter_summary_records(inputs, year=year, tz=tz, fast=tuning, mfu=True, steps=True)
    summary = summarize(records, by, collector.add)
    collector.add_to_matrices(summary)
    text = render(summary, fmt, asked, steps=collector.tables(), explain=explain)
    (out if out is not None else sys.stdout).write(text)
    return summary


def _by_lora(inputs: list[str], fmt: str, year: int | None, tz: str | None, out: IO[str] | None) -> None:
    """`--by lora`: requests by LoRA adapter from the request lines (`summary/adapters.py`); exit 1
    (NoStatsError) without request lines."""
    rows = collect_adapters(inputs, year, tz)
    if not rows:
        raise NoStatsError("no request lines in the input (vLLM prints them with --enable-log-requests; "
                           "their ends with --enable-log-outputs)")
    if fmt == "json":
        text = json.dumps(adapters_json(rows), indent=2) + "\n"
    else:
        markdown = fmt == "markdown"
        text = "\n".join(adapters_lines(rows, partial(table_lines, markdown=markdown),
                                         "## " if markdown else ""))
    (out if out is not None else sys.stdout).write(text)
