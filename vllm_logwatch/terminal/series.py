"""What `logwatch top` reads from a scrape: metric families (the exporter's own, collected in this
process for a log target, or parsed from a URL's text by prometheus_client's parser) turned into one
`ServerSnap` per server.

Two vocabularies, one shape: a logwatch exporter's `vllm_logwatch_*` series (a many-source watch has a
server per source: its `script`, `namespace`/`pod`/`container` or `container` labels), and a vLLM
server's own `vllm:*` series (one server; its throughput comes from its token counters, a rate the
tracker takes between two scrapes). Pure: no I/O, no clock.

>>> from prometheus_client.parser import text_string_to_metric_families
>>> text = ('vllm:num_requests_running{engine="0",model_name="m"} 3\\n'
...         'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5\\n')
>>> snaps = read_families(text_string_to_metric_families(text))
>>> snap = snaps[()]
>>> snap.kind, snap.engines["0"].model, snap.engines["0"].values["running"], snap.engines["0"].values["kv"]
('vllm', 'm', 3.0, 0.5)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from prometheus_client.core import Metric

ServerKey = tuple[tuple[str, str], ...]
"""The labels that tell a server of a target from the others: () for a target of one server."""
SOURCE_LABELS = ("script", "namespace", "pod", "container")
"""A many-source watch's labels (`following/layouts.py`), in the order a name shows them."""
Buckets = dict[float, float]
"""A cumulative histogram: upper bound (`le`, inf for +Inf) -> count of observations at most it."""

_LW = "vllm_logwatch_"
_LW_ENGINE = {  # sample name (without the prefix) -> the snap's key
    "prompt_throughput_tokens_per_second": "prompt_tps",
    "generation_throughput_tokens_per_second": "gen_tps",
    "requests_running": "running",
    "requests_waiting": "waiting",
    "kv_cache_usage_ratio": "kv",
    "prefix_cache_hit_ratio": "prefix",
    "preemptions_total": "preemptions",
    "prompt_tokens_total": "prompt_total",
    "generation_tokens_total": "gen_total",
    "last_stats_timestamp_seconds": "last",
    "stats_interval_seconds": "interval",
    "engine_stalled": "stalled",
    "spec_decode_accepted_tokens_total": "spec_accepted",
    "spec_decode_drafted_tokens_total": "spec_drafted",
}
_VLLM_ENGINE = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv",
    "vllm:gpu_cache_usage_perc": "kv",  # before vLLM 0.10
    "vllm:gpu_prefix_cache_hit_rate": "prefix",  # V0's own gauge
    "vllm:num_preemptions_total": "preemptions",
    "vllm:prompt_tokens_total": "prompt_total",
    "vllm:generation_tokens_total": "gen_total",
    "vllm:prefix_cache_queries_total": "prefix_queries",
    "vllm:prefix_cache_hits_total": "prefix_hits",
    "vllm:gpu_prefix_cache_queries_total": "prefix_queries",
    "vllm:gpu_prefix_cache_hits_total": "prefix_hits",
    "vllm:spec_decode_num_accepted_tokens_total": "spec_accepted",
    "vllm:spec_decode_num_draft_tokens_total": "spec_drafted",
}
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "tbt": (_LW + "time_between_tokens_seconds", "vllm:inter_token_latency_seconds",
            "vllm:time_per_output_token_seconds"),
    "ttft": (_LW + "time_to_first_token_seconds", "vllm:time_to_first_token_seconds"),
    "e2e": (_LW + "request_duration_seconds", "vllm:e2e_request_latency_seconds"),
}
"""The latencies the detail pane shows, by their names in each vocabulary."""
_HIST_OF = {name: short for short, names in HISTOGRAMS.items() for name in names}


@dataclass
class EngineSnap:
    """One engine's numbers at a scrape (ratios 0-1, seconds, tokens/s, totals)."""

    model: str = ""
    values: dict[str, float] = field(default_factory=dict)


@dataclass
class ServerSnap:
    """One server at a scrape."""

    kind: Literal["logwatch", "vllm"]
    engines: dict[str, EngineSnap] = field(default_factory=dict)
    problems: dict[str, float] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)
    histograms: dict[str, list[Buckets]] = field(default_factory=dict)
    """'tbt', 'ttft', 'e2e' -> every series' buckets (engines, batch sizes): merged by `merge_buckets`."""
    connector: dict[str, float] = field(default_factory=dict)
    """Connector transfers: 'kv succeeded' -> count, 'kv bytes' -> bytes."""
    launches: float | None = None


_LW_OTHER = ("problems_total", "server_info", "kv_cache_capacity_tokens", "kv_cache_blocks",
             "max_concurrency", "gpus", "startup_seconds", "launches_total", "transfers_total",
             "transfer_bytes_total")
_WANTED = frozenset({*(_LW + name for name in (*_LW_ENGINE, *_LW_OTHER)), *_VLLM_ENGINE,
                     *(name + "_bucket" for names in HISTOGRAMS.values() for name in names)})


def read_line(line: str) -> bool:
    """Whether `read_families` reads the sample on this line (a vLLM server's `*_info` too): the
    lines given to the parser, a tenth of a vLLM server's /metrics. Untyped, each sample is a family
    of its own name, which `read_families` reads the same.

    >>> [read_line(x) for x in ("# TYPE vllm:num_requests_running gauge", "vllm:num_requests_running 1",
    ...                         'vllm:cache_config_info{block_size="16"} 1', "other 2")]
    [False, True, True, False]
    """
    name = line.split("{", 1)[0].split(" ", 1)[0]
    return name in _WANTED or (name.startswith("vllm:") and name.endswith("_info"))


def _key(labels: Mapping[str, str]) -> ServerKey:
    return tuple((name, labels[name]) for name in SOURCE_LABELS if name in labels)


def read_families(families: Iterable[Metric]) -> dict[ServerKey, ServerSnap]:
    """Every server the families hold, by its key. A family of neither vocabulary is skipped; a sample
    that is not a finite number is left out (an unknown value, never a zero)."""
    snaps: dict[ServerKey, ServerSnap] = {}
    buckets: dict[tuple[ServerKey, str, tuple[tuple[str, str], ...]], Buckets] = {}

    def server(key: ServerKey, kind: Literal["logwatch", "vllm"]) -> ServerSnap:
        snap = snaps.get(key)
        if snap is None:
            snap = snaps[key] = ServerSnap(kind)
        return snap

    for family in families:
        vllm = family.name.startswith("vllm:")
        if not vllm and not family.name.startswith(_LW):
            continue
        kind: Literal["logwatch", "vllm"] = "vllm" if vllm else "logwatch"
        for sample in family.samples:
            value, labels, name = float(sample.value), sample.labels, sample.name
            if math.isnan(value):
                continue
            key = () if vllm else _key(labels)
            if name.endswith("_bucket") and name[:-7] in _HIST_OF and "le" in labels:
                series = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
                bound = math.inf if labels["le"] in ("+Inf", "Inf") else float(labels["le"])
                buckets.setdefault((key, _HIST_OF[name[:-7]], series), {})[bound] = value
                server(key, kind)
                continue
            if not math.isfinite(value):
                continue
            short = _VLLM_ENGINE.get(name) if vllm else _LW_ENGINE.get(name.removeprefix(_LW))
            if short is not None:
                engine = server(key, kind).engines.setdefault(labels.get("engine", "0"), EngineSnap())
                engine.model = labels.get("model_name", engine.model)
                engine.values[short] = engine.values.get(short, 0.0) + value
            elif vllm:
                _vllm_other(server(key, kind), name, labels, value)
            else:
                _logwatch_other(server(key, kind), name.removeprefix(_LW), labels, value)
    for (key, short, _series), counts in buckets.items():
        snaps[key].histograms.setdefault(short, []).append(counts)
    return snaps


_STARTUP = {"model_load": "model load s", "engine_init": "engine init s", "torch_compile": "compile s",
            "graph_capture": "graph capture s", "weights_load": "weights load s"}


def _logwatch_other(snap: ServerSnap, name: str, labels: Mapping[str, str], value: float) -> None:
    if name == "problems_total":
        if value > 0:
            snap.problems[labels.get("problem", "?")] = value
    elif name == "server_info":
        for label, fact in (("version", "vLLM"), ("model", "model"), ("model_name", "served")):
            if labels.get(label):
                snap.facts[fact] = labels[label]
    elif name == "kv_cache_capacity_tokens":
        snap.facts["KV tokens"] = f"{value:,.0f}"
    elif name == "kv_cache_blocks":
        snap.facts["KV blocks"] = f"{value:,.0f}"
    elif name == "max_concurrency":
        snap.facts["max conc"] = f"{value:,.1f}"
    elif name == "gpus":
        snap.facts["GPUs"] = f"{value:.0f}"
    elif name == "startup_seconds" and labels.get("phase") in _STARTUP:
        snap.facts[_STARTUP[labels["phase"]]] = f"{value:.1f}"
    elif name == "launches_total":
        snap.launches = value
    elif name == "transfers_total":
        where = f"{labels.get('cache', '?')} {labels.get('result', '?')}"
        snap.connector[where] = snap.connector.get(where, 0.0) + value
    elif name == "transfer_bytes_total":
        where = f"{labels.get('cache', '?')} bytes"
        snap.connector[where] = snap.connector.get(where, 0.0) + value


_CACHE_FACTS = {"block_size": "block size", "num_gpu_blocks": "KV blocks",
                "kv_cache_size_tokens": "KV tokens", "kv_cache_max_concurrency": "max conc",
                "gpu_memory_utilization": "GPU mem util",
                "enable_prefix_caching": "prefix caching", "cache_dtype": "KV dtype"}


def _vllm_other(snap: ServerSnap, name: str, labels: Mapping[str, str], value: float) -> None:
    if name == "vllm:cache_config_info":
        for label, fact in _CACHE_FACTS.items():
            if labels.get(label) not in (None, "", "None"):
                snap.facts[fact] = labels[label]
    elif name.startswith("vllm:") and name.endswith("_info") and "model_name" in labels:
        snap.facts.setdefault("served", labels["model_name"])


def merge_buckets(series: Iterable[Buckets]) -> Buckets:
    """Histograms of several series (engines, batch sizes) as one: over the union of their bounds, each
    series adds its count at its own largest bound at or below (all it can say of that bound), so
    series with the same bounds add exactly and none is counted above its own bounds.

    >>> merge_buckets([{0.1: 2, 1.0: 5, math.inf: 6}, {0.1: 1, 1.0: 1, math.inf: 3}])
    {0.1: 3.0, 1.0: 6.0, inf: 9.0}
    >>> merge_buckets([{1.0: 4, math.inf: 4}, {0.5: 1, math.inf: 2}])
    {0.5: 1.0, 1.0: 5.0, inf: 6.0}
    """
    every = list(series)
    bounds = sorted({b for s in every for b in s})
    return {bound: sum((count_at(s, bound) for s in every), 0.0) for bound in bounds}


def count_at(buckets: Buckets, bound: float) -> float:
    """A cumulative histogram's count at `bound`: at its own largest bound at or below it (0 below all)."""
    below = [b for b in buckets if b <= bound]
    return buckets[max(below)] if below else 0.0


def quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """The q-quantile of a cumulative histogram, as Prometheus' `histogram_quantile` takes it: linear
    inside the bucket that holds it, from 0 below the first bound; in the +Inf bucket, the highest
    finite bound. None with no observation.

    >>> quantile(0.5, {0.1: 2, 0.2: 6, math.inf: 8})
    0.15
    >>> quantile(0.99, {0.1: 2, 0.2: 6, math.inf: 8})
    0.2
    >>> quantile(0.5, {0.1: 0, math.inf: 0}) is None
    True
    """
    bounds = sorted(buckets)
    if not bounds:
        return None
    total = buckets[bounds[-1]]
    if not total > 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                finite = [b for b in bounds if math.isfinite(b)]
                return finite[-1] if finite else None
            if count == below:
                return bound
            return round(lower + (bound - lower) * (rank - below) / (count - below), 9)
        lower, below = bound, count
    return None
