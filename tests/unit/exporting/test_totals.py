"""Running totals read without float noise (issue 25, point 14)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.exporting.totals import RunningTotal
from vllm_logwatch.parsing.line import parse_line


def test_sums_of_rate_times_window_read_as_the_whole_count() -> None:
    total = RunningTotal()
    for _ in range(300):
        total.add(29.8 * 2.1)  # a plain sum reads 18774.00000000005
    assert repr(total.value) == "18774.0"


def test_rounding_keeps_the_counter_monotonic_and_its_semantics() -> None:
    total = RunningTotal()
    seen = []
    for amount in (0.1, 0.2, 0.3, 5.0):
        total.add(amount)
        seen.append(total.value)
    assert seen == sorted(seen) and seen[-1] == 5.6
    total.observe_total(7)
    total.observe_total(2)  # the source started over: the old total stays
    assert total.value == 14.6


def test_metrics_show_token_counts_without_float_noise() -> None:
    metrics, registry = ExporterMetrics(stats_interval=2.1), CollectorRegistry()
    metrics.register(registry)
    for second in range(0, 3000, 10):
        metrics.apply(parse_line(
            f"INFO 11-29 19:{second // 600 % 60:02d}:{second // 10 % 60:02d} [loggers.py:335] Engine 000: "
            "Avg prompt throughput: 12.3 tokens/s, Avg generation throughput: 29.8 tokens/s, "
            "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 4.5%"))
    text = generate_latest(registry).decode()
    line = next(ln for ln in text.splitlines() if ln.startswith("vllm_logwatch_generation_tokens_total{"))
    assert line.endswith(" 18774.0"), line
    prompt = next(ln for ln in text.splitlines() if ln.startswith("vllm_logwatch_prompt_tokens_total{"))
    assert prompt.endswith(" 7749.0"), prompt
