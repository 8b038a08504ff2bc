"""Live lines timed by their arrival (`live/ingest.py`), through the ingest core into the metrics: the
token counters credit every stats line the configured interval however late it was read, a backlog
is timed by its stamps, and only lines read as they were written are measured."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.live.ingest import Arrival, LaunchReader, measure, print_time
from vllm_logwatch.parsing.assemble import Assembler
from vllm_logwatch.parsing.events import EngineStats
from vllm_logwatch.parsing.stamps import YearClock

UTC = UTC
START = datetime(2026, 11, 29, 19, 26, 5, tzinfo=UTC).timestamp()
E0 = {"engine": "0", "model_name": "unknown"}


def stats_line(at: float, gen: float = 100.0) -> bytes:
    stamp = datetime.fromtimestamp(at, UTC).strftime("%m-%d %H:%M:%S")
    return (f"(APIServer pid=1) INFO {stamp} [loggers.py:335] Engine 000: Avg prompt throughput: 0.0 "
            f"tokens/s, Avg generation throughput: {gen:.1f} tokens/s, Running: 4 reqs, Waiting: 0 reqs, "
            "CPU KV cache usage: 1.0%\n").encode()


class Clocks:
    """A monotonic clock 1000 s behind the wall clock, moved by hand."""

    def __init__(self) -> None:
        self.wall = START

    def now(self) -> Arrival:
        return Arrival(monotonic=self.wall - 1000.0, wall=self.wall)


def reader(metrics: ExporterMetrics) -> LaunchReader:
    clock = YearClock.for_source("serve_20261129_192600.log", UTC)
    return LaunchReader(metrics, Assembler("serve_20261129_192600.log", clock, hold=False))


def generation(metrics: ExporterMetrics) -> float | None:
    registry = CollectorRegistry()
    metrics.register(registry)
    return registry.get_sample_value("vllm_logwatch_generation_tokens_total", E0)


def test_print_time_is_the_read_cut_back_to_the_stamps_second() -> None:
    arrival = Arrival(monotonic=50.0, wall=200.5)
    assert print_time(200.0, arrival) == 50.0
    assert print_time(199.0, arrival) == pytest.approx(49.5)  # our read was 0.5 s late at least
    assert print_time(190.0, arrival) is None  # read 10 s after: a backlog
    assert print_time(201.0, arrival) == 50.0  # half a second before its stamp: clocks a little apart
    assert print_time(202.0, arrival) is None  # read before its own stamp: another clock or zone
    assert print_time(200.25, arrival) == pytest.approx(49.751)  # a millisecond stamp: printed by 200.251


def test_lines_read_live_are_credited_the_configured_interval() -> None:
    """A 5 s interval whose loop runs 5.2 s: each line is credited the configured 5 s, however it was
    read (the counters run low by the loop's lateness, the documented bound), as watch credits them."""
    clocks = Clocks()
    metrics = ExporterMetrics(stats_interval=5.0)
    live = reader(metrics)
    for i in range(20):
        printed = START + 0.1 + 5.2 * i
        clocks.wall = printed + 0.01  # read 10 ms after it was printed
        live.read(stats_line(printed), arrival=clocks.now())
    assert generation(metrics) == pytest.approx(100.0 * 5.0 * 20, rel=1e-6)


def test_a_backlog_is_timed_by_its_stamps() -> None:
    """The same lines read an hour later, in one block: no line was read live, the stamps' mean
    spacing gives the windows, and the timer changes nothing."""
    clocks = Clocks()
    data = b"".join(stats_line(START + 0.1 + 5.2 * i) for i in range(20))
    clocks.wall = START + 3600.0
    timed, untimed = ExporterMetrics(), ExporterMetrics()
    reader(timed).read(data, arrival=clocks.now())
    reader(untimed).read(data)
    assert generation(timed) == generation(untimed)
    assert generation(timed) == pytest.approx(100.0 * 20 * 5.2, rel=0.02)


def test_measure_names_only_live_stats_lines() -> None:
    clocks = Clocks()
    clocks.wall = START + 0.3
    old = EngineStats(time=datetime.fromtimestamp(START - 60, UTC), generation_throughput=1.0)
    new = EngineStats(time=datetime.fromtimestamp(START, UTC), generation_throughput=1.0)
    unstamped = EngineStats(time=None, generation_throughput=1.0)
    assert measure([old, new, unstamped], clocks.now()) == {1: START + 0.3 - 1000.0}


def test_lines_read_late_take_the_configured_interval() -> None:
    """vLLM keeping a 2 s interval, printing 0.6 s into a second; our reads 50 ms late, then 0.5 s late
    (past the second) through ten busy lines, then 50 ms again: the counter is throughput x 2 s, our
    late reads carried into no line."""
    clocks = Clocks()
    metrics = ExporterMetrics(stats_interval=2.0)
    live = reader(metrics)
    rates = [100.0] * 10 + [900.0] * 10 + [100.0] * 10
    for i, gen in enumerate(rates):
        printed = START + 0.6 + 2.0 * i
        clocks.wall = printed + (0.5 if gen > 100 else 0.05)
        live.read(stats_line(printed, gen=gen), arrival=clocks.now())
    assert generation(metrics) == pytest.approx(2.0 * sum(rates), rel=0.003)
