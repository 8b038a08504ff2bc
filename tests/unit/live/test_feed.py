"""Run mode's feeder frames vLLM's output as watch frames a file: a line over the cap is cut, counted,
and the rest of it skipped, wherever the chunks fall; after output dropped for a slow parser, the
bytes up to the next newline are skipped too. Text inside a client's request line is never a line."""

from __future__ import annotations

from datetime import UTC

import pytest
from prometheus_client import CollectorRegistry

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.live.feed import _GAP, LineFeeder

H = "(APIServer pid=1) INFO 12-02 10:00:{s:02d} "
FORGED = ("(APIServer pid=9) INFO 12-02 10:00:30 [loggers.py:335] Engine 000: Avg prompt throughput: 0.0 "
          "tokens/s, Avg generation throughput: 77777.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
          "GPU KV cache usage: 1.0%, X: y")


def stats(s: int) -> bytes:
    return (H.format(s=s) + "[loggers.py:335] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation"
            " throughput: 100.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, "
            "Prefix cache hit rate: 0.0%\n").encode()


def sample(metrics: ExporterMetrics, name: str) -> float:
    registry = CollectorRegistry()
    metrics.register(registry)
    value = registry.get_sample_value(name, {"engine": "0", "model_name": "unknown"})
    return registry.get_sample_value(name) if value is None else value  # type: ignore[return-value]


def feed(*chunks: bytes, gap_after: int | None = None) -> ExporterMetrics:
    metrics = ExporterMetrics(clock=lambda: 1000.0)
    feeder = LineFeeder(metrics, UTC)
    feeder.relaunch("serve_20261202_100000.log")
    for i, chunk in enumerate(chunks):
        feeder.put(chunk)
        if i == gap_after:
            feeder.put_marker(_GAP)
    feeder.start()
    feeder.close(timeout=30)
    return metrics


@pytest.mark.parametrize("piece", [65536, 1 << 20, 3 << 20])
def test_the_rest_of_a_line_over_the_cap_is_never_read_as_a_line(piece: int) -> None:
    """A client's 2.5 MB stop list with a stats line inside it, in vLLM's `Received request` line."""
    received = (H.format(s=5) + "[logger.py:39] Received request chatcmpl-1: params: SamplingParams(n=1, "
                "stop=['" + "a" * 2_500_000 + FORGED + "'], max_tokens=16), lora_request: None.\n")
    data = stats(0) + received.encode() * 2 + stats(10)
    metrics = feed(*(data[i:i + piece] for i in range(0, len(data), piece)))
    assert sample(metrics, "vllm_logwatch_stats_lines_total") == 2
    assert sample(metrics, "vllm_logwatch_lines_cut_total") == 2
    assert sample(metrics, "vllm_logwatch_requests_running") == 2


def test_after_dropped_output_the_line_it_broke_is_skipped() -> None:
    """Output dropped mid-line (the parser fell behind): what follows up to a newline is that line's end."""
    metrics = feed(stats(0), b"Received request x: stop=['...", FORGED.encode() + b"'])\n" + stats(10),
                      gap_after=1)
    assert sample(metrics, "vllm_logwatch_stats_lines_total") == 2
    assert sample(metrics, "vllm_logwatch_requests_running") == 2


def test_a_stats_line_written_twice_counts_once() -> None:
    """Two logging handlers print every line twice: the copy is left out and counted."""
    metrics = feed(stats(0) * 2 + stats(10) * 2, stats(20) * 2)
    assert sample(metrics, "vllm_logwatch_stats_lines_total") == 3
    registry = CollectorRegistry()
    metrics.register(registry)
    assert registry.get_sample_value("vllm_logwatch_parse_errors_total", {"what": "duplicate"}) == 3
