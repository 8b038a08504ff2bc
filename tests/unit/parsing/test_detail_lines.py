"""vLLM's iteration and request lines (`parsing/requests.py`): each version's form read for ids, counts,
timings, finish reasons and adapter names; never a prompt, parameter or output fragment; needles in
the one table; patterns that stay linear on kilobytes of prompt."""

from __future__ import annotations

import gzip
import json
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from vllm_logwatch.parsing import needles
from vllm_logwatch.parsing.events import IterationStats, RequestLine, Unparsed
from vllm_logwatch.parsing.line import parse_line

DATA = Path(__file__).resolve().parents[2] / "data" / "latency"
SECRET = "ZQXJ-SECRET-PROMPT"
API = "(APIServer pid=26467) INFO 12-02 02:09:04 "
ITERATIONS = [
    # 0.32 (CPU build, as printed by the run of tests/data/latency)
    (f"{API}[loggers.py:199] Engine 000: Iteration(0): 1 context requests, 354 context tokens, 0 generation "
     "requests, 0 generation tokens, iteration elapsed time: 53.97 ms, CPU KV cache usage: 0.1%",
     {"engine": 0, "iteration": 0, "context_requests": 1, "context_tokens": 354, "generation_requests": 0,
      "elapsed_ms": 53.97, "phase": "prefill", "device": "CPU", "kv_cache_usage_pct": 0.1}),
    # 0.26-0.29: GPU hard-coded, a dummy step, encoder counts
    (f"{API}[loggers.py:199] Engine 003: Iteration(12): 2 context requests, 900 context tokens, 5 generation "
     "requests, 5 generation tokens, iteration elapsed time: 31.20 ms (dummy), GPU KV cache usage: 12.5%, "
     "encoder inputs: 2, encoder output embeddings: 1024",
     {"engine": 3, "dummy": True, "phase": "mixed", "encoder_inputs": 2, "encoder_embeddings": 1024}),
    # 0.14-0.25: from the engine core, no engine, no KV usage
    ("(EngineCore_DP0 pid=7) INFO 11-02 12:00:10 [core.py:335] Iteration(40): 0 context requests, 0 context "
     "tokens, 8 generation requests, 8 generation tokens, iteration elapsed time: 9.87 ms",
     {"engine": None, "phase": "decode", "generation_requests": 8, "elapsed_ms": 9.87, "device": None}),
]
PARAMS = (f"SamplingParams(n=1, temperature=1.0, stop=['{SECRET}', "
          "\"lora_request: LoRARequest(lora_name='evil'\"], "
          "max_tokens=64, structured_outputs=None, extra_args=None)")
REQUESTS = [
    (f"{API}[request_logger.py:65] Received request chatcmpl-bench-d9cb1def-0: params: {PARAMS}, "
     "lora_request: None.", {"event": "received", "request_id": "chatcmpl-bench-d9cb1def-0", "lora": None}),
    (f"{API}[request_logger.py:65] Received request chatcmpl-7: params: {PARAMS}, lora_request: "
     "LoRARequest(lora_name='sql-lora', lora_int_id=1, lora_path='/adapters/sql', base_model_name=None).",
     {"event": "received", "request_id": "chatcmpl-7", "lora": "sql-lora"}),
    # before 0.11: the prompt itself on the Received line
    (f"INFO 03-05 23:33:05 logger.py:37] Received request chatcmpl-b9: prompt: '{SECRET} ', "
     f"params: {PARAMS}, "
     "prompt_token_ids: [1, 2], lora_request: None, prompt_adapter_request: None.",
     {"event": "received", "request_id": "chatcmpl-b9", "lora": None}),
    (f"{API}[async_llm.py:578] Added request chatcmpl-bench-d9cb1def-0-8bcc5583.",
     {"event": "added", "request_id": "chatcmpl-bench-d9cb1def-0-8bcc5583"}),
    (f"{API}[async_llm.py:922] Aborted request(s) chatcmpl-a-1f2e3d4c,chatcmpl-b-5a6b7c8d.",
     {"event": "aborted", "aborted": ("chatcmpl-a-1f2e3d4c", "chatcmpl-b-5a6b7c8d")}),
    ("INFO 01-22 18:25:07 async_llm.py:300] Aborted request cmpl-x-0.",
     {"event": "aborted", "aborted": ("cmpl-x-0",)}),
    (f"{API}[request_logger.py:108] Generated response chatcmpl-9 (streaming delta): output: '{SECRET}, "
     "finish_reason: stop', finish_reason: None", {"event": "delta", "finish_reason": None}),
    (f"{API}[request_logger.py:108] Generated response chatcmpl-9 (streaming delta): output: 'x', "
     "finish_reason: length", {"event": "delta", "finish_reason": "length"}),
    (f"{API}[request_logger.py:108] Generated response chatcmpl-9 (streaming complete): "
     f"output: \"{SECRET}\", "
     "finish_reason: streaming_complete", {"event": "complete", "finish_reason": "streaming_complete"}),
    (f"{API}[request_logger.py:108] Generated response chatcmpl-9: output: '{SECRET}', finish_reason: stop",
     {"event": "response", "request_id": "chatcmpl-9", "finish_reason": "stop"}),
    (f"{API}[serving.py:227] Loaded new LoRA adapter: name 'sql-lora', path '/adapters/sql'",
     {"event": "lora_loaded", "lora": "sql-lora", "request_id": ""}),
]


@pytest.mark.parametrize(("line", "fields"), ITERATIONS)
def test_iteration_lines_of_each_version(line: str, fields: dict[str, object]) -> None:
    event = parse_line(line)
    assert isinstance(event, IterationStats), event
    for key, value in fields.items():
        assert getattr(event, key) == value, key


@pytest.mark.parametrize(("line", "fields"), REQUESTS)
def test_request_lines_hold_ids_reasons_and_adapters_never_text(line: str, fields: dict[str, object]) -> None:
    event = parse_line(line)
    assert isinstance(event, RequestLine), event
    for key, value in fields.items():
        assert getattr(event, key) == value, key
    dumped = json.dumps(asdict(event))
    assert SECRET not in dumped and "SamplingParams" not in dumped and "evil" not in dumped


@pytest.mark.parametrize("line", [
    f"{API}[loggers.py:199] Engine 000: Iteration(3): many context requests",
    f"{API}[request_logger.py:65] Received request {SECRET} please",
    f"{API}[request_logger.py:65] Received request 'quoted': params: x",
    f"{API}[serving.py:227] Loaded new LoRA adapter: name '{SECRET} x', path 'y'",
])
def test_unreadable_detail_lines_are_counted_without_their_text(line: str) -> None:
    event = parse_line(line)
    assert isinstance(event, Unparsed) and event.what in ("iteration", "request")
    assert SECRET not in json.dumps(asdict(event))


@pytest.mark.parametrize(("line", "fields"), ITERATIONS + REQUESTS)
def test_every_detail_line_holds_its_kinds_needle_and_a_live_one(line: str, fields: object) -> None:
    kind = "iterations" if "Iteration(" in line else "requests"
    raw = line.encode()
    assert any(n in raw for n in needles.WANTS[kind].needles)
    assert any(n in raw for n in needles.LIVE_NEEDLES)


def test_request_lines_of_kilobytes_parse_in_linear_time() -> None:
    """A prompt-sized line full of near-matches costs microseconds per kilobyte, not quadratic time."""
    nasty = ", finish_reason: " + "a" * 40 + ", lora_request: " + "LoRARequest(lora_name='" * 3
    for size in (10_000, 100_000):
        body = (nasty * (size // len(nasty)))[:size]
        lines = [f"{API}[request_logger.py:65] Received request chatcmpl-1: params: {body}, "
                 "lora_request: None.",
                 f"{API}[request_logger.py:108] Generated response chatcmpl-1 (streaming delta): "
                 f"output: '{body}', "
                 "finish_reason: None",
                 f"{API}[async_llm.py:922] Aborted request(s) {'a,' * (size // 2)}."]
        start = time.perf_counter()
        for line in lines:
            parse_line(line)
        assert time.perf_counter() - start < 0.05 * size / 10_000


@pytest.mark.parametrize("poll_bytes", [1 << 20, 4096])
def test_the_real_detail_log_reads_the_same_by_blocks_as_line_by_line(
        tmp_path: Path, poll_bytes: int) -> None:
    """The live scanner hands over every iteration and request line `parse_line` reads (the metrics of
    watch's block path equal those of `parse_line` on every line), on the real run of
    tests/data/latency."""
    from test_blocks import by_blocks, line_by_line

    log = tmp_path / "serve_20261202_020741.log"
    log.write_bytes(gzip.decompress((DATA / "serve.log.gz").read_bytes()))
    want = line_by_line(log)
    key = "vllm_logwatch_requests_total" + str(sorted({"finish_reason": "length", "lora": "",
                                                        "model_name": "tiny-llama"}.items()))
    assert want[0][key] == 139
    assert by_blocks(log, poll_bytes) == want
