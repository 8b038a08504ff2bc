"""The latency metrics against vLLM's own /metrics, on the real run of tests/data/latency (vLLM 0.32 CPU,
streaming chat at 1, 4 and 8 streams, then 4 dropped streams).

The exporter reads the run's lines in order (the CRI copy: each line stamped when it was read, as a
container runtime keeps it), and is scraped where the recording script scraped vLLM: before and after
each phase. The answer key comes from vLLM's /metrics and the client only.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from vllm_logwatch.commands.parse import run_parse
from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.offline.reading.events import iter_source_events
from vllm_logwatch.offline.reading.inputs import resolve_inputs
from vllm_logwatch.parsing.events import Event

DATA = Path(__file__).resolve().parents[2] / "data" / "latency"
KEY: dict[str, dict[str, Any]] = json.loads((DATA / "answer_key.json").read_text())
AFTER = 3.0
"""The recording script scraped vLLM 3 s after each phase's client ended."""


def _events() -> list[Event]:
    sources, _ = resolve_inputs([str(DATA / "serve.cri.log.gz")], "UTC")
    return list(iter_source_events(sources[0], "all", UTC, None))


def _scrape(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in registry.collect() for s in f.samples}


def _total(scrape: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **match: str) -> float:
    return sum(v for (n, labels), v in scrape.items()
               if n == name and all(dict(labels).get(k) == want for k, want in match.items()))


@pytest.fixture(scope="module")
def phases() -> dict[str, dict[str, float]]:
    """Per phase, the exporter's deltas of what vLLM's key has."""
    events = iter(_events())
    metrics, registry = ExporterMetrics(), CollectorRegistry()
    metrics.register(registry)
    pending: list[Event] = []

    def feed_until(limit: float, it: Iterator[Event]) -> None:
        while pending and (pending[0].time is None or pending[0].time.timestamp() <= limit):
            metrics.apply(pending.pop(0))
        for event in it:
            if event.time is not None and event.time.timestamp() > limit:
                pending.append(event)
                return
            metrics.apply(event)

    out = {}
    for name, key in KEY.items():
        start, end = (t / 1e9 for t in key["window_ns"])
        feed_until(start, events)
        before = _scrape(registry)
        feed_until(end + AFTER, events)
        after = _scrape(registry)

        def delta(name: str, **match: str) -> float:
            return _total(after, name, **match) - _total(before, name, **match)  # noqa: B023

        out[name] = {
            "generation": delta("vllm_logwatch_generation_tokens_total"),
            "tbt_sum": delta("vllm_logwatch_time_between_tokens_seconds_sum"),
            "tbt_count": delta("vllm_logwatch_time_between_tokens_seconds_count"),
            "e2e_sum": delta("vllm_logwatch_request_duration_seconds_sum"),
            "e2e_count": delta("vllm_logwatch_request_duration_seconds_count"),
            "ttft_sum": delta("vllm_logwatch_time_to_first_token_seconds_sum"),
            "ttft_count": delta("vllm_logwatch_time_to_first_token_seconds_count"),
            **{f"requests_{r}": delta("vllm_logwatch_requests_total", finish_reason=r)
               for r in ("stop", "length", "abort", "unknown", "other")},
        }
    return out


@pytest.fixture(scope="module")
def steps() -> list[dict[str, Any]]:
    out = io.StringIO()
    run_parse([str(DATA / "serve.cri.log.gz")], fmt="jsonl", kind="iterations", tz="UTC", out=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


LOADS = ("c1", "c4", "c8")


@pytest.mark.parametrize("phase", LOADS)
def test_every_token_gap_vllm_counts_is_a_generating_stream_of_a_step(phase: str, phases: Any) -> None:
    assert phases[phase]["tbt_count"] == KEY[phase]["inter_token_latency_count"]


@pytest.mark.parametrize("phase", [*LOADS, "abort"])
def test_generation_tokens_from_the_steps_are_vllms(phase: str, phases: Any) -> None:
    """Counted from the step lines (exporting/tokens.py): vLLM's generation_tokens_total exactly
    in each phase (1024, 3048, 4940), and 3 more in the abort phase (287): vLLM aborted 3 requests
    while a step ran for them, and dropped that step's token."""
    aborted = 3 if phase == "abort" else 0
    assert phases[phase]["generation"] == KEY[phase]["generation_tokens"] + aborted


@pytest.mark.parametrize(("phase", "within"), [("c1", 0.15), ("c4", 0.10), ("c8", 0.10)])
def test_time_between_tokens_against_vllms_inter_token_latency(
        phase: str, within: float, phases: Any) -> None:
    """The lines' cadence, once per generating stream, against vLLM's inter-token latency: within 10% at
    4 and 8 streams; at 1 stream vLLM's front end prints a request's first lines late (it is busy
    starting the stream), which the cadence cannot see through: 11% low on this run."""
    ours = phases[phase]["tbt_sum"] / phases[phase]["tbt_count"]
    vllm = KEY[phase]["inter_token_latency_mean_s"]
    assert abs(ours / vllm - 1) <= within, (phase, ours, vllm)


@pytest.mark.parametrize("phase", LOADS)
def test_the_steps_own_time_is_vllms_inter_token_latency_without_the_time_between_steps(
        phase: str, steps: list[dict[str, Any]]) -> None:
    """vLLM's `iteration elapsed time` runs from after the step is scheduled until the model's output is
    back; its inter-token latency runs from one step's outputs to the next, so it also holds the
    scheduling and the output update between steps: 10-25% of it on this run, named here, not missed."""
    start, end = (t / 1e9 for t in KEY[phase]["window_ns"])
    mine = [s for s in steps if start <= _ts(s["time"]) <= end + AFTER and s["generation_requests"]]
    streams = sum(s["generation_requests"] for s in mine)
    assert streams == KEY[phase]["inter_token_latency_count"]
    engine_step = sum(s["elapsed_ms"] * s["generation_requests"] for s in mine) / streams / 1000
    between_steps = KEY[phase]["inter_token_latency_mean_s"] - engine_step
    assert 0.10 <= between_steps / KEY[phase]["inter_token_latency_mean_s"] <= 0.25


def _ts(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


@pytest.mark.parametrize("phase", LOADS)
def test_end_to_end_time_against_vllms_e2e_request_latency(phase: str, phases: Any) -> None:
    assert phases[phase]["e2e_count"] == KEY[phase]["e2e_request_latency_count"]
    ours = phases[phase]["e2e_sum"] / phases[phase]["e2e_count"]
    assert abs(ours / KEY[phase]["e2e_request_latency_mean_s"] - 1) <= 0.10


@pytest.mark.parametrize("phase", [*LOADS, "abort"])
def test_requests_by_finish_reason_against_vllms_request_success(phase: str, phases: Any) -> None:
    """Equal for `length`; vLLM 0.32 logs a stream's reason only on a last piece with text, so a stream
    that stops at its end-of-sequence token ends `unknown`: `stop` + `unknown` is vLLM's `stop`. An
    abort is not in vLLM's request_success (4 streams dropped in the abort phase, the rest finished)."""
    vllm = KEY[phase]["requests_by_finish_reason"]
    got = phases[phase]
    assert got["requests_length"] == vllm.get("length", 0)
    assert got["requests_stop"] + got["requests_unknown"] == vllm.get("stop", 0)
    assert got["requests_unknown"] <= 1 and got["requests_other"] == 0
    dropped = 4 if phase == "abort" else 0
    assert got["requests_abort"] == dropped - sum(vllm.values()) if dropped else got["requests_abort"] == 0


@pytest.mark.parametrize("phase", LOADS)
def test_time_to_first_token_is_the_front_ends_first_logged_piece(phase: str, phases: Any) -> None:
    """Measured for every stream that logged a piece (vLLM logs no piece without text: a stream ended by
    its first token has none). It is the front end's first logged piece: later than vLLM's own time to
    first token (taken in the engine; 1.9-3.5x on this run), within 35% of what the client measured."""
    finished = KEY[phase]["e2e_request_latency_count"]
    assert finished - phases[phase]["requests_unknown"] <= phases[phase]["ttft_count"] <= finished
    ours = phases[phase]["ttft_sum"] / phases[phase]["ttft_count"]
    assert ours > KEY[phase]["time_to_first_token_mean_s"]
    assert abs(ours / (KEY[phase]["client"]["mean_ttft_ms"] / 1000) - 1) < 0.35
