"""Each benchmark run's window in the server's logs: the stats lines vLLM printed while the run ran.

The logs are read once through the offline reader (`iter_summary_records`: plain and container logs,
many files, restarts as launches). A line belongs to a run when its time, moved by the clock offset,
falls within the run's start and end (both ends included: the client's times have whole seconds). Of
the launches with lines there, the run's window is the one of the launch serving the benchmark's model
with the most lines; lines of launches serving another model are kept aside, for the verdict. The
launch's iteration lines in the window (`--enable-logging-iteration-details`) are kept with its stats
lines, in the log's order: the time between tokens reads their cadence (`measures.py`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ...errors import InputError
from ...parsing.events import EngineStats, IterationStats
from ...parsing.stamps import utc
from ..reading.launches import Launch
from .results import Run


@dataclass
class Window:
    """One run and what its launch printed during it."""

    run: Run
    launch: Launch | None = None
    """The launch of the benchmark's model with the most lines in the window (None: none had any)."""
    lines: list[EngineStats] = field(default_factory=list)
    records: list[EngineStats | IterationStats] = field(default_factory=list)
    """The launch's stats and iteration lines in the window, in the log's order."""
    other_models: dict[str, int] = field(default_factory=dict)
    """Served model name -> lines in the window, for launches serving another model."""


@dataclass
class LogSpan:
    """The first and last stats line's time over all the logs, for the message when nothing matched."""

    first: datetime | None = None
    last: datetime | None = None

    def take(self, time: datetime) -> None:
        self.first = time if self.first is None or utc(time) < utc(self.first) else self.first
        self.last = time if self.last is None or utc(time) > utc(self.last) else self.last


def same_model(logged: str | None, asked: str | None) -> bool:
    """Is the logged (served) model name the benchmark's? Unknown on either side counts as the same; a
    hub name and its last part (`org/name` and `name`) match.

    >>> same_model("tiny-llama", "tiny-llama"), same_model("org/tiny-llama", "tiny-llama")
    (True, True)
    >>> same_model("small-llama", "tiny-llama"), same_model(None, "tiny-llama")
    (False, True)
    """
    if not logged or not asked:
        return True
    return logged == asked or os.path.basename(logged.rstrip("/")) == os.path.basename(asked.rstrip("/"))


def _moved(run: Run, offset: timedelta) -> tuple[datetime, datetime]:
    try:
        return utc(run.start) + offset, utc(run.end) + offset
    except OverflowError:
        raise InputError(f"{run.source}: its times moved by --clock-offset {offset.total_seconds():g} are "
                         "not dates") from None


def find_windows(runs: list[Run], records: Iterable[tuple[Launch, EngineStats | IterationStats]],
                 offset: timedelta = timedelta(0)) -> tuple[list[Window], LogSpan]:
    """The window of each run among `records` (the logs' stats and iteration records with their
    launches, read once). `offset` is added to every run's times (the log's clock minus the client's);
    `InputError` when that takes one past the dates a clock can show. Times are compared in UTC: two of
    one zone compare on their wall clocks, wrong in a fall-back's repeated hour."""
    starts = [_moved(run, offset) for run in runs]
    per_run: list[dict[int, tuple[Launch, list[EngineStats], list[EngineStats | IterationStats]]]] = [
        {} for _ in runs]
    span = LogSpan()
    for launch, record in records:
        if record.time is None:
            continue
        stats = record if isinstance(record, EngineStats) else None
        if stats is not None:
            span.take(record.time)
        time = utc(record.time)
        for n, (start, end) in enumerate(starts):
            if start <= time <= end:
                found = per_run[n].setdefault(launch.index, (launch, [], []))
                if stats is not None:
                    found[1].append(stats)
                found[2].append(record)
    windows = []
    for run, launches in zip(runs, per_run, strict=True):
        window = Window(run)
        best: tuple[Launch, list[EngineStats], list[EngineStats | IterationStats]] | None = None
        for launch, lines, _ in launches.values():
            if not lines:
                continue  # iteration lines alone: no stats line of the launch in the window
            if same_model(launch.model_name, run.model):
                if best is None or len(lines) > len(best[1]):
                    best = launches[launch.index]
            else:
                name = launch.model_name or "?"
                window.other_models[name] = window.other_models.get(name, 0) + len(lines)
        if best is not None:
            window.launch, window.lines, window.records = best
        windows.append(window)
    return windows, span
