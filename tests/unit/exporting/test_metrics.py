"""ExporterMetrics: events in, Prometheus families out, read back the way prometheus_client's own tests
do (a fresh `CollectorRegistry()` per test and `get_sample_value`). Events come from real-format
lines through `parse_line`; times are set with `dataclasses.replace`; the wall clock is injected (no sleeps).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from support import TESTS

from vllm_logwatch.errors import UsageError
from vllm_logwatch.exporting.catalogue import METRICS
from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.parsing.assemble import iter_events
from vllm_logwatch.parsing.events import EngineStats, Event
from vllm_logwatch.parsing.line import parse_line
from vllm_logwatch.parsing.stamps import YearClock

REAL = TESTS / "data" / "real-vllm-cpu"
T0 = datetime(2026, 11, 29, 19, 26, 5, tzinfo=UTC)
E0 = {"engine": "0", "model_name": "unknown"}


class FakeClock:
    """Wall time the test moves by hand."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def event(text: str, at: float | None = None) -> Event:
    """The event of a real-format line; `at` seconds after T0 as its time (None: no time)."""
    parsed = parse_line(text)
    assert parsed is not None, text
    return parsed if at is None else replace(parsed, time=T0 + timedelta(seconds=at))


def v1(at: float | None = 0.0, *, gen: float = 100.0, prompt: float = 10.0, running: int = 4,
       engine: int = 0, kv: str = "GPU KV cache usage: 4.5%", more: str = "") -> Event:
    return event(
        f"(APIServer pid=1) INFO 11-29 19:26:05 [loggers.py:335] Engine {engine:03d}: Avg prompt throughput: "
        f"{prompt:.1f} tokens/s, Avg generation throughput: {gen:.1f} tokens/s, Running: {running} reqs, "
        f"Waiting: 0 reqs, {kv}, Prefix cache hit rate: 61.3%{more}", at)


V0_LINE = ("INFO 05-25 06:50:29 [metrics.py:486] Avg prompt throughput: 0.0 tokens/s, Avg generation "
           "throughput: 15.5 tokens/s, Running: 1 reqs, Swapped: 2 reqs, Pending: 3 reqs, "
           "GPU KV cache usage: 40.0%, CPU KV cache usage: 0.1%.")
ACCESS = 'INFO:     127.0.0.1:38934 - "{} {} HTTP/1.1" {} OK'


def setup(**kwargs: object) -> tuple[ExporterMetrics, CollectorRegistry]:
    metrics = ExporterMetrics(**kwargs)  # type: ignore[arg-type]
    registry = CollectorRegistry()
    metrics.register(registry)
    return metrics, registry


def value(registry: CollectorRegistry, short: str, labels: dict[str, str] | None = None) -> float | None:
    return registry.get_sample_value("vllm_logwatch_" + short, labels or {})


def feed(metrics: ExporterMetrics, *events: Event) -> None:
    for e in events:
        metrics.apply(e)


def test_stats_line_gauges_are_ratios_and_extra_fields_map() -> None:
    metrics, reg = setup()
    metrics.apply(event(
        "(APIServer pid=1) INFO 03-30 06:46:52 [loggers.py:259] Engine 001: Avg prompt throughput: "
        "24.2 tokens/s, Avg generation throughput: 11.3 tokens/s, Running: 1 reqs, Waiting: 2 reqs, "
        "Deferred: 1 reqs, Preemptions: 3, GPU KV cache usage: 0.4%, Prefix cache hit rate: 10.0%, "
        "External prefix cache hit rate: 20.0%, MM cache hit rate: 50.1%, Fancy new thing: 7"))
    e1 = {"engine": "1", "model_name": "unknown"}
    assert value(reg, "prompt_throughput_tokens_per_second", e1) == 24.2
    assert value(reg, "generation_throughput_tokens_per_second", e1) == 11.3
    assert value(reg, "requests_running", e1) == 1
    assert value(reg, "requests_waiting", e1) == 2
    assert value(reg, "requests_deferred", e1) == 1
    assert value(reg, "kv_cache_usage_ratio", e1) == pytest.approx(0.004)
    assert value(reg, "prefix_cache_hit_ratio", e1) == pytest.approx(0.10)
    assert value(reg, "external_prefix_cache_hit_ratio", e1) == pytest.approx(0.20)
    assert value(reg, "mm_cache_hit_ratio", e1) == pytest.approx(0.501)
    assert value(reg, "preemptions_total", e1) == 3
    assert value(reg, "stats_lines_total", e1) == 1
    assert value(reg, "unknown_fields_total") == 1
    assert value(reg, "requests_swapped", e1) is None  # V1 has no swap
    assert value(reg, "engine_stalled", e1) == 0


def test_kv_usage_v0_v1_and_cpu_backend() -> None:
    metrics, reg = setup()
    feed(metrics, event(V0_LINE), v1(engine=1), v1(engine=2, kv="CPU KV cache usage: 1.0%"))
    assert value(reg, "kv_cache_usage_ratio", E0) == pytest.approx(0.40)
    assert value(reg, "cpu_swap_kv_cache_usage_ratio", E0) == pytest.approx(0.001)
    assert value(reg, "requests_swapped", E0) == 2
    assert value(reg, "requests_waiting", E0) == 3  # V0's Pending
    e1 = {"engine": "1", "model_name": "unknown"}
    assert value(reg, "kv_cache_usage_ratio", e1) == pytest.approx(0.045)
    cpu = {"engine": "2", "model_name": "unknown"}
    assert value(reg, "kv_cache_usage_ratio", cpu) == pytest.approx(0.010)  # V1 on CPU: CPU is the device
    assert value(reg, "cpu_swap_kv_cache_usage_ratio", cpu) is None


def test_aggregated_line_has_its_own_engine_label() -> None:
    metrics, reg = setup()
    metrics.apply(event(
        "(APIServer pid=2386147) INFO 03-30 06:46:52 [loggers.py:259] 2 Engines Aggregated: Avg prompt "
        "throughput: 24.2 tokens/s, Avg generation throughput: 11.3 tokens/s, Running: 1 reqs, Waiting: 0 "
        "reqs, GPU KV cache usage: 0.4%, Prefix cache hit rate: 0.0%"))
    assert value(reg, "requests_running", {"engine": "aggregated", "model_name": "unknown"}) == 1


def test_v0_prefix_line_sets_the_last_v0_engine() -> None:
    metrics, reg = setup()
    metrics.apply(event(V0_LINE))
    assert value(reg, "prefix_cache_hit_ratio", E0) is None
    metrics.apply(event("INFO 05-25 06:50:29 [metrics.py:502] Prefix cache hit rate: GPU: 12.50%, "
                        "CPU: 90.00%"))
    assert value(reg, "prefix_cache_hit_ratio", E0) == pytest.approx(0.125)


def test_first_line_is_held_until_the_gap_is_known() -> None:
    metrics, reg = setup()
    metrics.apply(v1(0, gen=100, prompt=10))
    assert value(reg, "generation_tokens_total", E0) == 0  # held: its window is not known yet
    metrics.apply(v1(10, gen=50, prompt=0))
    assert value(reg, "generation_tokens_total", E0) == 100 * 10 + 50 * 10
    assert value(reg, "prompt_tokens_total", E0) == 10 * 10
    assert value(reg, "stats_interval_seconds", E0) == 10
    metrics.apply(v1(21, gen=20))  # 1-second stamp jitter: the median smooths it
    assert value(reg, "generation_tokens_total", E0) == 1500 + 20 * 10.5
    metrics.apply(v1(30, gen=20))
    assert value(reg, "generation_tokens_total", E0) == 1710 + 20 * 10


def test_implausible_first_gap_credits_the_default_interval() -> None:
    metrics, reg = setup()
    feed(metrics, v1(0, gen=100), v1(100, gen=0))
    assert value(reg, "generation_tokens_total", E0) == 100 * 10
    assert value(reg, "stats_interval_seconds", E0) is None  # still unknown


def test_idle_gap_is_one_interval_and_not_a_spacing_sample() -> None:
    metrics, reg = setup()
    feed(metrics, v1(0, gen=10), v1(2, gen=10), v1(4, gen=10), v1(6, gen=0, prompt=0, running=0))
    assert value(reg, "generation_tokens_total", E0) == 60
    metrics.apply(v1(306, gen=10))  # 300 s of hidden all-zero windows, then one 2 s window
    assert value(reg, "generation_tokens_total", E0) == 80
    assert value(reg, "stats_interval_seconds", E0) == 2
    metrics.apply(v1(308, gen=10))
    assert value(reg, "generation_tokens_total", E0) == 100


def test_stats_interval_given_credits_at_once() -> None:
    metrics, reg = setup(stats_interval=5.0)
    metrics.apply(v1(0, gen=100))
    assert value(reg, "generation_tokens_total", E0) == 500
    metrics.apply(v1(60, gen=100))  # the gap does not matter
    assert value(reg, "generation_tokens_total", E0) == 1000
    assert value(reg, "stats_interval_seconds", E0) == 5


def test_lines_without_time_use_the_default_interval() -> None:
    metrics, reg = setup()
    feed(metrics, v1(None, gen=100), v1(None, gen=100))
    assert value(reg, "generation_tokens_total", E0) == 2000


def test_spec_decode_v1_counts_are_summed() -> None:
    metrics, reg = setup()
    line = ("(APIServer pid=92107) INFO 05-08 16:21:55 [metrics.py:101] SpecDecoding metrics: Mean "
            "acceptance length: 2.20, Accepted throughput: 15.60 tokens/s, Drafted throughput: 38.99 "
            "tokens/s, Accepted: 78 tokens, Drafted: 195 tokens, Per-position acceptance rate: 0.615, "
            "0.415, 0.169, Avg Draft acceptance rate: 40.0%")
    feed(metrics, event(line), event(line))
    assert value(reg, "spec_decode_accepted_tokens_total", E0) == 156
    assert value(reg, "spec_decode_drafted_tokens_total", E0) == 390
    assert value(reg, "spec_decode_mean_acceptance_length", E0) == 2.2
    assert value(reg, "spec_decode_acceptance_ratio", E0) == pytest.approx(0.40)
    # Acceptance by draft position, as vLLM's spec-decoding dashboard draws it (position 0 first).
    assert [value(reg, "spec_decode_position_acceptance_ratio", {**E0, "position": str(i)})
            for i in range(4)] == [0.615, 0.415, 0.169, None]


def test_spec_decode_positions_are_bounded() -> None:
    """A line with more draft positions than the label allows: the first ones are series, the rest
    counted as label overflow, not lost silently."""
    metrics, reg = setup()
    rates = ", ".join(["0.5"] * 40)
    feed(metrics, event("(APIServer pid=1) INFO 05-08 16:21:55 [metrics.py:101] SpecDecoding metrics: "
                        f"Mean acceptance length: 2.20, Accepted: 78 tokens, Drafted: 195 tokens, "
                        f"Per-position acceptance rate: {rates}, Avg Draft acceptance rate: 40.0%"))
    positions = {s.labels["position"] for m in reg.collect() for s in m.samples
                 if s.name == "vllm_logwatch_spec_decode_position_acceptance_ratio"}
    assert positions == {str(i) for i in range(32)}
    assert value(reg, "label_overflow_total", {"label": "position"}) == 8


def test_spec_decode_v0_counts_are_cumulative_and_survive_a_restart() -> None:
    metrics, reg = setup()

    def v0(accepted: int, drafted: int) -> Event:
        return event(f"INFO 02-06 03:05:53 metrics.py:475] Speculative metrics: Draft acceptance rate: "
                     f"0.200, System efficiency: 0.167, Number of speculative tokens: 5, Number of "
                     f"accepted tokens: {accepted}, Number of draft tokens: {drafted}, Number of emitted "
                     f"tokens: 1.")

    feed(metrics, v0(1, 5), v0(3, 15))
    assert value(reg, "spec_decode_accepted_tokens_total", E0) == 3
    assert value(reg, "spec_decode_drafted_tokens_total", E0) == 15
    assert value(reg, "spec_decode_acceptance_ratio", E0) == pytest.approx(0.2)
    metrics.apply(v0(2, 10))  # fewer than before: vLLM restarted, its count started over
    assert value(reg, "spec_decode_accepted_tokens_total", E0) == 5
    metrics.new_launch()
    metrics.apply(v0(4, 20))
    assert value(reg, "spec_decode_accepted_tokens_total", E0) == 9


KV_HDR = "(APIServer pid=1) INFO 11-29 19:26:05 [metrics.py:108] "


def kv_line(ok: int, failed: int = 0, expired: int = 0, avg_ms: float = 3.214, mb: float = 18.5,
            cache: str = "KV") -> Event:
    zero = ok == 0
    return event(f"{KV_HDR}{cache} Transfer metrics: Num successful transfers={ok}, Avg xfer time (ms)="
                 f"{0 if zero else avg_ms}, P90 xfer time (ms)={0 if zero else 5.87}, Avg post time (ms)="
                 f"{0 if zero else 0.412}, P90 post time (ms)={0 if zero else 0.9}, Avg MB per transfer="
                 f"{0 if zero else mb}, Throughput (MB/s)={0 if zero else 5756.3}, Avg number of descriptors="
                 f"{0 if zero else 320.0}, Num failed transfers={failed}, Num KV expired reqs={expired}")


def test_kv_transfer_counters_sum_and_timings_are_of_the_last_busy_interval() -> None:
    metrics, reg = setup()
    kv = {**E0, "cache": "kv"}
    feed(metrics, v1(0.0), kv_line(42, expired=1), v1(10.0), kv_line(8, failed=1, avg_ms=2.0, mb=10.0))
    assert value(reg, "transfers_total", {**kv, "result": "succeeded"}) == 50
    assert value(reg, "transfers_total", {**kv, "result": "failed"}) == 1
    assert value(reg, "transfers_total", {**kv, "result": "failed_recv"}) is None  # NIXL does not report it
    assert value(reg, "transfer_expired_requests_total", kv) == 1
    assert value(reg, "transfer_bytes_total", kv) == pytest.approx((42 * 18.5 + 8 * 10.0) * 2**20)
    assert value(reg, "transfer_time_seconds", {**kv, "stat": "avg"}) == pytest.approx(0.002)
    assert value(reg, "transfer_time_seconds", {**kv, "stat": "p90"}) == pytest.approx(0.00587)
    assert value(reg, "transfer_post_time_seconds", {**kv, "stat": "avg"}) == pytest.approx(0.000412)
    assert value(reg, "transfer_throughput_bytes_per_second", kv) == pytest.approx(5756.3 * 2**20)
    # An interval of failures only prints zero timings: the gauges keep the last measured interval.
    feed(metrics, v1(20.0), kv_line(0, failed=3))
    assert value(reg, "transfers_total", {**kv, "result": "failed"}) == 4
    assert value(reg, "transfer_time_seconds", {**kv, "stat": "avg"}) == pytest.approx(0.002)
    status = metrics.status()["engines"]["0"]["transfers"]["kv"]
    assert status["transfers"] == {"failed": 4, "succeeded": 50} and status["expired_requests"] == 1
    assert status["last"]["failed_transfers"] == 3
    # A new launch drops the gauges and keeps the counters.
    metrics.new_launch()
    assert value(reg, "transfer_time_seconds", {**kv, "stat": "avg"}) is None
    assert value(reg, "transfers_total", {**kv, "result": "succeeded"}) == 50


def test_ec_transfer_lines_and_unreadable_ones() -> None:
    metrics, reg = setup()
    feed(metrics, v1(0.0), kv_line(2, cache="EC"), event(f"{KV_HDR}KV Transfer metrics: garbage"))
    assert value(reg, "transfers_total", {**E0, "cache": "ec", "result": "succeeded"}) == 2
    assert value(reg, "transfers_total", {**E0, "cache": "kv", "result": "succeeded"}) is None
    assert value(reg, "parse_errors_total", {"what": "transfer"}) == 1


STARTUP = [
    "(APIServer pid=29214) INFO 11-29 19:23:35 [api_utils.py:347]  \u2584\u2584 \u2584\u2588 \u2588     "
    "\u2588     \u2588 \u2580\u2584\u2580 \u2588  version 0.32.0",
    "(APIServer pid=29214) INFO 11-29 19:23:35 [utils.py:299] non-default args: {'model_tag': 'm', "
    "'model': '/models/tiny-llama', 'served_model_name': ['tiny'], 'port': 18000}",
    "(EngineCore pid=29364) INFO 11-29 19:23:49 [kv_cache_utils.py:2327] CPU KV cache size: 524,288 tokens, "
    "Maximum concurrency for 1,024 tokens per request: 512.00x",
]


def test_server_info_merges_start_up_facts() -> None:
    metrics, reg = setup()
    feed(metrics, *(event(line) for line in STARTUP), v1())
    assert value(reg, "server_info", {"version": "0.32.0", "model_name": "tiny",
                                      "model": "/models/tiny-llama"}) == 1
    assert value(reg, "kv_cache_capacity_tokens", {"model_name": "tiny"}) == 524288
    assert value(reg, "max_concurrency", {"model_name": "tiny", "tokens_per_request": "1024"}) == 512
    assert value(reg, "requests_running", {"engine": "0", "model_name": "tiny"}) == 4
    assert value(reg, "launches_total") == 1


def test_new_launch_resets_gauges_and_keeps_counters() -> None:
    metrics, reg = setup()
    feed(metrics, *(event(line) for line in STARTUP), v1(0, gen=10), v1(10, gen=10))
    assert value(reg, "generation_tokens_total", {"engine": "0", "model_name": "tiny"}) == 200
    metrics.new_launch("serve_2.log")
    assert value(reg, "launches_total") == 2
    assert value(reg, "requests_running", {"engine": "0", "model_name": "tiny"}) is None
    info = {"version": "0.32.0", "model_name": "tiny", "model": "/models/tiny-llama"}
    assert value(reg, "server_info", info) is None
    assert value(reg, "generation_tokens_total", {"engine": "0", "model_name": "tiny"}) == 200
    metrics.apply(event(STARTUP[0]))  # the new file's own banner: the same launch, counted once
    assert value(reg, "launches_total") == 2
    metrics.apply(v1(500, gen=10))  # first line of the new launch: held again, not a 490 s window
    assert value(reg, "generation_tokens_total", {"engine": "0", "model_name": "tiny"}) == 200
    metrics.apply(event(STARTUP[0]))  # a banner after stats lines: vLLM restarted inside the file
    assert value(reg, "launches_total") == 3
    # the held first line of the ended launch is credited with the default interval, not lost
    assert value(reg, "generation_tokens_total", {"engine": "0", "model_name": "tiny"}) == 300


def test_stall_needs_running_requests_and_silence() -> None:
    clock = FakeClock()
    metrics, reg = setup(clock=clock)
    for at in (0, 2, 4):
        clock.now = 1_000_000.0 + at
        metrics.apply(v1(at, running=3))
    clock.now += 6.0
    assert value(reg, "engine_stalled", E0) == 0
    assert metrics.status()["engines"]["0"]["state"] == "ok"
    clock.now += 0.5  # 6.5 s > 3 x 2 s
    assert value(reg, "engine_stalled", E0) == 1
    assert metrics.status()["engines"]["0"]["state"] == "stalled"
    metrics.apply(v1(10, gen=0, prompt=0, running=0))
    assert metrics.status()["engines"]["0"]["state"] == "idle"
    clock.now += 3600  # idle silence is not a stall
    assert value(reg, "engine_stalled", E0) == 0
    assert metrics.status()["engines"]["0"]["state"] == "idle"


def test_stats_missing_when_vllm_disabled_stats_logging() -> None:
    metrics, reg = setup()
    metrics.apply(event("(APIServer pid=1) WARNING 03-30 06:46:52 [async_llm.py:173] AsyncLLM created with "
                        "api_server_count more than 1; disabling stats logging to avoid incomplete stats."))
    assert value(reg, "stats_missing", {"reason": "stats_logging_disabled"}) == 1
    assert value(reg, "stats_missing", {"reason": "requests_without_stats"}) == 0
    assert value(reg, "log_messages_total", {"level": "WARNING"}) == 1
    assert metrics.status()["stats_missing"] == "stats_logging_disabled"
    metrics.apply(v1())
    assert value(reg, "stats_missing", {"reason": "stats_logging_disabled"}) == 0


def test_stats_missing_when_requests_flow_without_stats() -> None:
    clock = FakeClock()
    metrics, reg = setup(clock=clock)
    feed(metrics,
         event("(APIServer pid=29214) INFO 11-29 19:23:52 [entry.py:140] Starting vLLM server on http://127.0.0.1:18000"),
         event(ACCESS.format("GET", "/health", 200)))
    assert metrics.status()["server"]["server_listening"] is True
    clock.now += 3600  # an idle server prints no stats line: not missing
    assert value(reg, "stats_missing", {"reason": "requests_without_stats"}) == 0
    metrics.apply(event(ACCESS.format("POST", "/v1/completions", 200)))
    clock.now += 30
    assert value(reg, "stats_missing", {"reason": "requests_without_stats"}) == 0
    clock.now += 1
    assert value(reg, "stats_missing", {"reason": "requests_without_stats"}) == 1
    metrics.apply(v1())
    assert value(reg, "stats_missing", {"reason": "requests_without_stats"}) == 0


def test_http_requests_bounded_paths_and_methods() -> None:
    metrics, reg = setup()
    for method, path, status in (("POST", "/v1/completions", 200), ("GET", "/health", 200),
                                 ("GET", "/v1/files/77", 404), ("BREW", "/v1/completions", 405)):
        metrics.apply(event(ACCESS.format(method, path, status)))
    def http(method: str, path: str, status: str) -> float | None:
        return value(reg, "http_requests_total", {"method": method, "path": path, "status": status})

    assert http("POST", "/v1/completions", "200") == 1
    assert http("GET", "/health", "200") == 1
    assert http("GET", "{other}", "404") == 1
    assert http("other", "/v1/completions", "405") == 1
    assert value(reg, "label_overflow_total", {"label": "path"}) == 0  # a path label is one of vLLM's routes


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_ten_thousand_engines_stay_bounded() -> None:
    metrics, reg = setup()
    for engine in range(10_000):
        metrics.apply(v1(engine=engine))
    running = [s for f in reg.collect() if f.name == "vllm_logwatch_requests_running" for s in f.samples]
    assert len(running) == 65
    assert {s.labels["engine"] for s in running} >= {"0", "63", "other"}
    assert "64" not in {s.labels["engine"] for s in running}
    assert value(reg, "label_overflow_total", {"label": "engine"}) == 10_000 - 64
    assert value(reg, "stats_lines_total", {"engine": "other", "model_name": "unknown"}) == 10_000 - 64


def test_const_labels_go_on_every_series() -> None:
    metrics, reg = setup(const_labels={"host": "gpu1", "team": "a"})
    feed(metrics, event(STARTUP[0]), v1())
    assert value(reg, "requests_running", {**E0, "host": "gpu1", "team": "a"}) == 4
    assert value(reg, "server_info", {"version": "0.32.0", "model_name": "", "model": "", "host": "gpu1",
                                      "team": "a"}) == 1
    assert value(reg, "log_lines_total", {"host": "gpu1", "team": "a"}) == 0
    for family in reg.collect():
        for sample in family.samples:
            assert sample.labels.get("host") == "gpu1", sample


@pytest.mark.parametrize("bad", ["engine", "model_name", "9lives", "__x", "a-b"])
def test_const_labels_refuse_bad_names(bad: str) -> None:
    with pytest.raises(UsageError):
        ExporterMetrics(const_labels={bad: "x"})


def test_messages_problems_parse_errors() -> None:
    metrics, reg = setup()
    feed(metrics,
         event("(APIServer pid=1) ERROR 11-29 19:26:31 [async_llm.py:906] EngineCore encountered an issue."),
         event("(APIServer pid=1) WARNING 11-29 19:26:31 [x.py:1] something odd"),
         event("(APIServer pid=1) INFO 11-29 19:26:31 [loggers.py:335] Engine 000: Avg prompt throughput: "
               "lots tokens/s, Running: 1 reqs"))
    assert value(reg, "log_messages_total", {"level": "ERROR"}) == 1
    assert value(reg, "log_messages_total", {"level": "WARNING"}) == 1
    assert value(reg, "log_messages_total", {"level": "CRITICAL"}) == 0
    assert value(reg, "problems_total", {"problem": "engine_dead"}) == 1
    assert value(reg, "parse_errors_total", {"what": "stats"}) == 1


def test_follower_and_child_counters_stay_monotonic() -> None:
    metrics, reg = setup()
    assert value(reg, "log_lines_total") == 0
    assert value(reg, "child_up") is None  # watch mode: no child metrics at all
    metrics.set_follower_stats(lines=10, bytes=900, rotations=1, truncations=0, read_errors=0, lines_cut=2)
    metrics.set_follower_stats(lines=4, bytes=300, rotations=1, truncations=0, read_errors=0, lines_cut=2)
    assert value(reg, "log_lines_total") == 14  # a restarted tailer counts from 0 again
    assert value(reg, "log_bytes_total") == 1200
    assert value(reg, "lines_cut_total") == 2
    metrics.set_child(up=True, pid=4242, start_time=1.7e9, restarts=0, last_exit_code=None,
                      bytes_written=100, write_errors=0, bytes_dropped=0)
    assert value(reg, "child_up") == 1
    assert value(reg, "child_pid") == 4242
    assert value(reg, "child_last_exit_code") is None
    metrics.set_child(up=False, pid=None, start_time=None, restarts=1, last_exit_code=137,
                      bytes_written=150, write_errors=1, bytes_dropped=20)
    assert value(reg, "child_up") == 0
    assert value(reg, "child_last_exit_code") == 137
    assert value(reg, "child_restarts_total") == 1
    assert value(reg, "log_file_bytes_dropped_total") == 20


def test_every_name_comes_from_the_table_and_no_timestamps() -> None:
    metrics, reg = setup()
    feed(metrics, *(event(line) for line in STARTUP), v1(), event(ACCESS.format("GET", "/health", 200)))
    metrics.set_child(up=True, pid=1, start_time=1.0, restarts=0, last_exit_code=0, bytes_written=0,
                      write_errors=0, bytes_dropped=0)
    table = {m.name: m for m in METRICS}
    for family in reg.collect():
        spec = table[family.name]
        assert family.type == spec.type
        for sample in family.samples:
            assert sample.timestamp is None
            assert set(sample.labels) == set(spec.labels)
    with pytest.raises(ValueError, match="Duplicated"):
        metrics.register(reg)


def test_status_is_json_with_log_units() -> None:
    clock = FakeClock()
    metrics, _ = setup(clock=clock)
    feed(metrics, v1(0, more=", MM cache hit rate: nan%"), v1(2))
    clock.now += 1.5
    status = json.loads(json.dumps(metrics.status(), allow_nan=False))
    engine = status["engines"]["0"]
    assert engine["last"]["gpu_kv_cache_usage_pct"] == 4.5  # percent stays percent
    assert engine["age_seconds"] == 1.5
    assert engine["interval_seconds"] == 2
    assert engine["state"] == "ok"
    assert status["counters"]["parse_errors"] == {"stats": 0, "spec": 0, "prefix": 0, "transfer": 0}


def test_scrape_while_feeding_from_another_thread() -> None:
    metrics, reg = setup()
    done = threading.Event()

    def worker() -> None:
        for i in range(2000):
            metrics.apply(v1(i * 2, engine=i % 8))
        done.set()

    thread = threading.Thread(target=worker)
    thread.start()
    while not done.is_set():
        generate_latest(reg)
    thread.join(timeout=30)
    assert value(reg, "stats_lines_total", {"engine": "7", "model_name": "unknown"}) == 250


def _prom_value(text: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", text, re.MULTILINE)
    assert m is not None, name
    return float(m.group(1))


def test_real_log_token_counters_match_vllm_within_2_percent() -> None:
    """A real vLLM 0.32 CPU run (2 s stats interval) against its own final /metrics."""
    log = next(REAL.glob("serve_*.log"))
    prom = (REAL / "metrics_final.prom").read_text()
    metrics, reg = setup()
    lines = log.read_text(encoding="utf-8").splitlines()
    for e in iter_events(lines, str(log), YearClock(2026, UTC)):
        metrics.apply(e)
    labels = {"engine": "0", "model_name": "tiny-llama"}
    generated = value(reg, "generation_tokens_total", labels)
    prompt = value(reg, "prompt_tokens_total", labels)
    assert generated is not None and prompt is not None
    want_generated = _prom_value(prom, "vllm:generation_tokens_total")
    # vLLM >= 0.16 logs only the prompt tokens it computed: cache hits are not in the throughput.
    want_prompt = _prom_value(prom, "vllm:prompt_tokens_total") - _prom_value(
        prom, "vllm:prefix_cache_hits_total")
    assert generated == pytest.approx(want_generated, rel=0.02)
    assert prompt == pytest.approx(want_prompt, rel=0.02)
    assert value(reg, "stats_interval_seconds", labels) == 2


EXPECTED_EXPOSITION = """\
# HELP vllm_logwatch_prompt_throughput_tokens_per_second Avg prompt throughput of the last stats line \
(vLLM >= 0.16: prefill tokens computed, cache hits excluded).
# TYPE vllm_logwatch_prompt_throughput_tokens_per_second gauge
vllm_logwatch_prompt_throughput_tokens_per_second{engine="0",host="h",model_name="unknown"} 10.0
# HELP vllm_logwatch_generation_throughput_tokens_per_second Avg generation throughput of the last stats line.
# TYPE vllm_logwatch_generation_throughput_tokens_per_second gauge
vllm_logwatch_generation_throughput_tokens_per_second{engine="0",host="h",model_name="unknown"} 100.0
# HELP vllm_logwatch_requests_running Requests running at the last stats line.
# TYPE vllm_logwatch_requests_running gauge
vllm_logwatch_requests_running{engine="0",host="h",model_name="unknown"} 4.0
# HELP vllm_logwatch_requests_waiting Requests waiting at the last stats line (V0: Pending).
# TYPE vllm_logwatch_requests_waiting gauge
vllm_logwatch_requests_waiting{engine="0",host="h",model_name="unknown"} 0.0
# HELP vllm_logwatch_kv_cache_usage_ratio KV cache usage of the serving device (GPU, XPU, ... or CPU on the \
CPU backend), 0-1.
# TYPE vllm_logwatch_kv_cache_usage_ratio gauge
vllm_logwatch_kv_cache_usage_ratio{engine="0",host="h",model_name="unknown"} 0.045
# HELP vllm_logwatch_prefix_cache_hit_ratio Prefix cache hit rate, 0-1 (V1: window of the last ~1000 \
requests; V0: cumulative).
# TYPE vllm_logwatch_prefix_cache_hit_ratio gauge
vllm_logwatch_prefix_cache_hit_ratio{engine="0",host="h",model_name="unknown"} 0.613
# HELP vllm_logwatch_prompt_tokens_total Prompt tokens estimated as throughput x stats interval, \
or the step lines' context tokens when vLLM prints them (vLLM >= 0.16: computed prefill tokens only).
# TYPE vllm_logwatch_prompt_tokens_total counter
vllm_logwatch_prompt_tokens_total{engine="0",host="h",model_name="unknown"} 50.0
# HELP vllm_logwatch_generation_tokens_total Generated tokens estimated as throughput x stats interval, \
or counted from the step lines when vLLM prints them.
# TYPE vllm_logwatch_generation_tokens_total counter
vllm_logwatch_generation_tokens_total{engine="0",host="h",model_name="unknown"} 500.0
# HELP vllm_logwatch_stats_lines_total Stats lines read for the engine.
# TYPE vllm_logwatch_stats_lines_total counter
vllm_logwatch_stats_lines_total{engine="0",host="h",model_name="unknown"} 1.0
# HELP vllm_logwatch_busy_seconds_total Seconds of stats windows in which tokens were computed (prompt \
or generation throughput above 0).
# TYPE vllm_logwatch_busy_seconds_total counter
vllm_logwatch_busy_seconds_total{engine="0",host="h",model_name="unknown"} 5.0
# HELP vllm_logwatch_last_stats_timestamp_seconds Unix time of the engine's last stats line.
# TYPE vllm_logwatch_last_stats_timestamp_seconds gauge
vllm_logwatch_last_stats_timestamp_seconds{engine="0",host="h",model_name="unknown"} 1.795980365e+09
# HELP vllm_logwatch_stats_interval_seconds The interval its tokens are counted with: the configured one \
(`--stats-interval`; in run mode `VLLM_LOG_STATS_INTERVAL` when set), else the typical spacing of the \
engine's stats lines.
# TYPE vllm_logwatch_stats_interval_seconds gauge
vllm_logwatch_stats_interval_seconds{engine="0",host="h",model_name="unknown"} 5.0
# HELP vllm_logwatch_engine_stalled 1 when requests were running and no stats line came for 3 intervals \
(idle silence is not a stall).
# TYPE vllm_logwatch_engine_stalled gauge
vllm_logwatch_engine_stalled{engine="0",host="h",model_name="unknown"} 0.0
# HELP vllm_logwatch_stats_missing 1 when the server runs but prints no stats line; reason: \
stats_logging_disabled or requests_without_stats.
# TYPE vllm_logwatch_stats_missing gauge
vllm_logwatch_stats_missing{host="h",reason="stats_logging_disabled"} 0.0
vllm_logwatch_stats_missing{host="h",reason="requests_without_stats"} 0.0
# HELP vllm_logwatch_rejected_requests_total Requests refused because the engine was not healthy \
(`Engine S - rejecting request R.`); status: diagnosing, unhealthy, dead, other.
# TYPE vllm_logwatch_rejected_requests_total counter
vllm_logwatch_rejected_requests_total{host="h",status="diagnosing"} 0.0
vllm_logwatch_rejected_requests_total{host="h",status="unhealthy"} 0.0
vllm_logwatch_rejected_requests_total{host="h",status="dead"} 0.0
vllm_logwatch_rejected_requests_total{host="h",status="other"} 0.0
# HELP vllm_logwatch_launches_total vLLM launches seen (new launch files or start-up banners).
# TYPE vllm_logwatch_launches_total counter
vllm_logwatch_launches_total{host="h"} 0.0
# HELP vllm_logwatch_log_messages_total WARNING, ERROR and CRITICAL records (a traceback counts once).
# TYPE vllm_logwatch_log_messages_total counter
vllm_logwatch_log_messages_total{host="h",level="WARNING"} 0.0
vllm_logwatch_log_messages_total{host="h",level="ERROR"} 0.0
vllm_logwatch_log_messages_total{host="h",level="CRITICAL"} 0.0
# HELP vllm_logwatch_problems_total Known failure lines: engine_dead, out_of_memory, ...
# TYPE vllm_logwatch_problems_total counter
vllm_logwatch_problems_total{host="h",problem="engine_fatal"} 0.0
vllm_logwatch_problems_total{host="h",problem="engine_start_failed"} 0.0
vllm_logwatch_problems_total{host="h",problem="engine_dead"} 0.0
vllm_logwatch_problems_total{host="h",problem="process_died"} 0.0
vllm_logwatch_problems_total{host="h",problem="out_of_memory"} 0.0
vllm_logwatch_problems_total{host="h",problem="no_kv_memory"} 0.0
vllm_logwatch_problems_total{host="h",problem="kv_cache_too_small"} 0.0
vllm_logwatch_problems_total{host="h",problem="preemption"} 0.0
vllm_logwatch_problems_total{host="h",problem="stats_logging_disabled"} 0.0
vllm_logwatch_problems_total{host="h",problem="dp_server_unhealthy"} 0.0
vllm_logwatch_problems_total{host="h",problem="dp_server_exited"} 0.0
vllm_logwatch_problems_total{host="h",problem="ft_recovery_timeout"} 0.0
vllm_logwatch_problems_total{host="h",problem="kv_tier_poll_failing"} 0.0
vllm_logwatch_problems_total{host="h",problem="cuda_checkpoint_failed"} 0.0
vllm_logwatch_problems_total{host="h",problem="engine_dead_at_shutdown"} 0.0
# HELP vllm_logwatch_log_lines_total Log lines read.
# TYPE vllm_logwatch_log_lines_total counter
vllm_logwatch_log_lines_total{host="h"} 0.0
# HELP vllm_logwatch_log_bytes_total Log bytes read.
# TYPE vllm_logwatch_log_bytes_total counter
vllm_logwatch_log_bytes_total{host="h"} 0.0
# HELP vllm_logwatch_parse_errors_total Unreadable lines by kind (ours too); transfer_key: one key of a \
line. A stats line over 1e9 tokens/s and a step line whose time is not finite or whose tokens pass 1e9 a \
second over it are unreadable. duplicate: a stats line written twice (the same stamp, process, engine \
and numbers), its copy left out.
# TYPE vllm_logwatch_parse_errors_total counter
vllm_logwatch_parse_errors_total{host="h",what="stats"} 0.0
vllm_logwatch_parse_errors_total{host="h",what="spec"} 0.0
vllm_logwatch_parse_errors_total{host="h",what="prefix"} 0.0
vllm_logwatch_parse_errors_total{host="h",what="transfer"} 0.0
# HELP vllm_logwatch_unknown_fields_total Stats fields the parser did not know (kept, not lost).
# TYPE vllm_logwatch_unknown_fields_total counter
vllm_logwatch_unknown_fields_total{host="h"} 0.0
# HELP vllm_logwatch_log_rotations_total Log rotations (rename + create) followed.
# TYPE vllm_logwatch_log_rotations_total counter
vllm_logwatch_log_rotations_total{host="h"} 0.0
# HELP vllm_logwatch_log_truncations_total Log truncations (copytruncate) followed.
# TYPE vllm_logwatch_log_truncations_total counter
vllm_logwatch_log_truncations_total{host="h"} 0.0
# HELP vllm_logwatch_read_errors_total Errors reading the log files.
# TYPE vllm_logwatch_read_errors_total counter
vllm_logwatch_read_errors_total{host="h"} 0.0
# HELP vllm_logwatch_lines_cut_total Lines longer than the cap, cut.
# TYPE vllm_logwatch_lines_cut_total counter
vllm_logwatch_lines_cut_total{host="h"} 0.0
# HELP vllm_logwatch_state_errors_total Errors reading or writing the state file (--state-file): \
unreadable at start, or a save that failed.
# TYPE vllm_logwatch_state_errors_total counter
vllm_logwatch_state_errors_total{host="h"} 0.0
# HELP vllm_logwatch_label_overflow_total Events whose label value was folded into 'other' (bounded labels).
# TYPE vllm_logwatch_label_overflow_total counter
vllm_logwatch_label_overflow_total{host="h",label="engine"} 0.0
vllm_logwatch_label_overflow_total{host="h",label="path"} 0.0
"""


def test_exposition_text_of_a_small_state() -> None:
    metrics, reg = setup(stats_interval=5.0, const_labels={"host": "h"}, clock=FakeClock(T0.timestamp()))
    metrics.apply(v1(0))
    assert generate_latest(reg).decode() == EXPECTED_EXPOSITION


def test_gap_after_an_all_zero_line_is_not_an_interval() -> None:
    """vLLM prints one all-zero line, then hides zero windows: the gap after a zero line may span
    hidden windows. A busy line after it is credited with one interval (learned from the next gap),
    not with the silence (a start-up zero line 12 s before the load made the counter 5x too high)."""
    from vllm_logwatch.exporting.engine_state import EngineState

    state = EngineState()

    def line(at: float, gen: float) -> EngineStats:
        e = parse_line(
            "(APIServer pid=1) INFO 11-29 19:26:05 [loggers.py:335] Engine 000: Avg prompt throughput: "
            f"0.0 tokens/s, Avg generation throughput: {gen} tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
            "CPU KV cache usage: 1.0%")
        assert isinstance(e, EngineStats)
        return replace(e, time=T0 + timedelta(seconds=at))

    state.apply_stats(line(0.0, 0.0), 0.0)  # start-up: one zero line, then hidden zero windows
    for i in range(5):  # the load: a line every 2 s from t=12 s
        state.apply_stats(line(12.0 + 2 * i, 100.0), 0.0)
    state.apply_stats(line(22.0, 0.0), 0.0)  # load over: one zero line
    assert state.tokens.generation_tokens.value == pytest.approx(5 * 100.0 * 2.0)


def _launch(model: str) -> list[Event]:
    head = "(APIServer pid=1) INFO 12-02 10:00:00 "
    return [event(head + "[api_utils.py:347]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0"),
            event(head + f"[api_utils.py:286] non-default args: {{'model_tag': '/m/{model}', 'model': "
                         f"'/m/{model}', 'served_model_name': ['{model}'], 'max_num_seqs': 16}}")]


def test_each_model_counts_its_own_lines_and_resumes_from_its_own_total() -> None:
    """Launches of model-a, model-b, model-a: model-a's counters carried model-b's tokens (612000 for 12000)
    and model-b's started at model-a's total; each (engine, model_name) series counts its own lines."""
    metrics, reg = setup(stats_interval=10.0)
    for model, gen in (("model-a", 100.0), ("model-b", 10000.0), ("model-a", 100.0)):
        feed(metrics, *_launch(model), *(v1(i * 10, gen=gen, prompt=0.0) for i in range(6)))
        assert metrics.status()["model_name"] == model
    for model, tokens, lines in (("model-a", 12000, 12), ("model-b", 600000, 6)):
        labels = {"engine": "0", "model_name": model}
        assert value(reg, "generation_tokens_total", labels) == tokens
        assert value(reg, "stats_lines_total", labels) == lines
        assert value(reg, "busy_seconds_total", labels) == lines * 10
    # model-b's gauges ended with its launch
    assert value(reg, "kv_cache_usage_ratio", {"engine": "0", "model_name": "model-b"}) is None


def test_requests_count_under_their_own_model_named_before_any_stats_line() -> None:
    """100 requests under model-a, a launch of model-b, one more request: model-b had 101; and without a
    stats line the requests were labelled model_name="unknown" though the banner and args named the model."""
    metrics, reg = setup()
    feed(metrics, *_launch("model-a"))
    for i in range(101):
        if i == 100:
            feed(metrics, *_launch("model-b"))
        feed(metrics, event(f"INFO 12-02 10:00:01 [logger.py:39] Received request r{i}: params: x, "
                            "lora_request: None."),
             event(f"INFO 12-02 10:00:02 [logger.py:39] Generated response r{i}: output: 'y', "
                   "finish_reason: stop"))
    for model, count in (("model-a", 100), ("model-b", 1)):
        stop = {"model_name": model, "finish_reason": "stop", "lora": ""}
        assert value(reg, "requests_total", stop) == count
        assert value(reg, "requests_untimed_total", {"model_name": model}) == count
    assert value(reg, "requests_untimed_total", {"model_name": "unknown"}) is None


def test_no_series_uses_a_label_prometheus_gives_its_targets() -> None:
    """`job` and `instance` are the scrape's: a series of ours labelled so would lose them to
    `exported_job` and break the dashboard's `$job` filter (and `--label job=...` would be refused)."""
    assert not [m.name for m in METRICS if {"job", "instance"} & set(m.labels)]


def test_two_servers_in_one_source_count_their_own_windows() -> None:
    """Two servers' lines interleaved in one source (pids 1 and 2, both engine 0, each a line every
    10 s, 5 s apart) were one engine: a 5 s window, half the tokens, and no sign of it."""
    metrics, reg = setup()
    for i in range(30):
        metrics.apply(v1(10 * i, gen=100, prompt=0, running=1))
        metrics.apply(event(v1_text(gen=1000, running=10).replace("pid=1)", "pid=2)"), 10 * i + 5))
    assert value(reg, "generation_tokens_total", E0) == (100 + 1000) * 10 * 30
    assert value(reg, "stats_interval_seconds", E0) == 10
    assert value(reg, "stats_processes", E0) == 2
    metrics.new_launch("next.log")  # a new launch: one server again
    metrics.apply(v1(400, gen=100, prompt=0, running=1))
    assert value(reg, "stats_processes", E0) is None


def test_a_restart_in_one_source_is_one_writer_at_a_time() -> None:
    """A server restarted without a banner (another pid; the old one wrote its last line) is no second
    server: no signal, and the new pid's windows are its own."""
    metrics, reg = setup()
    feed(metrics, v1(0, gen=100), v1(10, gen=100), v1(20, gen=100))
    restarted = v1_text(gen=100).replace("pid=1)", "pid=2)")
    feed(metrics, event(restarted, 100), event(restarted, 110))
    assert value(reg, "generation_tokens_total", E0) == 100 * 10 * 5
    assert value(reg, "stats_processes", E0) is None


def v1_text(*, gen: float = 100.0, prompt: float = 0.0, running: int = 4) -> str:
    return (f"(APIServer pid=1) INFO 11-29 19:26:05 [loggers.py:335] Engine 000: Avg prompt throughput: "
            f"{prompt:.1f} tokens/s, Avg generation throughput: {gen:.1f} tokens/s, Running: {running} reqs, "
            "Waiting: 0 reqs, GPU KV cache usage: 4.5%, Prefix cache hit rate: 61.3%")
