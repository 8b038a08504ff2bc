"""Running totals read without float noise (issue 25, point 14)."""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, generate_latest

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.exporting.tokens import RunningTotal
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


def test_an_increment_that_would_overflow_is_refused() -> None:
    """Two increments of 1e308 made the total inf and its compensation -inf: NaN for good."""
    total = RunningTotal()
    assert total.add(1e308) and not total.add(1e308) and not total.add(math.inf)
    assert total.value == 1e308
    total.observe_total(1e308)
    total.restart()  # the source's 1e308 would overflow the base: refused, the total stays finite
    assert math.isfinite(total.value)


def _absurd(second: int) -> str:
    big = "9" * 307 + ".0"
    return (f"(APIServer pid=12) INFO 07-05 11:29:{second:02d} [loggers.py:259] Engine 000: Avg prompt "
            f"throughput: {big} tokens/s, Avg generation throughput: {big} tokens/s, Running: 1 reqs, "
            "Waiting: 0 reqs, GPU KV cache usage: 4.8%, Prefix cache hit rate: 0.0%")


def test_a_throughput_past_any_engines_is_unreadable_not_counted() -> None:
    """Stats lines at 9.99e306 tokens/s (and 2e9: no engine computes a billion tokens a second) count no
    tokens and are counted as unreadable; the lines around them count as before."""
    metrics, registry = ExporterMetrics(stats_interval=10.0), CollectorRegistry()
    metrics.register(registry)
    for second in range(0, 60, 10):
        metrics.apply(parse_line(_absurd(second)))
    metrics.apply(parse_line(_absurd(0).replace("9" * 307 + ".0", "2000000000.0")))
    metrics.apply(parse_line(_absurd(0).replace("9" * 307 + ".0", "3.0")))
    labels = {"engine": "0", "model_name": "unknown"}
    get = registry.get_sample_value
    assert get("vllm_logwatch_prompt_tokens_total", labels) == 30.0
    assert get("vllm_logwatch_generation_tokens_total", labels) == 30.0
    assert get("vllm_logwatch_parse_errors_total", {"what": "stats"}) == 7
    assert metrics.status()["engines"]["0"]["generation_tokens"] == 30.0


def test_absurd_step_lines_are_unreadable_not_counted() -> None:
    """A 400-digit elapsed time made step_duration_seconds_sum +Inf for good, and a step line's 15-digit
    context tokens (1e15 tokens in 7 ms) went into the prompt tokens."""
    metrics, registry = ExporterMetrics(), CollectorRegistry()
    metrics.register(registry)
    head = "(APIServer pid=1) INFO 12-02 10:00:00 [loggers.py:1] Engine 000: Iteration(1): "
    for ctx, ms in ((1, "12.5"), (1, "9" * 400), (999999999999999, "7.5")):
        metrics.apply(parse_line(f"{head}1 context requests, {ctx} context tokens, 0 generation requests, "
                                 f"0 generation tokens, iteration elapsed time: {ms} ms"))
    get = registry.get_sample_value
    labels = {"engine": "0", "model_name": "unknown"}
    assert get("vllm_logwatch_prompt_tokens_total", labels) == 1.0
    steps = {**labels, "phase": "prefill", "batch": "0"}
    assert get("vllm_logwatch_step_duration_seconds_sum", steps) == 0.0125
    assert get("vllm_logwatch_parse_errors_total", {"what": "iteration"}) == 2
