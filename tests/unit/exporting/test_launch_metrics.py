"""MFU gauges, and launch arguments that never reach a scrape or the status API."""

from __future__ import annotations

import json

from prometheus_client import CollectorRegistry, generate_latest

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.parsing.line import parse_line

HDR = "(APIServer pid=1) INFO 12-01 17:46:51 "
STATS = (HDR + "[loggers.py:335] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: "
         "2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, CPU KV cache usage: 0.1%")
E0 = {"engine": "0", "model_name": "unknown"}


def setup() -> tuple[ExporterMetrics, CollectorRegistry]:
    metrics = ExporterMetrics()
    registry = CollectorRegistry()
    metrics.register(registry)
    return metrics, registry


def apply(metrics: ExporterMetrics, *lines: str) -> None:
    for line in lines:
        event = parse_line(line)
        assert event is not None, line
        metrics.apply(event)


def test_mfu_gauges_in_base_units_and_reset_by_a_launch() -> None:
    metrics, reg = setup()
    apply(metrics, STATS, HDR + "[perf.py:1725] Engine 000: MFU: 12.5 TF/s/device 300.0 GB/s/device")
    assert reg.get_sample_value("vllm_logwatch_mfu_flops_per_second", E0) == 12.5e12
    assert reg.get_sample_value("vllm_logwatch_mfu_memory_bytes_per_second", E0) == 300e9
    metrics.new_launch()
    assert reg.get_sample_value("vllm_logwatch_mfu_flops_per_second", E0) is None


def test_arguments_stay_out_of_metrics_and_status() -> None:
    metrics, reg = setup()
    secretish = "planted-chat-template-text"
    apply(metrics, HDR + "[api_utils.py:286] non-default args: {'model': 'm/x', 'max_num_seqs': 30, "
          f"'chat_template': '{secretish}', 'dtype': 'bfloat16'}}", STATS)
    scraped = generate_latest(reg).decode()
    status = json.dumps(metrics.status())
    assert secretish not in scraped and secretish not in status
    assert metrics.status()["server"]["max_num_seqs"] == 30  # the validated facts are served
