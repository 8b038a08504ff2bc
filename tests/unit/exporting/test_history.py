"""The history behind `/api/v1/history`: one ring buffer per engine, fed through `ExporterMetrics`'
`on_stats` hook, bounded in points (and so in memory and JSON size) however long it runs; `since`."""

from __future__ import annotations

import json
import math
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from vllm_logwatch.exporting import exporter
from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.exporting.history import FIELDS, History
from vllm_logwatch.parsing.assemble import iter_events
from vllm_logwatch.parsing.events import EngineStats, Event
from vllm_logwatch.parsing.stamps import YearClock
from vllm_logwatch.web.server import create_app

pytestmark = pytest.mark.timeout(60)

DAY = "20261129"
LINE = ("(APIServer pid=29214) INFO {stamp} [loggers.py:335] Engine {engine:03d}: Avg prompt throughput: "
        "{prompt:.1f} tokens/s, Avg generation throughput: {generation:.1f} tokens/s, "
        "Running: {running} reqs, Waiting: {waiting} reqs, GPU KV cache usage: {kv:.1f}%, "
        "Prefix cache hit rate: 61.3%")



def points(history: History, label: str) -> int:
    """The points `label` holds, as `/api/v1/history` gives them."""
    return len(history.snapshot()["engines"].get(label, {}).get("time", []))

def stats_lines(start: datetime, count: int, step_seconds: float, engines: int) -> Iterator[str]:
    """`count` stats lines per engine, `step_seconds` apart, as vLLM prints them."""
    for n in range(count):
        at = start + timedelta(seconds=n * step_seconds)
        for engine in range(engines):
            yield LINE.format(stamp=at.strftime("%m-%d %H:%M:%S"), engine=engine, prompt=100.0 + n % 50,
                              generation=1000.0 + n % 977, running=n % 17, waiting=n % 5, kv=(n % 1000) / 10)


def events(lines: Iterator[str]) -> Iterator[Event]:
    """The events of `lines` as the pipeline makes them: parser, assembler, stamps in UTC."""
    return iter_events(lines, file=f"serve_{DAY}_000000.log", clock=YearClock(2026, UTC))


def feed(lines: Iterator[str] | list[Event], **metrics_kwargs: Any) -> tuple[History, ExporterMetrics]:
    """Lines (or their events) through the real seam: the metrics and their `on_stats` hook."""
    history = History()
    metrics = ExporterMetrics(on_stats=history.record, **metrics_kwargs)
    for event in lines if isinstance(lines, list) else events(lines):
        metrics.apply(event)
    return history, metrics


def json_size(value: Any) -> int:
    """Bytes of `value` as the server sends it (Starlette's JSONResponse: compact separators)."""
    return len(json.dumps(value, separators=(",", ":")).encode())


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_a_day_of_stats_lines_keeps_one_hour_per_engine() -> None:
    engines, per_day = 4, 8640  # vLLM's default 10 s interval for 24 h
    day = list(events(stats_lines(datetime(2026, 11, 29), per_day, 10.0, engines)))
    history, _ = feed(day)
    tracemalloc.start()
    try:
        alone = History()
        for event in day:
            assert isinstance(event, EngineStats)
            alone.record(str(event.engine), event, 0.0)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 600_000, f"{held} bytes held by the history after a day"
    snapshot = history.snapshot()
    assert sorted(snapshot["engines"]) == ["0", "1", "2", "3"]
    for columns in snapshot["engines"].values():
        times = columns["time"]
        # The newest point and every point of the hour before it: 23:59:50 back to 22:59:50.
        assert len(times) == 361
        assert times[-1] - times[0] == 3600.0
        assert times == sorted(times)
        assert set(columns) == set(FIELDS) - {"mm_cache_hit_rate_pct"}, "an all-null column is left out"
    last = snapshot["engines"]["3"]
    assert (last["running"][-1], last["waiting"][-1]) == ((per_day - 1) % 17, (per_day - 1) % 5)
    assert last["generation_throughput"][-1] == 1000.0 + (per_day - 1) % 977
    size = json_size(snapshot)
    assert size < 120_000, size  # ~30 bytes a value, 4 engines x 361 points x 7 columns

    # Flat: a history fed two hours is exactly as large as one fed the whole day.
    two_hours, _ = feed(stats_lines(datetime(2026, 11, 29, 10), 720, 10.0, engines))
    assert [points(two_hours, str(e)) for e in range(engines)] == [361] * engines
    assert abs(json_size(two_hours.snapshot()) - size) < 0.05 * size


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_a_fast_stats_interval_is_capped_by_the_point_count() -> None:
    # Two hours of lines every 0.5 s (milliseconds in the stamps): the window alone would keep 7,200.
    lines = (line.replace(" [loggers", f".{500 * (n % 2):03d} [loggers")
             for n, line in enumerate(stats_lines(datetime(2026, 11, 29, 8), 14_400, 0.5, 1)))
    history, _ = feed(lines)
    assert points(history, "0") == history.max_points == 3600
    times = history.snapshot()["engines"]["0"]["time"]
    assert 1799.0 <= times[-1] - times[0] <= 1799.5, "half an hour, not the window's hour"


def test_engine_labels_are_those_of_the_metrics_and_bounded_by_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exporter, "MAX_ENGINES", 2)
    history, metrics = feed(stats_lines(datetime(2026, 11, 29), 10, 10.0, 5))
    registry = CollectorRegistry()
    metrics.register(registry)
    assert sorted(history.snapshot()["engines"]) == ["0", "1", "other"]
    for label in ("0", "1", "other"):
        labels = {"engine": label, "model_name": "unknown"}
        assert registry.get_sample_value("vllm_logwatch_requests_running", labels) is not None
    assert points(history, "other") == 30, "engines 2-4 share one buffer"


def test_since_returns_only_newer_points() -> None:
    history, _ = feed(stats_lines(datetime(2026, 11, 29, 12), 30, 10.0, 2))
    times = history.snapshot()["engines"]["0"]["time"]
    after = history.snapshot(since=times[24])
    newer = {label: cols["time"] for label, cols in after["engines"].items()}
    assert newer == {"0": times[25:], "1": times[25:]}
    assert after["engines"]["0"]["running"] == [25 % 17, 26 % 17, 27 % 17, 28 % 17, 29 % 17]
    nothing_new = history.snapshot(since=times[-1])
    assert nothing_new["engines"] == {"0": {"time": []}, "1": {"time": []}}
    assert nothing_new["instance"] == after["instance"]


def _stats(running: int, at: datetime | None) -> EngineStats:
    return EngineStats(engine=0, running=running, generation_throughput=math.nan, time=at)


def test_time_going_back_starts_the_buffer_over_and_says_so() -> None:
    history = History()
    history.record("0", _stats(1, datetime(2026, 11, 29, 12, 0, 10).astimezone()), arrival=0.0)
    history.record("0", _stats(2, datetime(2026, 11, 29, 12, 0, 20).astimezone()), arrival=0.0)
    before = history.instance
    history.record("0", _stats(3, datetime(2026, 11, 29, 11, 0, 0).astimezone()), arrival=0.0)
    assert history.instance != before, "a client fetching `since` must refetch everything"
    columns = history.snapshot()["engines"]["0"]
    assert columns["running"] == [3]
    assert "generation_throughput" not in columns, "NaN (vLLM's `nan%`) is kept as null"
    history.record("0", _stats(4, None), arrival=1_800_000_000.0)  # no stamp: the time it was read
    assert history.snapshot()["engines"]["0"]["time"][-1] == 1_800_000_000.0


def test_history_endpoint_over_http(run_app: Callable[..., Any]) -> None:
    history, metrics = feed(stats_lines(datetime(2026, 11, 29), 720, 10.0, 4))  # two hours
    registry = CollectorRegistry()
    metrics.register(registry)
    with run_app(create_app(registry, metrics.status, history=history)) as client:
        full = client.get("/api/v1/history")
        assert full.status_code == 200
        assert full.headers["content-type"] == "application/json"
        body = full.json()
        assert body == history.snapshot()
        assert len(full.content) < 120_000
        since = body["engines"]["0"]["time"][-3]
        newer = client.get("/api/v1/history", params={"since": str(since)}).json()
        assert [len(cols["time"]) for cols in newer["engines"].values()] == [2, 2, 2, 2]
        for bad in ("yesterday", "nan", "inf", ""):
            response = client.get("/api/v1/history", params={"since": bad})
            assert response.status_code == 400, bad
            assert response.json() == {"error": "since must be a number of seconds since the epoch"}


def test_a_capped_history_keeps_its_first_series_and_makes_room_once_one_is_silent_an_hour() -> None:
    history = History(max_series=2)
    start = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    stats = next(e for e in events(stats_lines(start, 1, 10, 1)) if isinstance(e, EngineStats))
    at = stats.time.timestamp() if stats.time else 0.0
    for label in ("a #0", "b #0", "c #0"):
        history.record(label, stats, at)
    snapshot = history.snapshot()
    assert list(snapshot["engines"]) == ["a #0", "b #0"] and snapshot["series_left_out"] == 1
    later = replace(stats, time=start + timedelta(minutes=30))
    history.record("a #0", later, 0.0)  # a keeps printing; b falls silent
    history.record("c #0", later, 0.0)  # b's last point is 30 minutes old: no room yet
    assert list(history.snapshot()["engines"]) == ["a #0", "b #0"]
    hour_on = replace(stats, time=start + timedelta(minutes=61))
    history.record("c #0", hour_on, 0.0)  # b silent for over the window: it goes, c comes
    snapshot = history.snapshot()
    assert list(snapshot["engines"]) == ["a #0", "c #0"] and snapshot["series_left_out"] == 0
