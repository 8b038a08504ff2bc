"""The server's side of a run as an llm-d Benchmark Report partial (`audit --observability DIR`).

One YAML file per run: `results.observability.components[]` of the Benchmark Report 0.2.x schema, with
one component (`component_label: vllm`) whose `aggregate` holds the statistics of the window's samples
(`running_requests`, `waiting_requests` in `count`, `kv_cache_usage` in `percent`) and whose
`time_series` holds the samples themselves (`num_requests_running`, `num_requests_waiting`,
`kv_cache_usage`; `ts` in ISO 8601 with the log's zone). A sample is a timestamp's lines, as
measures.py adds them (Running and Waiting summed over engines, the KV cache usage their highest).
Merged into a report (llm-d's `update_dict`, a deep update), the report carries what the server ran.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ...parsing.events import EngineStats
from ...parsing.stamps import utc
from .windows import Window

__all__ = ["COMPONENT", "observability_partial"]

COMPONENT = "vllm"
"""The component's label (a report's `scenario.stack[].metadata.label` names it where it has one)."""


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear between the closest ranks (numpy's default), as the reports' clients compute theirs."""
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _statistics(values: list[float], units: str) -> dict[str, Any] | None:
    if not values:
        return None
    ordered = sorted(values)
    out: dict[str, Any] = {"units": units, "mean": statistics.fmean(ordered), "min": ordered[0]}
    for name, q in (("p10", 0.1), ("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        out[name] = _quantile(ordered, q)
    out["max"] = ordered[-1]
    if len(ordered) > 1:
        out["stddev"] = statistics.stdev(ordered)
    return out


def _series(points: list[tuple[datetime, float]], units: str) -> dict[str, Any] | None:
    if not points:
        return None
    return {"units": units, "series": [{"ts": t.isoformat(), "value": v} for t, v in points]}


def observability_partial(window: Window) -> dict[str, Any]:
    """The `results.observability` partial of `window`'s run (no component without a stats line)."""
    by_time: dict[datetime, list[EngineStats]] = {}
    for line in window.lines:
        if line.time is not None:
            by_time.setdefault(line.time, []).append(line)
    running: list[tuple[datetime, float]] = []
    waiting: list[tuple[datetime, float]] = []
    kv: list[tuple[datetime, float]] = []
    for t, lines in sorted(by_time.items(), key=lambda item: utc(item[0])):
        if any(e.running is not None for e in lines):
            running.append((t, float(sum(e.running or 0 for e in lines))))
        if any(e.waiting is not None for e in lines):
            waiting.append((t, float(sum(e.waiting or 0 for e in lines))))
        usage = [e.kv_cache_usage_pct for e in lines if e.kv_cache_usage_pct is not None]
        if usage:
            kv.append((t, max(usage)))
    aggregate = {name: found for name, found in (
        ("running_requests", _statistics([v for _, v in running], "count")),
        ("waiting_requests", _statistics([v for _, v in waiting], "count")),
        ("kv_cache_usage", _statistics([v for _, v in kv], "percent"))) if found is not None}
    series = {name: found for name, found in (
        ("num_requests_running", _series(running, "count")),
        ("num_requests_waiting", _series(waiting, "count")),
        ("kv_cache_usage", _series(kv, "percent"))) if found is not None}
    components = []
    if aggregate or series:
        component: dict[str, Any] = {"component_label": COMPONENT}
        if aggregate:
            component["aggregate"] = aggregate
        if series:
            component["time_series"] = series
        components.append(component)
    return {"results": {"observability": {"components": components}}}
