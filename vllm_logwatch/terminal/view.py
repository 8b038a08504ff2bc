"""The rows `logwatch top` shows, made from each refresh's `ServerSnap`s (`series.py`) and what the
refreshes before it saw: rates of a vLLM server's token counters, the sparkline of the last minutes,
latency percentiles over a window (the difference of two scrapes' cumulative buckets, merged across
engines), a preemption that just happened, and the throughput-by-concurrency table so far (the
summary's own arithmetic, `offline/summary`, over the stats lines read: every line of a log target,
one point per new stats line of a URL target).

Pure but for the time it is given: `Tracker.update(target, snaps, now)`.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ..exporting.engine_state import engine_label
from ..offline.reading.launches import Launch
from ..offline.summary.build import ConcurrencyRow, summarize
from ..parsing.events import EngineStats
from .series import HISTOGRAMS, Buckets, ServerKey, ServerSnap, count_at, merge_buckets, quantile

WINDOW_SECONDS = 300.0
"""Sparklines and latency percentiles cover the last five minutes."""
SPARK_POINTS = 24
MAX_BOOK = 50_000
"""Stats lines kept per server for the concurrency table (a week at vLLM's 10 s interval, ~10 MB)."""
STATES = ("down", "stalled", "starting", "serving", "idle")
"""Worst first: a server is its worst engine."""


@dataclass
class EngineRow:
    """One engine of a server, as a row shows it: its numbers by the snap's names (`series.py`) and
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


@dataclass
class Fleet:
    servers: int
    down: int
    gen_tps: float
    prompt_tps: float
    running: float
    waiting: float
    worst_waiting: tuple[str, float] | None
    worst_kv: tuple[str, float] | None


def fleet_of(views: Sequence[ServerView]) -> Fleet:
    """The fleet line: totals over the servers, and the worst engine by waiting and by KV usage."""
    rows = [(f"{v.name} #{e.engine}" if len(v.engines) > 1 else v.name, e) for v in views for e in v.engines]

    def worst(what: str) -> tuple[str, float] | None:
        found = [(value, name) for name, e in rows if (value := e.get(what)) is not None]
        if not found:
            return None
        value, name = max(found, key=lambda pair: pair[0])
        return name, value

    def total(what: str) -> float:
        return math.fsum(e.get(what) or 0.0 for _, e in rows)

    return Fleet(servers=len(views), down=sum(v.state == "down" for v in views),
                 gen_tps=total("gen_tps"), prompt_tps=total("prompt_tps"), running=total("running"),
                 waiting=total("waiting"), worst_waiting=worst("waiting"), worst_kv=worst("kv"))


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
            self._add(key, stats)
            self._counts[key] = self._counts.get(key, 0) + 1

    def _add(self, key: ServerKey, stats: EngineStats) -> None:
        book = self._books.get(key)
        if book is None:
            book = self._books[key] = deque(maxlen=MAX_BOOK)
        elif book and stats.time is not None and book[-1].time is not None and stats.time < book[-1].time:
            book.clear()
        book.append(stats)

    def table(self, key: ServerKey, name: str) -> list[ConcurrencyRow]:
        """The concurrency table of a server's lines, computed again only once a line came."""
        with self._lock:
            count = self._counts.get(key, 0)
            cached = self._tables.get(key)
        if cached is not None and cached[0] == count:
            return cached[1]
        rows = concurrency(name, self.lines(key))
        with self._lock:
            self._tables[key] = (count, rows)
        return rows

    def lines(self, key: ServerKey) -> list[EngineStats]:
        with self._lock:
            return list(self._books.get(key, ()))

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
    if not lines:
        return []
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
        """The views of a target's servers at `now` (a log target read up to `--at`: that time).
        `book`: a log target's stats lines, which give the sparkline and the table (else the
        refreshes do)."""
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
        shown = ("running", "waiting", "kv", "prefix", "preemptions")
        row = EngineRow(engine=label, model=s.model, state="idle", values={k: v.get(k) for k in shown})
        if snap.kind == "vllm":
            self._rates(row, seen, v, now)
        else:
            row.values.update(prompt_tps=v.get("prompt_tps"), gen_tps=v.get("gen_tps"))
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
            row.spark = _spark([e.generation_throughput or 0.0 for e in lines
                                if engine_label(e.engine, e.engines_aggregated) == label])
        else:
            row.spark = _spark([gen for at, gen in seen.spark if at >= now - WINDOW_SECONDS])
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
            time=datetime.fromtimestamp(last, timezone.utc), engine=int(label) if label.isdigit() else None,
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


def _spark(values: Sequence[float]) -> tuple[float, ...]:
    """The last `SPARK_POINTS` values (the renderer draws them)."""
    return tuple(values[-SPARK_POINTS:])


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
