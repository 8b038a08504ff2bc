"""The live latency state (`exporting/latency_state.py`) through the exporter: step histograms by phase
and bucketed batch, the last decode step, requests by finish reason and adapter (bounded), request
times only from lines timed finely enough."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.parsing.line import parse_line

SECRET = "ZQXJ-SECRET-PROMPT"
HDR = "(APIServer pid=1) INFO 12-02 02:09:04 [x.py:1] "


def _line(text: str, at: float | None = None) -> object:
    event = parse_line(HDR + text)
    assert event is not None
    if at is not None:  # a container's stamp (sub-second)
        event = replace(event, time=datetime.fromtimestamp(at, UTC))
    return event


def _step(it: int, ctx: int, gen: int, ms: float) -> str:
    return (f"Engine 000: Iteration({it}): {ctx} context requests, {ctx * 100} context tokens, "
            f"{gen} generation requests, {gen} generation tokens, iteration elapsed time: {ms} ms, "
            "CPU KV cache usage: 1.0%")


def _setup() -> tuple[ExporterMetrics, CollectorRegistry]:
    metrics, registry = ExporterMetrics(), CollectorRegistry()
    metrics.register(registry)
    return metrics, registry


def test_steps_by_phase_and_bucketed_batch_and_the_last_decode_step() -> None:
    metrics, registry = _setup()
    for i, (ctx, gen, ms) in enumerate([(1, 0, 50.0), (0, 3, 5.0), (0, 3, 7.0), (1, 3, 20.0), (0, 600, 9.0)]):
        metrics.apply(_line(_step(i, ctx, gen, ms), 1000.0 + i * 0.01 + 0.001))  # type: ignore[arg-type]
    labels = {"engine": "0", "model_name": "unknown"}

    def get(name: str, **more: str) -> float | None:
        return registry.get_sample_value(name, {**labels, **more})

    steps = "vllm_logwatch_step_duration_seconds"
    assert get(f"{steps}_count", phase="decode", batch="3-4") == 2
    assert get(f"{steps}_sum", phase="decode", batch="3-4") == 0.012
    assert get(f"{steps}_count", phase="prefill", batch="0") == 1
    assert get(f"{steps}_count", phase="mixed", batch="3-4") == 1
    assert get(f"{steps}_count", phase="decode", batch="513+") == 1
    assert get("vllm_logwatch_decode_step_seconds") == 0.009
    # one token gap per generating stream: 3 + 3 + 3 + 600
    assert get("vllm_logwatch_time_between_tokens_seconds_count", batch="3-4") == 9
    assert get("vllm_logwatch_time_between_tokens_seconds_count", batch="513+") == 600


def test_requests_by_reason_and_adapter_bounded_to_loaded_adapters() -> None:
    metrics, registry = _setup()
    lines = [
        ("Loaded new LoRA adapter: name 'sql', path '/a'", 1.0),
        ("Received request r1: params: SamplingParams(n=1), lora_request: LoRARequest(lora_name='sql', "
         "lora_int_id=1).", 10.0),
        (f"Received request r2: params: SamplingParams(stop=['{SECRET}']), lora_request: "
         f"LoRARequest(lora_name='{SECRET}', lora_int_id=2).", 10.0),
        ("Received request r3: params: SamplingParams(n=1), lora_request: None.", 10.0),
        ("Added request r1-8bcc5583.", 10.01),
        (f"Generated response r1 (streaming delta): output: '{SECRET}', finish_reason: None", 10.2),
        ("Generated response r1 (streaming delta): output: 'x', finish_reason: length", 10.5),
        (f"Generated response r1 (streaming complete): output: '{SECRET}', finish_reason: streaming_complete",
         10.6),
        ("Generated response r2 (streaming complete): output: 'x', finish_reason: streaming_complete", 11.0),
        ("Aborted request(s) r3-1a2b3c4d.", 12.0),
    ]
    for text, at in lines:
        metrics.apply(_line(text, 1000.0 + at + 0.0001))  # type: ignore[arg-type]
    get = registry.get_sample_value
    base = {"model_name": "unknown"}
    assert get("vllm_logwatch_requests_total", {**base, "finish_reason": "length", "lora": "sql"}) == 1
    assert get("vllm_logwatch_requests_total", {**base, "finish_reason": "unknown", "lora": "other"}) == 1
    assert get("vllm_logwatch_requests_total", {**base, "finish_reason": "abort", "lora": ""}) == 1
    assert get("vllm_logwatch_request_duration_seconds_count", base) == 2  # the abort is not an e2e time
    assert get("vllm_logwatch_request_duration_seconds_sum", base) == pytest.approx(1.6)
    assert get("vllm_logwatch_time_to_first_token_seconds_sum", base) == pytest.approx(0.2)
    exposition = "\n".join(str(s) for f in registry.collect() for s in f.samples)
    assert SECRET not in exposition and "r1" not in exposition


def test_adapters_past_the_cap_fold_into_other_and_are_counted() -> None:
    metrics, registry = _setup()
    for i in range(20):
        metrics.apply(_line(f"Loaded new LoRA adapter: name 'a{i}', path '/p'"))  # type: ignore[arg-type]
    metrics.apply(_line(  # type: ignore[arg-type]
        "Received request r: params: x, lora_request: LoRARequest(lora_name='a19')."))
    metrics.apply(_line("Generated response r: output: 'y', finish_reason: stop"))  # type: ignore[arg-type]
    get = registry.get_sample_value
    assert get("vllm_logwatch_requests_total",
               {"model_name": "unknown", "finish_reason": "stop", "lora": "other"}) == 1
    assert get("vllm_logwatch_label_overflow_total", {"label": "lora"}) == 4


def test_requests_read_by_whole_second_stamps_are_counted_not_timed() -> None:
    metrics, registry = _setup()
    for text in ("Received request r: params: x, lora_request: None.",
                 "Generated response r: output: 'y', finish_reason: stop"):
        event = parse_line(HDR + text)
        assert event is not None
        metrics.apply(replace(event, time=datetime(2026, 12, 2, 2, 9, 4, tzinfo=UTC)))
    get = registry.get_sample_value
    assert get("vllm_logwatch_requests_untimed_total", {"model_name": "unknown"}) == 1
    assert get("vllm_logwatch_request_duration_seconds_count", {"model_name": "unknown"}) is None


def test_live_requests_are_timed_by_their_arrival_not_their_whole_second_stamps() -> None:
    """Read as written (a `LaunchReader` given each block's `Arrival`), a request's lines are timed by when
    their blocks arrived: 0.7 s between them although both are stamped the same second."""
    from vllm_logwatch.live.ingest import Arrival, LaunchReader
    from vllm_logwatch.parsing.assemble import Assembler
    from vllm_logwatch.parsing.stamps import YearClock

    wall = datetime(2026, 12, 2, 2, 9, 4, tzinfo=UTC).timestamp()
    metrics, registry = _setup()
    assembler = Assembler("f", YearClock(2026, UTC))
    reader = LaunchReader(metrics, assembler)
    reader.read((HDR + "Received request r: params: x, lora_request: None.\n").encode(),
                arrival=Arrival(50.1, wall + 0.1))
    reader.read((HDR + "Generated response r: output: 'y', finish_reason: stop\n").encode(),
                arrival=Arrival(50.8, wall + 0.8))
    assert registry.get_sample_value("vllm_logwatch_request_duration_seconds_sum",
                                     {"model_name": "unknown"}) == pytest.approx(0.7)


def test_a_new_launch_resets_the_gauge_and_keeps_the_counters() -> None:
    metrics, registry = _setup()
    metrics.apply(_line(_step(0, 0, 2, 4.0), 1000.001))  # type: ignore[arg-type]
    metrics.apply(_line("Received request r: params: x, lora_request: None.", 1000.002))  # type: ignore[arg-type]
    metrics.apply(_line("Generated response r: output: 'y', finish_reason: stop", 1000.5))  # type: ignore[arg-type]
    metrics.new_launch("next.log")
    labels = {"engine": "0", "model_name": "unknown"}
    assert registry.get_sample_value("vllm_logwatch_decode_step_seconds", labels) is None
    assert registry.get_sample_value("vllm_logwatch_requests_total", {
        "model_name": "unknown", "finish_reason": "stop", "lora": ""}) == 1


def test_an_abort_counts_the_received_ids_or_one_when_none_was() -> None:
    """vLLM joins the ids of an abort with commas, and takes a client's X-Request-Id verbatim: an id with
    800 commas is one request, not 800 aborts. An abort line counts the ids received (once each), or one
    request when none of its ids was."""
    metrics, registry = _setup()
    rid = "chatcmpl-" + ",".join(f"x{i}" for i in range(800))
    for text in (f"Received request {rid}: params: SamplingParams(n=1), lora_request: None.",
                 f"Added request {rid}-8bcc5583.", f"Aborted request(s) {rid}-8bcc5583.",
                 "Received request a: params: SamplingParams(n=1), lora_request: None.",
                 "Received request b: params: SamplingParams(n=1), lora_request: None.",
                 "Aborted request(s) a-1a2b3c4d,b-1a2b3c4d,a-1a2b3c4d,never-seen."):
        metrics.apply(_line(text))  # type: ignore[arg-type]
    get = registry.get_sample_value
    assert get("vllm_logwatch_requests_total",
               {"model_name": "unknown", "finish_reason": "abort", "lora": ""}) == 1 + 2
