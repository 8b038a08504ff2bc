"""Token counters from the step lines (`--enable-logging-iteration-details`): the pure count
(`StepTokens`), and the switch from throughput x window to it (`EngineState`, `ExporterMetrics`).
Against vLLM's own counters on a real run: tests/unit/exporting/test_latency_real.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry

from vllm_logwatch.exporting.engine_state import EngineState
from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.exporting.tokens import StepTokens
from vllm_logwatch.parsing.events import EngineStats, IterationStats, ServerInfo, SpecDecodeStats

T0 = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)


def _step(ctx_req: int, ctx_tok: int, gen_req: int, gen_tok: int, engine: int | None = 0,
          dummy: bool = False) -> IterationStats:
    return IterationStats(engine=engine, iteration=0, context_requests=ctx_req, context_tokens=ctx_tok,
                          generation_requests=gen_req, generation_tokens=gen_tok, elapsed_ms=1.0, dummy=dummy)


def _stats(seconds: float, prompt: float, generation: float, engine: int | None = 0,
           aggregated: int | None = None) -> EngineStats:
    return EngineStats(time=T0 + timedelta(seconds=seconds), engine=engine, engines_aggregated=aggregated,
                       prompt_throughput=prompt, generation_throughput=generation, running=1, waiting=0)


def test_a_prefill_yields_its_first_token_and_each_decoding_request_one() -> None:
    steps = StepTokens()
    assert steps.add(2, 960, 0, 0) == (960, 2)
    assert steps.add(0, 0, 2, 2) == (0, 2)
    assert steps.add(1, 100, 2, 2) == (100, 3)  # a mixed step
    assert steps.steps == 3


def test_a_prompt_cut_by_the_step_budget_yields_one_first_token() -> None:
    steps = StepTokens()
    assert steps.add(2, 2040, 8, 8, budget=2048) == (2040, 10)  # the last prompt cut (the budget is full)
    assert steps.add(1, 300, 9, 9, budget=2048) == (300, 9)  # its rest: no second first token
    assert steps.add(1, 500, 9, 9, budget=2048) == (500, 10)  # a new request
    without = StepTokens()  # the budget not known: a chunk counts one
    assert without.add(2, 2040, 8, 8)[1] + without.add(1, 300, 9, 9)[1] == 20


def test_a_generation_request_yields_one_token_whatever_it_scheduled() -> None:
    """A preempted request scheduled again (its recomputation) or draft tokens to verify: one each."""
    steps = StepTokens()
    assert steps.add(0, 0, 3, 700) == (0, 3)
    assert steps.add(0, 0, 4, 16) == (0, 4)


def test_a_dummy_step_counts_nothing_and_does_not_start_the_count() -> None:
    steps = StepTokens()
    assert steps.add(0, 0, 0, 0, dummy=True) == (0, 0)
    assert not steps.started


def test_the_first_step_line_switches_the_counters_to_the_steps() -> None:
    state = EngineState(5.0)
    state.apply_stats(_stats(0, 100.0, 200.0), 0.0)  # before: throughput x 5 s
    assert (state.tokens.prompt_tokens.value, state.tokens.generation_tokens.value) == (500.0, 1000.0)
    state.apply_step(_step(1, 480, 3, 3))
    state.apply_stats(_stats(5, 100.0, 200.0), 5.0)  # after: the line adds no tokens, only its busy window
    assert (state.tokens.prompt_tokens.value, state.tokens.generation_tokens.value) == (980.0, 1004.0)
    assert state.tokens.busy_seconds.value == 10.0
    state.apply_spec(SpecDecodeStats(format="v1", engine=0, accepted_tokens=7, drafted_tokens=12))
    assert state.tokens.generation_tokens.value == 1011.0  # accepted draft tokens: on no step line
    state.reset()  # a new launch without step lines: throughput x window again
    state.apply_stats(_stats(100, 10.0, 20.0), 100.0)
    assert (state.tokens.prompt_tokens.value, state.tokens.generation_tokens.value) == (1030.0, 1111.0)


def test_the_exporter_counts_steps_per_engine_with_the_launch_budget() -> None:
    metrics, registry = ExporterMetrics(stats_interval=5.0), CollectorRegistry()
    metrics.register(registry)
    metrics.apply(ServerInfo(max_num_batched_tokens=2048))
    for event in (_step(1, 2048, 0, 0, engine=1), _step(1, 100, 0, 0, engine=1), _step(0, 0, 1, 1, engine=1),
                  _stats(5, 400.0, 400.0, engine=0)):
        metrics.apply(event)

    def value(name: str, engine: str) -> float | None:
        return registry.get_sample_value(name, {"engine": engine, "model_name": "unknown"})

    assert value("vllm_logwatch_prompt_tokens_total", "1") == 2148.0
    assert value("vllm_logwatch_generation_tokens_total", "1") == 2.0  # one first token, one decode
    assert value("vllm_logwatch_generation_tokens_total", "0") == 2000.0  # engine 0 prints no steps


def test_an_aggregated_stats_line_counts_nothing_once_engines_count_their_steps() -> None:
    metrics, registry = ExporterMetrics(stats_interval=5.0), CollectorRegistry()
    metrics.register(registry)
    metrics.apply(_stats(0, 100.0, 100.0, engine=None, aggregated=2))
    metrics.apply(_step(1, 480, 0, 0, engine=0))
    metrics.apply(_stats(5, 100.0, 100.0, engine=None, aggregated=2))
    labels = {"engine": "aggregated", "model_name": "unknown"}
    assert registry.get_sample_value("vllm_logwatch_prompt_tokens_total", labels) == 500.0
