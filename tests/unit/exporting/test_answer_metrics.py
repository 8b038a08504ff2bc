"""Start-up durations, KV cache memory, GPU count and busy seconds as series, from a real vLLM log
(tests/data/compare/tight-kv) checked against its own lines read with plain regexes here."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.parsing.line import parse_line

LOG = next((Path(__file__).parents[2] / "data" / "compare" / "tight-kv").glob("serve_*.log"))
HDR = "(APIServer pid=1) INFO 12-01 17:46:51 "
THROUGHPUT = re.compile(r"Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: ([\d.]+)")


def _fed(lines: list[str], interval: float | None = 2.0) -> CollectorRegistry:
    metrics = ExporterMetrics(stats_interval=interval)
    registry = CollectorRegistry()
    metrics.register(registry)
    for line in lines:
        event = parse_line(line)
        if event is not None:
            metrics.apply(event)
    return registry


def test_startup_phases_gpus_and_busy_seconds_of_a_real_launch() -> None:
    lines = LOG.read_text().splitlines()
    reg = _fed(lines)
    model = {"model_name": "tiny-llama"}
    init = float(re.search(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s",
                           LOG.read_text()).group(1))  # type: ignore[union-attr]
    engine_init = reg.get_sample_value("vllm_logwatch_startup_seconds", {**model, "phase": "engine_init"})
    assert engine_init == init == 0.02
    assert reg.get_sample_value("vllm_logwatch_startup_seconds", {**model, "phase": "weights_load"}) == 0.0
    assert reg.get_sample_value("vllm_logwatch_startup_seconds", {**model, "phase": "graph_capture"}) is None
    assert reg.get_sample_value("vllm_logwatch_gpus", model) == 1
    # Busy: every window in which tokens were computed, 2 s each (VLLM_LOG_STATS_INTERVAL=2 here).
    flowing = [m for m in map(THROUGHPUT.search, lines) if m and (float(m.group(1)) or float(m.group(2)))]
    engine = {"engine": "0", **model}
    assert len(flowing) == 32
    assert reg.get_sample_value("vllm_logwatch_busy_seconds_total", engine) == 2.0 * len(flowing)


def test_kv_memory_gpu_count_and_a_new_launch() -> None:
    reg = _fed([
        HDR + "[api_utils.py:286] non-default args: {'model': 'm', 'tensor_parallel_size': 2, "
              "'data_parallel_size': 4, 'pipeline_parallel_size': 2}",
        HDR + "[gpu_worker.py:298] Available KV cache memory: 1.5 GiB",
        HDR + "[monitor.py:34] torch.compile takes 12.5 s in total",
        HDR + "[gpu_model_runner.py:2110] Graph capturing finished in 7 secs, took 0.52 GiB",
        HDR + "[gpu_model_runner.py:1800] Model loading took 14.99 GiB and 3.25 seconds",
    ])
    m = {"model_name": "m"}
    assert reg.get_sample_value("vllm_logwatch_gpus", m) == 16
    capacity = reg.get_sample_value("vllm_logwatch_kv_cache_capacity_bytes", {**m, "sizing": "estimate"})
    assert capacity == 1.5 * 2**30
    phases = {p: reg.get_sample_value("vllm_logwatch_startup_seconds", {**m, "phase": p})
              for p in ("torch_compile", "graph_capture", "model_load")}
    assert phases == {"torch_compile": 12.5, "graph_capture": 7.0, "model_load": 3.25}


def test_start_up_series_start_over_with_a_launch() -> None:
    metrics = ExporterMetrics()
    registry = CollectorRegistry()
    metrics.register(registry)
    for line in (HDR + "[api_server.py:1] vLLM API server version 0.10.0",
                 HDR + "[monitor.py:34] torch.compile takes 12.5 s in total"):
        event = parse_line(line)
        assert event is not None
        metrics.apply(event)
    labels = {"model_name": "", "phase": "torch_compile"}
    assert registry.get_sample_value("vllm_logwatch_startup_seconds", labels) == 12.5
    metrics.new_launch()
    assert registry.get_sample_value("vllm_logwatch_startup_seconds", labels) is None


def test_kv_capacity_is_the_size_after_warm_up_when_the_log_has_it() -> None:
    """vLLM 0.34 sizes the KV cache after warm-up: `Available KV cache memory` (71.25 GiB) is an estimate
    before it, `Extended KV cache to 3990 blocks (62.34 GiB).` the size it serves with."""
    log = Path(__file__).parents[2] / "data" / "vllm-0.34" / "serve_20261120_100000.log"
    text = log.read_bytes().decode()
    lines = text.split("\n")
    m = {"model_name": ""}  # the log names no model
    before = _fed(lines[:6])  # the estimate alone
    assert before.get_sample_value("vllm_logwatch_kv_cache_capacity_bytes", {**m, "sizing": "estimate"}) \
        == 71.25 * 2**30
    after = _fed(lines)
    assert after.get_sample_value("vllm_logwatch_kv_cache_capacity_bytes", {**m, "sizing": "after_warmup"}) \
        == 62.34 * 2**30
    assert after.get_sample_value("vllm_logwatch_kv_cache_capacity_bytes", {**m, "sizing": "estimate"}) \
        is None
    assert after.get_sample_value("vllm_logwatch_kv_cache_blocks", m) == 3990
    assert after.get_sample_value("vllm_logwatch_kv_cache_capacity_tokens", m) == 1_021_440
