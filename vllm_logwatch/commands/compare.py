"""`logwatch compare`: read the logs (the summary's fast lane), summarise them by launch, compare the
launches (offline/compare/differences.py), print the comparison and, with an output, draw it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import IO

from ..following.layouts import script_name
from ..offline.compare.differences import Comparison, build_compare_figure, compare, render_comparison
from ..offline.reading.launches import Launch, iter_summary_records
from ..offline.reading.ranges import DEFAULT_TUNING, Tuning
from ..offline.summary.answers import Asked
from ..offline.summary.build import Record, summarize
from ..offline.summary.steps import StepCollector
from ..parsing.events import EngineStats


def run_compare(
    inputs: list[str],
    *,
    fmt: str = "text",
    output: str | None = None,
    year: int | None = None,
    tz: str | None = None,
    out: IO[str] | None = None,
    tuning: Tuning | None = DEFAULT_TUNING,
    asked: Asked | None = None,
) -> Comparison:
    """Compare the launches of `inputs` (files, and restarts inside them), print the comparison (`fmt`:
    text, markdown or json) to `out` (stdout), draw it into `output` when given; return it.

    Raises `NoStatsError` when the inputs hold no stats line, `UsageError` for a bad image
    name (before any input is read), `OutputError` when the image cannot be written.

    `asked`: the answers asked for (`--target-tps`, `--gpu-hour-cost`, `--gpus`).

    Example: `run_compare(["a.log", "b.log"], output="cmp.png")` is `logwatch compare a.log b.log -o cmp.png`.
    """
    if output is not None:
        from ..offline.plot.collect import check_image_output

        check_image_output(output)
    preemptions: dict[tuple[int, int], int] = {}
    collector = StepCollector()  # the step tables, from the same pass

    def tapped() -> Iterator[tuple[Launch, Record | object]]:
        records = iter_summary_records(inputs, year=year, tz=tz, fast=tuning, mfu=True, steps=True)
        for launch, e in records:
            if isinstance(e, EngineStats) and e.extra.get("preemptions"):
                key = (launch.index, e.running or 0)
                preemptions[key] = preemptions.get(key, 0) + int(e.extra["preemptions"])
            yield launch, e

    summary = summarize(tapped(), "launch", collector.add)  # type: ignore[arg-type]
    collector.add_to_matrices(summary)
    comparison = compare(summary, preemptions, collector.tables())
    scripts = {c.launch.index: script_name(os.path.basename(c.launch.file)) for c in comparison.launches}
    (out if out is not None else sys.stdout).write(render_comparison(comparison, fmt, asked, scripts))
    if output is not None:
        from ..offline.plot.collect import write_figure

        write_figure(build_compare_figure(comparison, (asked or Asked()).gpus), output)
    return comparison
