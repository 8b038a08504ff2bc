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

from ...parsing.stamps import utc
from .measures import samples
from .windows import Window

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
    found = sorted(samples(window.lines), key=lambda s: utc(s.time))
    running = [(s.time, s.running) for s in found if s.running is not None]
    waiting = [(s.time, float(s.waiting)) for s in found if s.waiting is not None]
    kv = [(s.time, s.kv_pct) for s in found if s.kv_pct is not None]
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
