"""When a live line was printed, from when we read it: a detail line's latency, a stats line's age.

vLLM's stamps have whole seconds. A line read as it is written was printed a few milliseconds before we
read it, so the moment of the read, on our monotonic clock, times it to about our own scheduling delay
(the latency state takes it from there; the token counters do not: `exporting/tokens.py`). The stamp
is the check: vLLM printed the line within the stamp's second, so a read later than that second's end
is our delay and is cut back to it, and a read much later (a backlog, a file read from its start, a
replay) or before the stamp (another zone, another host's clock) is no measure at all: such a line is
timed by its stamp.

    timer = ArrivalTimer()
    reader = LaunchReader(metrics, assembler, on_error, timer=timer)   # each read() is timed

Run mode reads the clocks when a chunk of the child's output arrives, before it is queued
(`feed.py`), and hands that `Arrival` to `LaunchReader.read`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..parsing.events import EngineStats, Event, IterationStats, RequestLine

BACKLOG_SECONDS = 2.0
"""A line read more than this after its stamp's second ended was not read as it was written."""
CLOCK_SKEW_SECONDS = 0.5
"""A line read this long before its own stamp comes from a clock (or zone) other than ours."""


@dataclass(frozen=True)
class Arrival:
    """The moment a block was read, on both clocks: monotonic for gaps, wall to compare stamps."""

    monotonic: float
    wall: float


def print_time(stamp: float, arrival: Arrival) -> float | None:
    """When a line stamped `stamp` (wall seconds) and read at `arrival` was printed, on the monotonic
    clock; None when the read does not measure it (see the module's docstring).

    >>> print_time(100.0, Arrival(monotonic=7.0, wall=100.25))   # read 0.25 s into its second
    7.0
    >>> print_time(100.0, Arrival(monotonic=7.0, wall=101.5))    # our read was 0.5 s late at least
    6.5
    >>> print_time(100.0, Arrival(monotonic=7.0, wall=160.0)) is None   # a backlog line
    True
    """
    late = arrival.wall - stamp
    resolution = 1.0 if stamp == int(stamp) else 0.001  # whole-second stamps, or milliseconds
    if not -CLOCK_SKEW_SECONDS <= late <= resolution + BACKLOG_SECONDS:
        return None
    return arrival.monotonic - max(0.0, late - resolution)


class ArrivalTimer:
    """Reads the clocks when a block arrives (`now`) and times its stats lines (`measure`).

    `monotonic`, `wall`: the clocks (tests inject)."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self._monotonic = monotonic
        self._wall = wall

    def now(self) -> Arrival:
        """The moment now, on both clocks."""
        return Arrival(self._monotonic(), self._wall())

    def measure(self, events: Sequence[Event], arrival: Arrival) -> dict[int, float]:
        """Index of each stats, iteration or request event read live -> when it was printed
        (monotonic); for `ExporterMetrics.apply_many`."""
        out: dict[int, float] = {}
        for index, event in enumerate(events):
            if isinstance(event, (EngineStats, IterationStats, RequestLine)) and event.time is not None:
                printed = print_time(event.time.timestamp(), arrival)
                if printed is not None:
                    out[index] = printed
        return out
