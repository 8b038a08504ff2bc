"""The last hour of each engine's stats lines, for the status page's charts (`/api/v1/history`).

A ring buffer per engine label, trimmed to the window behind that engine's newest point; a silence
of several intervals is a gap (a row of nulls), where a chart breaks its line. What it serves and
keeps: docs/status-api.md. Only numbers are kept: never line text (logs hold users' prompts).

>>> from vllm_logwatch.parsing.line import parse_line
>>> history = History()
>>> history.record("0", parse_line("INFO 11-29 19:26:05 [loggers.py:335] Engine 000: Avg prompt throughput: "
...     "9.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 16 reqs, Waiting: 8 reqs, "
...     "GPU KV cache usage: 4.5%"), arrival=1_800_000_000.0)
>>> history.snapshot()["engines"]["0"]["running"]
[16]
"""

from __future__ import annotations

import itertools
import secrets
import threading
from collections import deque
from typing import Any

from ..parsing.events import EngineStats
from ..shown import finite

DEFAULT_WINDOW_SECONDS = 3600.0
DEFAULT_MAX_POINTS = 3600
"""One hour at a 1-second stats interval; at vLLM's default 10 s the window trims first (360)."""

FIELDS = (
    "time",
    "prompt_throughput",
    "generation_throughput",
    "running",
    "waiting",
    "kv_cache_usage_pct",
    "prefix_cache_hit_rate_pct",
    "mm_cache_hit_rate_pct",
)
"""The columns of a point, in the log's units (tokens/s, requests, percent); `time` in epoch seconds."""
GAP_INTERVALS = 3.0
"""A silence longer than this many of the engine's usual (median) intervals is drawn as a gap."""

Point = tuple[float, "float | None", "float | None", "float | None", "float | None", "float | None",
              "float | None", "float | None"]


class History:
    """Per-engine ring buffers of recent stats; thread-safe (fed by the pipeline, read by the server).

    `record` has the signature `ExporterMetrics(on_stats=...)` expects, so the engine labels are
    exactly those of `/metrics`.
    """

    def __init__(self, *, max_series: int | None = None) -> None:
        """`max_series`: at most this many engine labels (a many-source watch: each source's engines);
        a label beyond them is not kept (counted in `series_left_out`) unless a kept one has had no
        point for the whole window (a source gone), which then makes room."""
        self.window_seconds = DEFAULT_WINDOW_SECONDS
        self.max_points = DEFAULT_MAX_POINTS
        self.max_series = max_series
        self._left_out: set[str] = set()
        self._lock = threading.Lock()
        self._engines: dict[str, deque[Point]] = {}
        self._token = secrets.token_hex(4)
        self._restarts = 0

    @property
    def instance(self) -> str:
        """Changes when this process starts and when a buffer starts over: refetch everything then."""
        return f"{self._token}-{self._restarts}"

    def record(self, engine: str, stats: EngineStats, arrival: float) -> None:
        """One stats line of engine label `engine`, read at wall-clock time `arrival`."""
        when = stats.time.timestamp() if stats.time is not None else arrival
        point: Point = (
            when,
            finite(stats.prompt_throughput),
            finite(stats.generation_throughput),
            stats.running,
            stats.waiting,
            finite(stats.kv_cache_usage_pct),
            finite(stats.prefix_cache_hit_rate_pct),
            finite(stats.mm_cache_hit_rate_pct),
        )
        with self._lock:
            points = self._engines.get(engine)
            if points is None:
                if not self._room(when):
                    self._left_out.add(engine)
                    return
                self._left_out.discard(engine)
                points = self._engines[engine] = deque(maxlen=self.max_points)
            elif points and when < points[-1][0]:
                points.clear()
                self._restarts += 1
            points.append(point)
            oldest = when - self.window_seconds
            while points[0][0] < oldest:
                points.popleft()

    def _room(self, when: float) -> bool:
        """Room for one more series: under `max_series`, or once the series silent for the whole window
        behind `when` are let go."""
        if self.max_series is None or len(self._engines) < self.max_series:
            return True
        oldest = when - self.window_seconds
        for label in [label for label, points in self._engines.items() if points[-1][0] < oldest]:
            del self._engines[label]
        return len(self._engines) < self.max_series

    def snapshot(self, since: float | None = None) -> dict[str, Any]:
        """A JSON-able, column-wise copy (what uPlot draws): the points after `since` (all when None).

        A column with no value at all (e.g. `mm_cache_hit_rate_pct` for a text-only model) is left
        out; a missing value in a kept column is null.
        """
        with self._lock:
            chosen = {label: list(points) for label, points in self._engines.items()}
            instance = self.instance
            left_out = len(self._left_out)
        engines: dict[str, dict[str, list[float | None]]] = {}
        for label, points in chosen.items():
            rows, gaps = _with_gaps(points, since)
            columns: dict[str, list[float | None]] = {"time": [round(p[0], 3) for p in rows]}
            for index, name in enumerate(FIELDS[1:], start=1):
                column = [p[index] for p in rows]
                if any(value is not None for value in column):
                    columns[name] = column
            if gaps:
                columns["gaps"] = gaps
            engines[label] = columns
        return {
            "instance": instance,
            "window_seconds": self.window_seconds,
            "max_points": self.max_points,
            "fields": list(FIELDS),
            "engines": engines,
            "series_left_out": left_out,
        }


def _with_gaps(points: list[Point], since: float | None) -> tuple[list[Point], list[float | None]]:
    """The points after `since`, with a row of nulls just after each point followed by a silence of
    more than `GAP_INTERVALS` usual intervals; and those rows' times.

    >>> pts = [(float(t), 1.0, 2.0, 1, 0, 5.0, None, None) for t in (0, 2, 4, 6, 40, 42)]
    >>> rows, gaps = _with_gaps(pts, None)
    >>> [r[0] for r in rows], gaps
    ([0.0, 2.0, 4.0, 6.0, 8.0, 40.0, 42.0], [8.0])
    >>> _with_gaps(pts, 30.0)[0][0][:2], _with_gaps(pts, 30.0)[1]
    ((40.0, 1.0), [])
    """
    steps = sorted(b[0] - a[0] for a, b in itertools.pairwise(points) if b[0] > a[0])
    usual = steps[len(steps) // 2] if steps else 0.0
    rows: list[Point] = []
    gaps: list[float | None] = []
    for i, p in enumerate(points):
        if since is not None and p[0] <= since:
            continue
        before = points[i - 1][0] if i else None
        if usual > 0 and before is not None and p[0] - before > GAP_INTERVALS * usual:
            at = round(before + min(usual, (p[0] - before) / 2), 3)
            if since is None or at > since:
                rows.append((at, None, None, None, None, None, None, None))
                gaps.append(at)
        rows.append(p)
    return rows, gaps
