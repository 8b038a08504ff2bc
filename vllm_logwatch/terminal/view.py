"""What `logwatch top` reads from a scrape (a logwatch exporter's `vllm_logwatch_*` series or a vLLM
server's `vllm:*` ones: one `ServerSnap` per server), and the rows it makes of each refresh's snaps and
what the refreshes before saw (docs/top.md). Pure: no I/O, no clock but the `now` it is given.

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
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from prometheus_client.core import Metric

from ..exporting.engine_state import engine_label
from ..offline.reading.launches import Launch
from ..offline.summary.build import ConcurrencyRow, summarize
from ..parsing.events import EngineStats

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
    """Whether `read_families` reads the sample on this line (a vLLM server's `*_info` too): only those
    lines go to the parser (untyped, each sample is a family of its own name, read the same).

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
_NUMBER_FACTS = {"kv_cache_capacity_tokens": ("KV tokens", "{:,.0f}"),
                 "kv_cache_blocks": ("KV blocks", "{:,.0f}"),
                 "max_concurrency": ("max conc", "{:,.1f}"), "gpus": ("GPUs", "{:.0f}")}


def _logwatch_other(snap: ServerSnap, name: str, labels: Mapping[str, str], value: float) -> None:
    if name == "problems_total":
        if value > 0:
            snap.problems[labels.get("problem", "?")] = value
    elif name == "server_info":
        for label, fact in (("version", "vLLM"), ("model", "model"), ("model_name", "served")):
            if labels.get(label):
                snap.facts[fact] = labels[label]
    elif name in _NUMBER_FACTS:
        fact, form = _NUMBER_FACTS[name]
        snap.facts[fact] = form.format(value)
    elif name == "startup_seconds" and labels.get("phase") in _STARTUP:
        snap.facts[_STARTUP[labels["phase"]]] = f"{value:.1f}"
    elif name == "launches_total":
        snap.launches = value
    elif name in ("transfers_total", "transfer_bytes_total"):
        what = labels.get("result", "?") if name == "transfers_total" else "bytes"
        where = f"{labels.get('cache', '?')} {what}"
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


WINDOW_SECONDS = 300.0
"""Sparklines and latency percentiles cover the last five minutes."""
SPARK_POINTS = 24
MAX_BOOK = 50_000
"""Stats lines kept per server for the concurrency table (a week at vLLM's 10 s interval, ~10 MB)."""
STATES = ("down", "stalled", "starting", "serving", "idle")
"""Worst first: a server is its worst engine."""


@dataclass
class EngineRow:
    """One engine of a server, as a row shows it: its numbers by the snap's names (`EngineSnap`) and
    `age`, `tbt`; one missing or None is not known."""

    engine: str
    model: str
    state: str
    values: dict[str, float | None] = field(default_factory=dict)
    preempting: bool = False
    """Preemptions went up since the refresh before."""
    spark: tuple[float, ...] = ()

    def get(self, what: str) -> float | None:
        return self.values.get(what)


@dataclass
class Latency:
    name: str
    p50: float | None
    p95: float | None
    p99: float | None
    count: float
    window: str
    """'5m' (two scrapes apart) or 'all' (since the server's start)."""


@dataclass
class ServerView:
    """One server of a target, with its engines and what its detail pane shows."""

    target: str
    name: str
    kind: str
    state: str
    reason: str | None = None
    engines: list[EngineRow] = field(default_factory=list)
    problems: dict[str, float] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)
    latency: list[Latency] = field(default_factory=list)
    spec: tuple[float, float] | None = None
    """Drafted and accepted tokens, summed over the engines."""
    connector: dict[str, float] = field(default_factory=dict)
    stats: Callable[[], list[ConcurrencyRow]] | None = None
    """The throughput-by-concurrency table so far (computed when shown)."""

    def total(self, what: str) -> float | None:
        values = [v for e in self.engines if (v := e.get(what)) is not None]
        return math.fsum(values) if values else None

    def worst(self, what: str) -> float | None:
        values = [v for e in self.engines if (v := e.get(what)) is not None]
        return max(values) if values else None


class StatsBook:
    """The stats lines of each server of a log target as they are read (`ExporterMetrics(on_stats=)`,
    through `watch.follow`), for the concurrency table and the sparkline; a server's book starts over
    when its stamps go back (a new launch)."""

    def __init__(self) -> None:
        self._books: dict[ServerKey, deque[EngineStats]] = {}
        self._lock = threading.Lock()  # fed by the pipeline's thread, read by the screen's
        self._counts: dict[ServerKey, int] = {}
        self._tables: dict[ServerKey, tuple[int, list[ConcurrencyRow]]] = {}

    def record(self, labels: Mapping[str, str], _engine: str, stats: EngineStats, _arrival: float) -> None:
        key = tuple(labels.items())
        with self._lock:
            book = self._books.get(key)
            if book is None:
                book = self._books[key] = deque(maxlen=MAX_BOOK)
            elif book and stats.time is not None and book[-1].time is not None and stats.time < book[-1].time:
                book.clear()
            book.append(stats)
            self._counts[key] = self._counts.get(key, 0) + 1

    def table(self, key: ServerKey, name: str) -> list[ConcurrencyRow]:
        """The concurrency table of a server's lines, computed again only once a line came."""
        with self._lock:
            count = self._counts.get(key, 0)
            cached = self._tables.get(key)
            if cached is not None and cached[0] == count:
                return cached[1]
            lines = list(self._books.get(key, ()))
        rows = concurrency(name, lines)
        with self._lock:
            self._tables[key] = (count, rows)
        return rows

    def recent(self, key: ServerKey, seconds: float) -> list[EngineStats]:
        """The lines of the last `seconds` before the newest (for the sparkline), oldest first."""
        out: list[EngineStats] = []
        with self._lock:
            book = self._books.get(key, ())
            end = book[-1].time if book else None
            for stats in reversed(book):
                if end is None or stats.time is None or (end - stats.time).total_seconds() > seconds:
                    break
                out.append(stats)
        out.reverse()
        return out

    def latest(self) -> float | None:
        """The time of the newest stats line read (epoch seconds), of any server."""
        with self._lock:
            times = [book[-1].time.timestamp() for book in self._books.values() if book and book[-1].time]
        return max(times) if times else None


def concurrency(name: str, lines: Sequence[EngineStats]) -> list[ConcurrencyRow]:
    """The summary's throughput-by-concurrency rows of `lines` (one launch)."""
    summary = summarize(((Launch(0, name, 1), e) for e in lines), by="launch")
    return summary.groups[0].concurrency if summary.groups else []


@dataclass
class _Seen:
    """What the refreshes before saw of one engine."""

    at: float = 0.0
    counters: dict[str, float] = field(default_factory=dict)
    last: float | None = None
    preemptions: float | None = None
    spark: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=4 * SPARK_POINTS))


class Tracker:
    """Turns each refresh's snaps into views, remembering what it needs across refreshes."""

    def __init__(self) -> None:
        self._engines: dict[tuple[str, ServerKey, str], _Seen] = {}
        self._histograms: dict[tuple[str, ServerKey, str], deque[tuple[float, Buckets]]] = {}
        self._points: dict[tuple[str, ServerKey], deque[EngineStats]] = {}

    def down(self, target: str, reason: str, before: Sequence[ServerView]) -> list[ServerView]:
        """A target that did not answer: its servers as last seen, marked down (or one row)."""
        if not before:
            return [ServerView(target=target, name=target, kind="?", state="down", reason=reason)]
        return [ServerView(target=target, name=v.name, kind=v.kind, state="down", reason=reason,
                           engines=[EngineRow(e.engine, e.model, "down", spark=e.spark) for e in v.engines],
                           problems=v.problems, facts=v.facts, stats=v.stats) for v in before]

    def update(self, target: str, snaps: Mapping[ServerKey, ServerSnap], now: float, *,
               book: StatsBook | None = None) -> list[ServerView]:
        """The views of a target's servers at `now`; `book`: a log target's stats lines, which give the
        sparkline and the table (else the refreshes do)."""
        views = []
        many = any(key for key in snaps)
        for key, snap in sorted(snaps.items()):
            if many and not key and not snap.engines:
                continue  # a many-source watch's own series (its errors): no server of their own
            name = target if not key else " ".join(value for _, value in key)
            views.append(self._server(target, key, name, snap, now, book))
        return views

    def _server(self, target: str, key: ServerKey, name: str, snap: ServerSnap, now: float,
                book: StatsBook | None) -> ServerView:
        lines = book.recent(key, WINDOW_SECONDS) if book is not None else None
        engines = [self._engine(target, key, label, snap, now, lines)
                   for label in sorted(snap.engines, key=_engine_order)]
        view = ServerView(target=target, name=name, kind=snap.kind, state="idle", engines=engines,
                          problems=dict(snap.problems), facts=dict(snap.facts),
                          connector={k: v for k, v in snap.connector.items() if k})
        if not engines:
            view.state = "starting" if (snap.launches or snap.facts) else "down"
            view.reason = None if view.state == "starting" else "nothing read yet"
        else:
            view.state = min((e.state for e in engines), key=STATES.index)
        view.latency = [lat for short in HISTOGRAMS if (lat := self._latency(target, key, short, snap, now))]
        tbt = next((lat.p50 for lat in view.latency if lat.name == "tbt"), None)
        if len(engines) == 1:  # else the histogram is the servers', merged: in the pane only
            engines[0].values["tbt"] = tbt
        spec = [(s.values["spec_drafted"], s.values.get("spec_accepted", 0.0))
                for s in snap.engines.values() if "spec_drafted" in s.values]
        if spec:
            view.spec = (math.fsum(d for d, _ in spec), math.fsum(a for _, a in spec))
        if book is not None:
            view.stats = lambda: book.table(key, name)
        else:
            points = list(self._points.get((target, key), ()))
            view.stats = lambda: concurrency(name, points)
        return view

    def _engine(self, target: str, key: ServerKey, label: str, snap: ServerSnap, now: float,
                lines: list[EngineStats] | None) -> EngineRow:
        s = snap.engines[label]
        v = s.values
        seen = self._engines.setdefault((target, key, label), _Seen())
        row = EngineRow(engine=label, model=s.model, state="idle", values=dict(v))
        if snap.kind == "vllm":
            self._rates(row, seen, v, now)
        else:
            last = v.get("last")
            row.values["age"] = max(0.0, now - last) if last is not None else None
            if last is not None and last != seen.last and lines is None:
                self._point(target, key, label, row, last)
                seen.spark.append((last, row.get("gen_tps") or 0.0))
            seen.last = last
        before, preemptions = seen.preemptions, row.get("preemptions")
        row.preempting = preemptions is not None and before is not None and preemptions > before
        seen.preemptions = preemptions
        if lines is not None:
            gens = [e.generation_throughput or 0.0 for e in lines
                    if engine_label(e.engine, e.engines_aggregated) == label]
        else:
            gens = [gen for at, gen in seen.spark if at >= now - WINDOW_SECONDS]
        row.spark = tuple(gens[-SPARK_POINTS:])
        if v.get("stalled"):
            row.state = "stalled"
        elif any((row.get(what) or 0) > 0 for what in ("running", "gen_tps", "prompt_tps")):
            row.state = "serving"
        return row

    def _rates(self, row: EngineRow, seen: _Seen, v: Mapping[str, float], now: float) -> None:
        """A vLLM server's throughput and prefix hit rate: its counters' rise since the refresh before."""
        counters = {k: v[k] for k in ("gen_total", "prompt_total", "prefix_hits", "prefix_queries") if k in v}
        if seen.counters and now > seen.at:
            span = now - seen.at

            def rise(name: str) -> float | None:
                if name not in counters or name not in seen.counters:
                    return None
                delta = counters[name] - seen.counters[name]
                return delta if delta >= 0 else counters[name]  # a restart: counting from 0 again

            gen, prompt = rise("gen_total"), rise("prompt_total")
            row.values["gen_tps"] = None if gen is None else gen / span
            row.values["prompt_tps"] = None if prompt is None else prompt / span
            hits, queries = rise("prefix_hits"), rise("prefix_queries")
            if hits is not None and queries:
                row.values["prefix"] = hits / queries
            seen.spark.append((now, row.get("gen_tps") or 0.0))
        row.values["age"] = 0.0
        seen.at, seen.counters = now, counters

    def _point(self, target: str, key: ServerKey, label: str, row: EngineRow, last: float) -> None:
        """A URL target's new stats line, as the stats line it was, for the concurrency table."""
        points = self._points.setdefault((target, key), deque(maxlen=MAX_BOOK))
        points.append(EngineStats(
            time=datetime.fromtimestamp(last, UTC), engine=int(label) if label.isdigit() else None,
            prompt_throughput=row.get("prompt_tps"), generation_throughput=row.get("gen_tps"),
            running=None if (running := row.get("running")) is None else int(running),
            waiting=None if (waiting := row.get("waiting")) is None else int(waiting),
            gpu_kv_cache_usage_pct=None if (kv := row.get("kv")) is None else kv * 100))

    def _latency(self, target: str, key: ServerKey, short: str, snap: ServerSnap,
                 now: float) -> Latency | None:
        series = snap.histograms.get(short)
        if not series:
            return None
        merged = merge_buckets(series)
        ring = self._histograms.setdefault((target, key, short), deque())
        ring.append((now, merged))
        while len(ring) > 2 and ring[1][0] <= now - WINDOW_SECONDS:
            ring.popleft()
        window = "all"
        counts = merged
        if len(ring) > 1:
            old = ring[0][1]
            delta = {b: c - count_at(old, b) for b, c in merged.items()}
            if all(d >= 0 for d in delta.values()) and max(delta.values(), default=0) > 0:
                counts, window = delta, f"{round(min(now - ring[0][0], WINDOW_SECONDS) / 60) or 1}m"
        total = max(counts.values(), default=0.0)
        return Latency(short, quantile(0.5, counts), quantile(0.95, counts), quantile(0.99, counts), total,
                       window)


def _engine_order(label: str) -> tuple[int, str]:
    return (int(label), "") if label.isdigit() else (1 << 30, label)


_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float], width: int) -> str:
    """Eight heights of block, scaled to the highest value shown.

    >>> sparkline([0, 1, 2, 4, 8], 5)
    '▁▂▃▅█'
    >>> sparkline([], 3)
    ''
    """
    shown = list(values[-width:])
    top = max(shown, default=0.0)
    if not shown:
        return ""
    if top <= 0:
        return _BARS[0] * len(shown)
    return "".join(_BARS[min(7, int(v / top * 7 + 0.5))] for v in shown)
