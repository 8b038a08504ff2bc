"""`logwatch top --at TIME`: a log target as it was at TIME. The same reader and exporter state as
`watch` (`commands/watch.follow`), with an `ExporterMetrics` whose clock stands at TIME and that stops
taking a source's lines at the first one stamped after it: ages, stalls and every value are those
the exporter served at that moment.

>>> from dataclasses import replace
>>> from datetime import datetime, timezone
>>> from vllm_logwatch.parsing.line import parse_line
>>> def at(stamp):
...     e = parse_line(f"INFO 11-29 {stamp} [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
...                    "Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, "
...                    "GPU KV cache usage: 4.5%")
...     return replace(e, time=datetime.fromisoformat(f"2026-11-29T{stamp}+00:00"))
>>> cut = CutMetrics(at=datetime(2026, 11, 29, 19, 0, 5, tzinfo=timezone.utc).timestamp())
>>> cut.set_replay(True)  # as the pipeline reads a backlog: each line timed by its stamp
>>> cut.apply_many([at("19:00:00"), at("19:00:10"), at("19:00:01")])
[]
>>> cut.status()["engines"]["0"]["age_seconds"]
5.0
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from ..exporting.exporter import ExporterMetrics
from ..parsing.events import Event


class CutMetrics(ExporterMetrics):
    """The exporter's state of one source as of `at` (epoch seconds)."""

    def __init__(self, *, at: float, **kwargs: Any) -> None:
        super().__init__(clock=lambda: at, **kwargs)
        self.at = at
        self.past = False
        """A line stamped after `at` was read: nothing more of this source is taken."""

    def apply_many(
        self, events: Iterable[Event], access: Mapping[tuple[str, str, int], int] | None = None,
        measured: Mapping[int, float] | None = None, *, ended_from: int | None = None,
    ) -> list[tuple[Event, Exception]]:
        if self.past:
            return []
        kept: list[Event] = []
        for event in events:
            if event.time is not None and event.time.timestamp() > self.at:
                self.past = True  # the block's access lines are left out with it (no stamp of their own)
                access = None
                break
            kept.append(event)
        if ended_from is not None and ended_from > len(kept):
            ended_from = None  # the launch's shutdown line is past `at`
        return super().apply_many(kept, access, measured, ended_from=ended_from)

    def new_launch(self, source: str | None = None) -> None:
        if not self.past:
            super().new_launch(source)

    def mark_shutdown(self) -> None:
        if not self.past:
            super().mark_shutdown()


def parse_at(text: str, zone: Any) -> float:
    """`--at`: an ISO time (`2026-11-29T19:25:00`, `2026-11-29 19:25`, with or without a zone; without
    one, in `zone`) as epoch seconds. ValueError for anything else.

    >>> from datetime import timezone
    >>> parse_at("2026-11-29 19:25", timezone.utc), parse_at("2026-11-29T19:25:00+01:00", timezone.utc)
    (1795980300.0, 1795976700.0)
    """
    when = datetime.fromisoformat(text.strip())
    if when.tzinfo is None:
        when = when.replace(tzinfo=zone)
    return when.timestamp()
