"""The metric families of the live exporter's state, read at scrape time (`ExporterMetrics.collect`).

Apart from `exporting/exporter.py` to keep that module small; it reads the exporter's state under the
exporter's lock and writes nothing.
"""

from __future__ import annotations

from typing import Any

from prometheus_client.core import Metric

from .families import Families

__all__ = ["metric_families"]


def metric_families(m: Any, now: float) -> list[Metric]:
    """The metric families of `m`'s state at `now`: `m` is an `ExporterMetrics` (not imported: it
    imports this module), read under its lock."""
    out = Families(m._const_names, m._const_values)
    model = m._series_model
    for label, state in m._engines.items():
        for short, labels, value in state.samples():
            out.add(short, (label, model, *labels), value)
        if state.last is not None:
            stalled = state.stalled(now, m._stall_intervals) and not m._ended
            out.add("engine_stalled", (label, model), float(stalled))
    missing = m._stats_missing(now)
    for reason in ("stats_logging_disabled", "requests_without_stats"):
        out.add("stats_missing", (reason,), float(missing == reason))
    facts = m._facts
    fact_model = m._model_name() or ""
    if any(k in facts for k in ("vllm_version", "model", "served_model_name")):
        out.info("server", {"version": facts.get("vllm_version", ""), "model_name": fact_model,
                            "model": facts.get("model", "")})
    if "kv_cache_tokens" in facts:
        out.add("kv_cache_capacity_tokens", (fact_model,), facts["kv_cache_tokens"])
    if "max_concurrency" in facts:
        per_request = facts.get("max_concurrency_tokens_per_request")
        out.add("max_concurrency", (fact_model, "" if per_request is None else str(per_request)),
                facts["max_concurrency"])
    out.add("launches", (), m._launches)
    for (method, path, status), count in m._http.items():
        out.add("http_requests", (method, path, status), count)
    for what, counts in (("log_messages", m._levels), ("problems", m._problems),
                         ("parse_errors", m._parse_errors), ("label_overflow", m._overflow)):
        for label_value, count in counts.items():
            out.add(what, (label_value,), count)
    for key, follower_total in m._follower.items():
        out.add(key, (), follower_total.value)
    out.add("unknown_fields", (), m._unknown_fields)
    if m._child is not None:
        for key, child_value in m._child.items():
            if child_value is not None:
                out.add(key, (), child_value)
        for key, child_total in m._child_totals.items():
            out.add(key, (), child_total.value)
    return out.families()
