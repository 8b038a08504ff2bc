"""Sleep mode and the DP supervisor in the exporter: a sleeping engine is never reported stalled (its
silence counts from its wake-up), and a DP server found unhealthy raises the problem counter."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.parsing.assemble import iter_events
from vllm_logwatch.parsing.line import parse_line

STATS = (
    "(APIServer pid=1) INFO 12-01 10:00:00 [loggers.py:257] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
    "Avg generation throughput: 5.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 2.0%"
)
CORE = "(EngineCore_DP0 pid=2) INFO 12-01 10:00:00 [abstract.py:408] "
E0 = {"engine": "0", "model_name": "unknown"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def setup() -> tuple[ExporterMetrics, CollectorRegistry, Clock]:
    clock = Clock()
    metrics, registry = ExporterMetrics(stats_interval=10.0, clock=clock), CollectorRegistry()
    metrics.register(registry)
    return metrics, registry, clock


def apply(metrics: ExporterMetrics, line: str) -> None:
    event = parse_line(line)
    assert event is not None
    metrics.apply(event)


def test_a_sleeping_engine_is_not_stalled_and_its_silence_counts_from_its_wake_up() -> None:
    metrics, registry, clock = setup()
    apply(metrics, STATS)  # requests running at the last line
    apply(metrics, CORE + "It took 1.500000 seconds to fall asleep.")
    clock.now += 3600  # an hour asleep: far past 3 intervals
    assert registry.get_sample_value("vllm_logwatch_engine_stalled", E0) == 0.0
    assert registry.get_sample_value("vllm_logwatch_asleep", {}) == 1.0
    assert metrics.status()["engines"]["0"]["state"] != "stalled"
    apply(
        metrics, CORE + "It took 0.800000 seconds to wake up tags ['weights']."
    )  # the KV cache still sleeps
    assert registry.get_sample_value("vllm_logwatch_engine_stalled", E0) == 0.0
    apply(metrics, CORE + "It took 0.700000 seconds to wake up tags ['kv_cache'].")
    assert registry.get_sample_value("vllm_logwatch_asleep", {}) == 0.0
    clock.now += 20  # awake for 2 intervals: not yet stalled
    assert registry.get_sample_value("vllm_logwatch_engine_stalled", E0) == 0.0
    clock.now += 11  # 3 intervals awake without a line, requests running: stalled
    assert registry.get_sample_value("vllm_logwatch_engine_stalled", E0) == 1.0
    assert (
        registry.get_sample_value("vllm_logwatch_sleep_transitions_total", {"transition": "wake_up"}) == 2.0
    )
    assert (
        registry.get_sample_value("vllm_logwatch_sleep_transition_seconds", {"transition": "wake_up"}) == 0.7
    )


def test_without_sleep_the_same_silence_is_a_stall() -> None:
    metrics, registry, clock = setup()
    apply(metrics, STATS)
    clock.now += 3600
    assert registry.get_sample_value("vllm_logwatch_engine_stalled", E0) == 1.0


def test_an_unhealthy_dp_server_raises_the_problem_counter_and_its_gauge() -> None:
    metrics, registry, _ = setup()
    unhealthy = {"problem": "dp_server_unhealthy"}
    assert registry.get_sample_value("vllm_logwatch_problems_total", unhealthy) == 0.0  # from 0
    apply(
        metrics,
        "(DPSupervisor pid=4) INFO 12-01 10:00:04 [dp_supervisor.py:450] DPSupervisor probe found 1 "
        "unhealthy DP Servers.",
    )
    assert registry.get_sample_value("vllm_logwatch_problems_total", unhealthy) == 1.0
    assert registry.get_sample_value("vllm_logwatch_dp_servers_unhealthy", {}) == 1.0


DATA_034 = Path(__file__).parents[2] / "data" / "vllm-0.34"


def _read_034(name: str, upto: int | None = None) -> ExporterMetrics:
    metrics, registry, _ = setup()
    text = (DATA_034 / name).read_bytes().decode()
    for line in text.split("\n")[:upto]:
        event = parse_line(line)
        if event is not None:
            metrics.apply(event)
    metrics.registry = registry  # type: ignore[attr-defined]
    return metrics


@pytest.mark.parametrize("name", ["serve_20261120_100000.log", "ray_serve.log"])
def test_fault_tolerance_status_rejections_offload_failures_and_breaker_of_0_34(name: str) -> None:
    def value(metric: str, **labels: str) -> float | None:
        return registry.get_sample_value(f"vllm_logwatch_{metric}", labels)

    metrics = _read_034(name, upto=21)  # up to the rejections, engine 0 unhealthy
    registry = metrics.registry  # type: ignore[attr-defined]
    status = {s: value("engine_fault_tolerance_status", engine="0", status=s)
              for s in ("healthy", "diagnosing", "unhealthy", "dead", "other")}
    assert status == {"healthy": 0, "diagnosing": 0, "unhealthy": 1, "dead": 0, "other": 0}
    assert value("rejected_requests_total", status="unhealthy") == 2
    assert value("rejected_requests_total", status="dead") == 0
    assert value("engine_faults_total") == 1

    metrics = _read_034(name)
    registry = metrics.registry  # type: ignore[attr-defined]
    assert value("engine_fault_tolerance_status", engine="0", status="healthy") == 1
    assert value("engine_fault_tolerance_status", engine="0", status="unhealthy") == 0
    assert value("engine_fault_tolerance_status", engine="1", status="dead") == 1
    assert value("kv_offload_job_failures_total", direction="store") == 1
    assert value("kv_offload_job_failures_total", direction="load") == 1
    assert value("kv_offload_chunks_dropped_total") == 6
    assert value("kv_connector_breaker_openings_total", breaker="Mooncake lookup") == 1
    assert value("problems_total", problem="ft_recovery_timeout") == 1
    assert value("log_messages_total", level="WARNING") == 5
    assert value("log_messages_total", level="ERROR") == 1


def test_async_eplb_time_failures_and_their_tracebacks_of_0_34() -> None:
    """runtime.log read as watch reads it (through the assembler): async EPLB's time is the rearrangement
    gauge's, the tier-poll back-off and the failed CUDA checkpoints are problems, and each worker failure
    with its traceback is one error (the traceback was a second)."""
    metrics, registry, _ = setup()
    lines = (DATA_034 / "runtime.log").read_bytes().decode().split("\n")[:-1]
    for event in iter_events(lines):
        metrics.apply(event)

    def value(metric: str, **labels: str) -> float | None:
        return registry.get_sample_value(f"vllm_logwatch_{metric}", labels)

    assert value("eplb_rearrangement_seconds") == 2.35
    assert value("eplb_rearrangements_total") == 1
    assert value("problems_total", problem="kv_tier_poll_failing") == 1
    assert value("problems_total", problem="cuda_checkpoint_failed") == 2
    assert value("log_messages_total", level="ERROR") == 7
    assert value("log_messages_total", level="WARNING") == 2
