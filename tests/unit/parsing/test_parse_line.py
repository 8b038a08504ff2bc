"""`parse_line` on one line of every shape vLLM (and whatever sits in front of it) writes, and the
`Assembler` that joins lines into records.

The table below has one row per line variant we know vLLM to write (prefixes, stats lines of V0 and V1,
spec decode, start-up facts, failures), each rule of the parser covered. Real lines come from
tests/data/*.log (picked by a substring, so the table says which line it means); the others are built
from support import TESTS
from the format strings in vLLM's source where no real log has the line.
"""
# ruff: noqa: E501  (vLLM log lines are long; each table row keeps its line whole and greppable)

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Iterable
from dataclasses import asdict, fields
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import TESTS

import vllm_logwatch.parsing.line as parse_module
from vllm_logwatch.parsing.assemble import Assembler, iter_events
from vllm_logwatch.parsing.events import (
    EngineStats,
    Event,
    HttpAccess,
    LogMessage,
    PrefixCacheRates,
    ServerInfo,
    SpecDecodeStats,
    TransferStats,
    Unparsed,
)
from vllm_logwatch.parsing.line import exception_of, parse_line

DATA = TESTS / "data"
REAL_CPU_LOG = next((DATA / "real-vllm-cpu").glob("serve_*.log"))


def _read(name: str) -> list[str]:
    path = REAL_CPU_LOG if name == "cpu" else DATA / f"{name}.log"
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def real(name: str, contains: str, nth: int = 0) -> str:
    """The `nth` line of tests/data/`name`.log that contains `contains` (`cpu`: the real 0.32 CPU log)."""
    found = [line for line in _read(name) if contains in line]
    assert len(found) > nth, f"{name}.log has no line {nth} with {contains!r}"
    return found[nth]


# Bodies and headers to build lines from.
V1_BODY = (
    "Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, "
    "Running: 3 reqs, Waiting: 4 reqs, GPU KV cache usage: 5.5%, Prefix cache hit rate: 6.5%"
)
V1_LINE = f"(APIServer pid=1) INFO 11-02 12:00:10 [loggers.py:335] Engine 000: {V1_BODY}"
V1_FIELDS: dict[str, Any] = {
    "engine": 0, "prompt_throughput": 1.0, "generation_throughput": 2.0, "running": 3, "waiting": 4,
    "gpu_kv_cache_usage_pct": 5.5, "prefix_cache_hit_rate_pct": 6.5, "stamp": "11-02 12:00:10",
    "level": "INFO",
}
V1 = {**V1_FIELDS, "process": "APIServer", "pid": 1}
HDR = "(APIServer pid=1) INFO 11-02 12:00:10 [loggers.py:335] "
ERR = "(EngineCore_DP0 pid=7) ERROR 11-02 12:00:10 [core.py:900] "
JSON_RECORD = {
    "asctime": "2026-11-02 12:00:10,123", "levelname": "INFO", "name": "vllm.v1.metrics.loggers",
    "processName": "MainProcess", "process": 12, "message": f"Engine 000: {V1_BODY}",
}


def p(line: str, kind: str | None, fields: dict[str, Any] | None = None, *, id: str) -> Any:
    return pytest.param(line, kind, fields or {}, id=id)


STATS_CASES = [
    # --- V0 engine (section 2.1) ---------------------------------------------------------------
    p(real("010", "19:20:57"), "stats", {
        "engine": None, "prompt_throughput": 0.0, "generation_throughput": 553.9, "running": 110,
        "swapped": 0, "waiting": 507, "gpu_kv_cache_usage_pct": 98.6, "cpu_kv_cache_usage_pct": 0.0,
        "device": "GPU", "stamp": "12-05 19:20:57", "level": "INFO", "process": None, "extra": {},
    }, id="v0-0.2.7-llm_engine.py-trailing-spaces"),
    p("INFO 02-27 14:34:54 metrics.py:161] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
      "0.0 tokens/s, Running: 0 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%, "
      "CPU KV cache usage: 0.0%", "stats",
      {"running": 0, "swapped": 0, "waiting": 0, "cpu_kv_cache_usage_pct": 0.0}, id="v0-0.3-no-period"),
    p(real("004", "18:25:09"), "stats", {
        "prompt_throughput": 605.5, "generation_throughput": 61.0, "running": 2, "swapped": 0, "waiting": 0,
        "gpu_kv_cache_usage_pct": 7.4, "cpu_kv_cache_usage_pct": 0.0, "unknown_fields": 0,
    }, id="v0-trailing-period"),
    p(real("047", "09:04:46"), "stats", {
        "generation_throughput": 0.4, "running": 2, "gpu_kv_cache_usage_pct": 0.6, "stamp": "03-18 09:04:46",
    }, id="v0-bracketed-0.8"),
    p(real("017", "metrics.py:351"), "stats", {
        "prompt_throughput": 5902.0, "running": 16, "waiting": 11, "gpu_kv_cache_usage_pct": 87.1,
        "stamp": "09-22 23:46:42", "level": "INFO",
    }, id="v0-journald-prefix"),
    # --- V1 engine (section 2.2) ---------------------------------------------------------------
    p("INFO 01-27 12:00:05 loggers.py:34] Running: 3 reqs, Waiting: 0 reqs ", "stats", {
        "running": 3, "waiting": 0, "prompt_throughput": None, "generation_throughput": None,
        "gpu_kv_cache_usage_pct": None, "engine": None,
    }, id="v1a-0.7.0-stub-trailing-space"),
    p(real("026", "23:33:10"), "stats", {
        "prompt_throughput": 156.5, "generation_throughput": 1455.8, "running": 0, "waiting": 0,
        "gpu_kv_cache_usage_pct": 0.0, "prefix_cache_hit_rate_pct": None, "unknown_fields": 0, "extra": {},
    }, id="v1b-0.7.1-missing-comma-trailing-period"),
    p("INFO 02-01 12:00:05 loggers.py:69] Avg prompt throughput: 410.2 tokens/s, Avg generation throughput: "
      "95.7 tokens/s, Running: 4 reqs, Waiting: 0 reqs GPU KV cache usage: 1.2%.", "stats",
      {"running": 4, "waiting": 0, "gpu_kv_cache_usage_pct": 1.2}, id="v1b-doc-example"),
    p("INFO 02-20 12:00:05 loggers.py:78] Avg prompt throughput: 410.2 tokens/s, Avg generation throughput: "
      "95.7 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%, Prefix cache hit rate: 35.0%",
      "stats", {"engine": None, "prefix_cache_hit_rate_pct": 35.0}, id="v1c-0.7.3"),
    p("INFO 03-18 12:00:10 [loggers.py:80] Avg prompt throughput: 410.2 tokens/s, Avg generation throughput: "
      "95.7 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%, Prefix cache hit rate: 35.0%",
      "stats", {"engine": None, "prompt_throughput": 410.2}, id="v1d-0.8.0"),
    p(real("003", "Engine 000"), "stats", {
        "engine": 0, "prompt_throughput": 1254.4, "generation_throughput": 29.2, "running": 10, "waiting": 4,
        "gpu_kv_cache_usage_pct": 57.9, "prefix_cache_hit_rate_pct": 40.5, "process": None,
    }, id="v1e-0.8.3-engine-prefix"),
    p(real("002", "10:13:31"), "stats", {
        "engine": 0, "prompt_throughput": 12068.8, "waiting": 33, "process": "APIServer",
    }, id="v1e-apiserver-process-prefix"),
    p("(APIServer pid=12345) INFO 11-18 12:00:10 [loggers.py:236] Engine 000: Avg prompt throughput: 1301.0 "
      "tokens/s, Avg generation throughput: 1924.0 tokens/s, Running: 30 reqs, Waiting: 0 reqs, Preemptions: 2, "
      "GPU KV cache usage: 4.8%, Prefix cache hit rate: 0.0%, MM cache hit rate: 50.1%", "stats", {
          "extra": {"preemptions": 2.0}, "unknown_fields": 0, "mm_cache_hit_rate_pct": 50.1,
      }, id="v1f-preemptions-mm-cache"),
    p(real("041", "03:42:34"), "stats", {"mm_cache_hit_rate_pct": 82.1, "prompt_throughput": 2165.9},
      id="v1f-mm-cache-real"),
    p(f"{HDR}Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, "
      "Running: 3 reqs, Waiting: 4 reqs, GPU KV cache usage: 5.5%, Prefix cache hit rate: 6.5%, Corrupted: 1 reqs, "
      "External prefix cache hit rate: 87.5%, MM cache hit rate: 10.0%", "stats", {
          "extra": {"corrupted": 1.0, "external_prefix_cache_hit_rate_pct": 87.5}, "unknown_fields": 0,
          "mm_cache_hit_rate_pct": 10.0, "prefix_cache_hit_rate_pct": 6.5,
      }, id="v1f-corrupted-external-prefix"),
    p("(APIServer pid=1) INFO 05-07 04:56:17 [loggers.py:271] Engine 000: Avg prompt throughput: 2.5 tokens/s, "
      "Avg generation throughput: 123.8 tokens/s, Running: 1 reqs, Waiting: 3 reqs, Deferred: 2 reqs, GPU KV "
      "cache usage: 17.5%, Prefix cache hit rate: 0.0%", "stats",
      {"waiting": 3, "extra": {"deferred": 2.0}, "unknown_fields": 0}, id="v1g-deferred"),
    p("(APIServer pid=1) INFO 09-30 08:00:10 [loggers.py:315] Engine 001: Avg prompt throughput: 880.0 tokens/s, "
      "Avg generation throughput: 640.3 tokens/s, Running: 12 reqs, Waiting: 0 reqs, XPU KV cache usage: 22.4%, "
      "Prefix cache hit rate: 61.2%", "stats",
      {"engine": 1, "device": "XPU", "gpu_kv_cache_usage_pct": 22.4, "cpu_kv_cache_usage_pct": None},
      id="v1h-xpu-engine-001"),
    *(p(V1_LINE.replace("GPU KV", f"{dev} KV"), "stats",
        {"device": dev, "gpu_kv_cache_usage_pct": 5.5, "cpu_kv_cache_usage_pct": None}, id=f"v1h-{dev.lower()}")
      for dev in ("TPU", "NPU", "HPU")),
    p(real("cpu", "19:23:55 [loggers.py:335]"), "stats", {
        "device": "CPU", "cpu_kv_cache_usage_pct": 1.0, "gpu_kv_cache_usage_pct": None, "running": 16,
        "waiting": 8, "prefix_cache_hit_rate_pct": 61.3, "swapped": None,
    }, id="v1h-cpu-backend-real-0.32"),
    p(V1_LINE.replace("GPU KV", "GPU + host KV"), "stats", {"gpu_kv_cache_usage_pct": 5.5},
      id="v1h-gpu-plus-host-device-word"),
    p(f"{HDR}Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, "
      "Running: 3 reqs, Waiting: 4 reqs, GPU KV cache usage: 5.5%", "stats",
      {"prefix_cache_hit_rate_pct": None, "gpu_kv_cache_usage_pct": 5.5, "extra": {}},
      id="v1i-0.31-no-prefix-cache-field"),
    p("(APIServer pid=1) INFO 11-02 12:00:10 [loggers.py:335] Engine 000: Avg prompt throughput: 96.3 tokens/s, "
      "Avg generation throughput: 410.9 tokens/s, Running: 8 reqs, Waiting: 2 reqs, KV fetch: 1 waiting to start, "
      "1 in progress, 0 completed waiting, GPU KV cache usage: 12.0%, External prefix cache hit rate: 87.5%",
      "stats", {
          "extra": {"kv_fetch_waiting": 1.0, "kv_fetch_in_progress": 1.0, "kv_fetch_completed_waiting": 0.0,
                    "external_prefix_cache_hit_rate_pct": 87.5},
          "unknown_fields": 0, "gpu_kv_cache_usage_pct": 12.0, "prefix_cache_hit_rate_pct": None,
      }, id="v1j-kv-fetch"),
    p("(APIServer pid=2386147) INFO 03-30 06:46:52 [loggers.py:259] 2 Engines Aggregated: Avg prompt throughput: "
      "24.2 tokens/s, Avg generation throughput: 11.3 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache "
      "usage: 0.4%, Prefix cache hit rate: 0.0%", "stats",
      {"engine": None, "engines_aggregated": 2, "prompt_throughput": 24.2}, id="aggregated-engines"),
    p(V1_LINE.replace("Engine 000", "Engine 1000"), "stats", {"engine": 1000}, id="engine-4-digits"),
    p("(RustFrontend pid=4242) INFO 11-02 12:00:10 [log_stats.rs:273] Avg prompt tput: 1301.0 toks/s, Avg "
      "generation tput: 1924.0 toks/s, Reqs Running: 30, Waiting: 0, GPU KV cache used: 4.8%, Prefix cache hit "
      "rate: 12.5%", "stats", {
          "process": "RustFrontend", "engine": None, "prompt_throughput": 1301.0, "generation_throughput": 1924.0,
          "running": 30, "waiting": 0, "gpu_kv_cache_usage_pct": 4.8, "prefix_cache_hit_rate_pct": 12.5,
          "unknown_fields": 0,
      }, id="rust-frontend"),
    p("(RustFrontend pid=4242) TRACE 11-02 12:00:10 [log_stats.rs:273] Avg prompt tput: 1.0 toks/s, Avg "
      "generation tput: 2.0 toks/s, Reqs Running: 3, Waiting: 4, Deferred: 1 reqs, Preemptions: 2, GPU KV cache "
      "used: 4.8%, Prefix cache hit rate: 12.5%, External prefix cache hit rate: 3.0%", "stats", {
          "level": "TRACE", "running": 3, "waiting": 4, "unknown_fields": 0,
          "extra": {"deferred": 1.0, "preemptions": 2.0, "external_prefix_cache_hit_rate_pct": 3.0},
      }, id="rust-frontend-optional-fields-trace"),
    # --- line prefixes (section 1) -------------------------------------------------------------
    p(json.dumps(JSON_RECORD), "stats", {**V1_FIELDS, "process": "MainProcess", "pid": 12,
                                       "stamp": "2026-11-02 12:00:10"}, id="json-0.32-formatter"),
    p("2026-11-02T12:00:10.123456789Z " + json.dumps(JSON_RECORD), "stats", {**V1_FIELDS, "stamp": "2026-11-02 12:00:10"},
      id="json-behind-docker-timestamp"),
    p("vllm-1  | " + json.dumps(JSON_RECORD), "stats", {**V1_FIELDS, "stamp": "2026-11-02 12:00:10"},
      id="json-behind-compose-prefix"),
    p(f"2026-11-02T12:00:10.123456789Z {V1_LINE}", "stats", V1, id="docker-timestamps"),
    p(f"vllm-1  | {V1_LINE}", "stats", V1, id="compose-prefix"),
    p(f"Nov 02 12:00:11 gpu-host-7 vllm[361991]: {V1_LINE}", "stats", V1, id="journald-prefix"),
    p(f"(RayWorkerWrapper(rank=0) pid=4321, ip=10.0.0.2) {V1_LINE.removeprefix('(APIServer pid=1) ')}",
      "stats", {**V1_FIELDS, "process": "RayWorkerWrapper(rank=0)", "pid": 4321}, id="ray-actor-nested-parentheses"),
    p(f"(ServeReplica:default:VLLMDeployment(model=llama) pid=1234, ip=10.0.0.1) {V1_LINE}", "stats", V1,
      id="ray-actor-around-vllm-prefix"),
    p(f"(VllmWorker rank=0 pid=77) INFO 11-02 12:00:10 [loggers.py:335] Engine 000: {V1_BODY}", "stats",
      {**V1_FIELDS, "process": "VllmWorker rank=0", "pid": 77}, id="process-name-with-space-and-equals"),
    p(f"(Worker_DP1_TP0_EP1 pid=77) INFO 11-02 12:00:10 [loggers.py:335] Engine 000: {V1_BODY}", "stats",
      {**V1_FIELDS, "process": "Worker_DP1_TP0_EP1"}, id="process-name-underscores-digits"),
    p(f"\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO 11-02 12:00:10 [loggers.py:335] Engine 000: {V1_BODY}",
      "stats", V1, id="ansi-0.4-coloured-process-prefix"),
    p(f"[1;36m(APIServer pid=1)[0;0m INFO 11-02 12:00:10 [loggers.py:335] Engine 000: {V1_BODY}",
      "stats", V1, id="ansi-without-esc-byte"),
    p("\x1b[0;36m(APIServer pid=1)\x1b[0;0m \x1b[32mINFO\x1b[0m \x1b[90m11-02 12:00:10\x1b[0m "
      f"\x1b[90m[loggers.py:335]\x1b[0m Engine 000: {V1_BODY}", "stats", V1, id="ansi-colored-formatter-whole-line"),
    p("[0;36m(APIServer pid=1)[0;0m [32mINFO[0m [90m11-02 12:00:10[0m "
      f"[90m[loggers.py:335][0m Engine 000: {V1_BODY}", "stats", V1,
      id="ansi-colored-formatter-without-esc"),
    p(f"\x1b[35mCRITICAL\x1b[0m \x1b[90m11-02 12:00:10\x1b[0m \x1b[90m[loggers.py:335]\x1b[0m Engine 000: {V1_BODY}",
      "stats", {**V1_FIELDS, "level": "CRITICAL"}, id="ansi-colored-level-without-process"),
    p(f"myapp: (APIServer pid=1) INFO 11-02 12:00:10 [loggers.py:335] Engine 000: {V1_BODY}", "stats", V1,
      id="logging-prefix-before-process-0.31"),
    p(f"(APIServer pid=1) [myapp] INFO 11-02 12:00:10 [loggers.py:335] Engine 000: {V1_BODY}", "stats", V1,
      id="logging-prefix-after-process-0.10"),
    p(f"(APIServer pid=1) DEBUG 11-02 12:00:10 [v1/metrics/loggers.py:259] Engine 000: {V1_BODY}", "stats",
      {**V1, "level": "DEBUG"}, id="debug-level-path-location"),
    p(f"{V1_LINE}\r\n", "stats", {**V1, "prefix_cache_hit_rate_pct": 6.5}, id="crlf"),
    p(f"{V1_LINE}\r", "stats", V1, id="continuation-cr"),
    p(f"{V1_LINE}   ", "stats", V1, id="trailing-padding"),
    p("INFO 11-02 12:00:10,123 [loggers.py:335] Engine 000: " + V1_BODY, "stats",
      {**V1_FIELDS, "process": None}, id="custom-format-with-milliseconds"),
    p(f"Engine 000: {V1_BODY}", "stats", {"engine": 0, "stamp": None, "level": None, "running": 3},
      id="custom-format-without-header"),
    # --- numbers and fields (section 9 rules 8, 10, 16) ----------------------------------------
    p(f"{HDR}Engine 000: Avg prompt throughput: nan tokens/s, Avg generation throughput: inf tokens/s, "
      "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: nan%, Prefix cache hit rate: -inf%", "stats",
      {"prompt_throughput": math.nan, "generation_throughput": math.inf, "gpu_kv_cache_usage_pct": math.nan,
       "prefix_cache_hit_rate_pct": -math.inf, "running": 1}, id="nan-inf-values"),
    p(f"{HDR}Engine 000: Avg prompt throughput: 1.0 tokens/s, Waiting: 4 reqs, GPU KV cache usage: 5.5%, "
      "Running: 3 reqs", "stats", {"running": 3, "waiting": 4, "prompt_throughput": 1.0, "unknown_fields": 0},
      id="fields-by-name-any-order"),
    p(f"{V1_LINE}, New cache hit rate: 12.5%, Scheduler steps: 42", "stats", {
        **V1, "extra": {"new_cache_hit_rate_pct": 12.5, "scheduler_steps": 42.0}, "unknown_fields": 2,
    }, id="unknown-fields-kept-and-counted"),
    p(f"{V1_LINE}, Mystery: n/a", "stats", {**V1, "unknown_fields": 1}, id="unknown-field-non-numeric"),
    p(f"{V1_LINE}, MM cache usage: 3.4%", "stats",
      {**V1, "mm_cache_hit_rate_pct": None, "extra": {"mm_cache_usage_pct": 3.4}, "unknown_fields": 1},
      id="mm-cache-usage-is-not-a-hit-rate"),
    # --- known field, unreadable value: counted as a parse error --------------------------------
    p(f"{HDR}Engine 000: Avg prompt throughput: abc tokens/s, Running: 3 reqs", "unparsed", {"what": "stats"},
      id="garbage-known-value"),
    p(f"{HDR}Engine 000: Avg prompt throughput: 1.0 tokens/s, Running: 1.5 reqs", "unparsed", {"what": "stats"},
      id="fractional-count"),
    p(f"{HDR}Engine 000: Avg prompt throughput: 1.0 tokens/s, Running: nan reqs", "unparsed", {"what": "stats"},
      id="nan-count"),
    p(f"{HDR}Engine 000: Avg prompt throughput: 1.0 tokens/s, KV fetch: some", "unparsed", {"what": "stats"},
      id="garbage-kv-fetch"),
    p(f"{HDR}Engine 000: Avg prompt throughput: ", "unparsed", {"what": "stats", "stamp": "11-02 12:00:10"},
      id="cut-off-stats-line"),
]

PREFIX_SPEC_CASES = [
    # --- V0 prefix-cache line (2.1.1, rule 12) -------------------------------------------------
    p("INFO 08-23 10:00:05 metrics.py:367] Prefix cache hit rate: GPU: 42.17%, CPU: 0.00%", "prefix",
      {"gpu_pct": 42.17, "cpu_pct": 0.0, "stamp": "08-23 10:00:05"}, id="v0-prefix-line"),
    p("INFO 08-23 10:00:05 metrics.py:367] Prefix cache hit rate: GPU: -100.00%, CPU: 12.50%", "prefix",
      {"gpu_pct": -100.0, "cpu_pct": 12.5}, id="v0-prefix-line-negative"),
    p(real("012", "Prefix cache hit rate"), "prefix", {"gpu_pct": 0.0, "cpu_pct": 90.0}, id="v0-prefix-real"),
    p(real("017", "metrics.py:367"), "prefix", {"gpu_pct": 26.68, "cpu_pct": 0.0}, id="v0-prefix-journald"),
    p("INFO 08-23 10:00:05 metrics.py:367] Prefix cache hit rate: GPU: lots, CPU: 0.00%", "unparsed",
      {"what": "prefix"}, id="v0-prefix-garbage"),
    # --- speculative decoding (section 3, rule 13) ---------------------------------------------
    p("INFO 04-06 12:00:10 [metrics.py:53] SpecDecoding metrics: Draft acceptance rate: 61.3%, Accepted: 1840 "
      "tokens, Drafted: 3000 tokens", "spec", {
          "format": "v1", "cumulative": False, "draft_acceptance_rate_pct": 61.3, "accepted_tokens": 1840,
          "drafted_tokens": 3000, "mean_acceptance_length": None, "per_position_acceptance_rate": None,
          "engine": None,
      }, id="spec-a-0.8.3"),
    p("INFO 04-06 12:00:10 [metrics.py:53] SpecDecoding metrics: Draft acceptance rate: nan%, Accepted: 0 "
      "tokens, Drafted: 0 tokens", "spec", {"draft_acceptance_rate_pct": math.nan, "accepted_tokens": 0},
      id="spec-a-nan"),
    p("INFO 05-28 12:00:10 [metrics.py:86] SpecDecoding metrics: Draft acceptance rate: 61.3%, Mean acceptance "
      "length: 2.84, Accepted: 1840 tokens, Drafted: 3000 tokens, Per-position acceptance rate: 0.781, 0.612, 0.447",
      "spec", {
          "format": "v1", "mean_acceptance_length": 2.84, "accepted_tokens": 1840, "drafted_tokens": 3000,
          "per_position_acceptance_rate": (0.781, 0.612, 0.447), "draft_acceptance_rate_pct": 61.3,
      }, id="spec-b-c-per-position-at-end"),
    p(real("019", "SpecDecoding"), "spec", {
        "format": "v1", "mean_acceptance_length": 2.63, "accepted_throughput": 76.8, "drafted_throughput": 235.49,
        "accepted_tokens": 768, "drafted_tokens": 2355,
        "per_position_acceptance_rate": (0.726, 0.467, 0.24, 0.134, 0.064), "draft_acceptance_rate_pct": 32.6,
        "process": "APIServer", "extra": {},
    }, id="spec-d-real-5-positions"),
    p(real("011", "SpecDecoding"), "spec", {
        "per_position_acceptance_rate": (0.615, 0.415, 0.169), "draft_acceptance_rate_pct": 40.0,
    }, id="spec-d-real-3-positions"),
    p("(APIServer pid=1) INFO 05-07 04:56:17 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: "
      "nan, Accepted throughput: 0.00 tokens/s, Drafted throughput: 0.00 tokens/s, Accepted: 0 tokens, Drafted: 0 "
      "tokens, Per-position acceptance rate: nan, nan, Avg Draft acceptance rate: nan%", "spec", {
          "mean_acceptance_length": math.nan, "per_position_acceptance_rate": (math.nan, math.nan),
          "draft_acceptance_rate_pct": math.nan, "accepted_tokens": 0,
      }, id="spec-d-nan"),
    p(real("034", "03:05:53"), "spec", {
        "format": "v0", "cumulative": True, "draft_acceptance_rate_pct": 20.0, "system_efficiency": 0.167,
        "num_speculative_tokens": 5, "accepted_tokens": 1, "drafted_tokens": 5, "emitted_tokens": 1,
    }, id="spec-v0-real"),
    p("INFO 08-23 10:00:05 metrics.py:373] Speculative metrics: Draft acceptance rate: 0.612, System efficiency: "
      "0.498, Number of speculative tokens: 5, Number of accepted tokens: 30600, Number of draft tokens tokens: "
      "50000, Number of emitted tokens tokens: 29880.", "spec", {
          "format": "v0", "draft_acceptance_rate_pct": 61.2, "drafted_tokens": 50000, "emitted_tokens": 29880,
          "accepted_tokens": 30600, "extra": {},
      }, id="spec-v0-tokens-tokens-typo"),
    p("INFO 08-23 10:00:05 metrics.py:373] Speculative metrics: Draft acceptance rate: nan, System efficiency: "
      "nan, Number of speculative tokens: 5, Number of accepted tokens: 0, Number of draft tokens: 0, Number of "
      "emitted tokens: 0.", "spec", {"draft_acceptance_rate_pct": math.nan, "system_efficiency": math.nan},
      id="spec-v0-nan"),
    p("(APIServer pid=1) INFO 11-02 12:00:10 [metrics.py:120] DiffusionDecoding metrics: Committed token "
      "throughput: 12.50 tokens/s, Mean denoising steps per canvas: 3.20, Mean tokens committed per denoising step: "
      "1.50, Committed: 125 tokens, Denoising steps: 80, Canvas positions evaluated: 1024", "spec", {
          "format": "diffusion", "extra": {
              "committed_token_throughput": 12.5, "mean_denoising_steps_per_canvas": 3.2,
              "mean_tokens_committed_per_denoising_step": 1.5, "committed": 125.0, "denoising_steps": 80.0,
              "canvas_positions_evaluated": 1024.0},
      }, id="diffusion-decoding"),
    p("INFO 05-28 12:00:10 [metrics.py:86] SpecDecoding metrics: Accepted: many tokens", "unparsed",
      {"what": "spec"}, id="spec-garbage"),
]

# KV / EC Transfer lines (section 4.1, rule 14): keys with spaces and parentheses, read by key.
NIXL_032 = ("Num successful transfers=42, Avg xfer time (ms)=3.214, P90 xfer time (ms)=5.87, Avg post time "
            "(ms)=0.412, P90 post time (ms)=0.9, Avg MB per transfer=18.5, Throughput (MB/s)=5756.3, Avg number of "
            "descriptors=320.0, Num failed transfers=0, Num KV expired reqs=0, Num notifs after expiry=0")
TRANSFER_CASES = [
    p(f"{HDR}KV Transfer metrics: {NIXL_032}", "transfer", {
        "cache": "kv", "engine": None, "successful_transfers": 42, "avg_transfer_ms": 3.214,
        "p90_transfer_ms": 5.87, "avg_post_ms": 0.412, "p90_post_ms": 0.9, "avg_mb_per_transfer": 18.5,
        "throughput_mb_per_s": 5756.3, "avg_descriptors": 320.0, "failed_transfers": 0, "expired_requests": 0,
        "notifications_after_expiry": 0, "failed_recvs": None, "extra": {}, "process": "APIServer",
        "stamp": "11-02 12:00:10",
    }, id="kv-transfer-nixl-0.32"),
    p(f"{HDR}KV Transfer metrics: num_successful_transfers=7", "transfer",
      {"successful_transfers": 7, "avg_transfer_ms": None}, id="kv-transfer-nixl-0.11.0"),
    p(f"{HDR}KV Transfer metrics: Num successful transfers=0, Avg xfer time (ms)=0, P90 xfer time (ms)=0, Avg MB "
      "per transfer=0, Throughput (MB/s)=0, Avg number of descriptors=0, Num failed transfers=2, Num failed "
      "recvs=1, Num KV expired reqs=3", "transfer",
      {"successful_transfers": 0, "failed_transfers": 2, "failed_recvs": 1, "expired_requests": 3},
      id="kv-transfer-mooncake-failures-only"),
    p(f"{HDR}KV Transfer metrics: NixlConnector={{'Num successful transfers': 3, 'Avg xfer time (ms)': 1.5}}, "
      "OffloadingConnector={'Num successful transfers': 2, 'vllm:offload_bytes:kind=cpu_count': 4, 'nested': "
      "{'a': 1}}", "transfer", {
          "successful_transfers": 5, "avg_transfer_ms": 1.5,
          "extra": {"offloadingconnector__vllm_offload_bytes_kind_cpu_count": 4.0},
      }, id="kv-transfer-multiconnector-dicts"),
    p(f"{HDR}KV Transfer metrics: vllm:kv_offload_total_bytes:transfer_type=GPU_to_CPU_sum=1048576", "transfer",
      {"extra": {"vllm_kv_offload_total_bytes_transfer_type_gpu_to_cpu_sum": 1048576.0}},
      id="kv-transfer-offloading-label-in-key"),
    p(f"{HDR}EC Transfer metrics: Num successful transfers=2, Avg xfer time (ms)=0.5", "transfer",
      {"cache": "ec", "successful_transfers": 2, "avg_transfer_ms": 0.5}, id="ec-transfer-0.31"),
    p(f"{HDR}Engine 001: KV Transfer metrics: Num successful transfers=2", "transfer", {"engine": 1},
      id="kv-transfer-engine-prefix"),
    p(f"{HDR}KV Transfer metrics: Num successful transfers=nan", "unparsed", {"what": "transfer"},
      id="kv-transfer-count-not-a-number"),
    p(f"{HDR}KV Transfer metrics: garbage without pairs", "unparsed", {"what": "transfer"},
      id="kv-transfer-garbage"),
    p(f"{HDR}KV Transfer metrics: C={{'a': 1", "unparsed", {"what": "transfer"}, id="kv-transfer-broken-dict"),
]

# Start-up facts (section 5, rules 16 and 18).
INFO_CASES = [
    p("(APIServer pid=116718) INFO 01-04 14:48:03 [api_server.py:1277] vLLM API server version "
      "0.13.0rc2.dev185+g00a8d7628", "info",
      {"vllm_version": "0.13.0rc2.dev185+g00a8d7628", "new_launch": True}, id="version-api-server"),
    p("(APIServer pid=1) INFO 02-26 10:00:00 [api_utils.py:300] vLLM server version 0.16.0, serving model "
      "meta-llama/Llama-3.1-8B-Instruct", "info",
      {"vllm_version": "0.16.0", "model": "meta-llama/Llama-3.1-8B-Instruct", "new_launch": True},
      id="version-and-model-no-logo"),
    p(real("cpu", "version 0.32.0"), "info", {"vllm_version": "0.32.0", "new_launch": True}, id="logo-version"),
    p(real("cpu", "  model   "), "info", {"model": "<workdir>/tiny-llama", "new_launch": False}, id="logo-model"),
    p(real("cpu", "non-default args"), "info", {
        "served_model_name": "tiny-llama", "port": 18000, "max_model_len": 1024, "model": "<workdir>/tiny-llama",
    }, id="non-default-args-served-name-list"),
    p("(APIServer pid=116718) INFO 01-04 14:48:03 [utils.py:253] non-default args: {'model_tag': 'x', "
      "'data_parallel_rpc_port': 13345, 'port': 8002, 'model': 'amd/Mixtral', 'max_model_len': 8192, "
      "'tensor_parallel_size': 2, 'api_server_count': 1}", "info", {
          "port": 8002, "model": "amd/Mixtral", "max_model_len": 8192, "tensor_parallel_size": 2,
          "api_server_count": 1,
      }, id="non-default-args-port-not-rpc-port"),
    p("INFO 05-05 10:00:00 api_server.py:150] args: Namespace(host=None, port=8000, model='facebook/opt-125m', "
      "served_model_name=None, tensor_parallel_size=4, disable_log_stats=True)", "info", {
          "port": 8000, "model": "facebook/opt-125m", "served_model_name": None, "tensor_parallel_size": 4,
          "stats_logging_disabled": True,
      }, id="args-namespace-disable-log-stats"),
    p("(EngineCore pid=29364) INFO 11-02 12:00:41 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: "
      "model='/m/tiny-llama', speculative_config=None, tokenizer='/m/tiny-llama', max_seq_len=1024, "
      "tensor_parallel_size=1, served_model_name=tiny-llama, enable_prefix_caching=True", "info", {
          "vllm_version": "0.32.0", "model": "/m/tiny-llama", "served_model_name": "tiny-llama",
          "max_model_len": 1024, "tensor_parallel_size": 1, "process": "EngineCore",
      }, id="engine-config-v1"),
    p("INFO 06-01 10:00:00 llm_engine.py:161] Initializing an LLM engine (v0.4.3) with config: "
      "model='facebook/opt-125m', speculative_config=None, tokenizer='facebook/opt-125m', tensor_parallel_size=1",
      "info", {"vllm_version": "0.4.3", "model": "facebook/opt-125m"}, id="engine-config-v0"),
    p("(EngineCore pid=212) INFO 11-02 12:00:52 [kv_cache_utils.py:1147] GPU KV cache size: 1,690,880 tokens, "
      "Maximum concurrency for 32,768 tokens per request: 51.60x", "info", {
          "kv_cache_device": "GPU", "kv_cache_tokens": 1690880, "max_concurrency": 51.6,
          "max_concurrency_tokens_per_request": 32768,
      }, id="kv-cache-size-and-concurrency-one-line"),
    p("(EngineCore pid=212) INFO 11-02 12:00:52 [kv_cache_utils.py:1147] GPU + host KV cache size: 1,690,880 "
      "tokens, Maximum concurrency for 32,768 tokens per request: 51.60x", "info",
      {"kv_cache_device": "GPU + host", "kv_cache_tokens": 1690880}, id="kv-cache-size-gpu-plus-host"),
    p(real("cpu", "CPU KV cache size"), "info", {
        "kv_cache_device": "CPU", "kv_cache_tokens": 524288, "max_concurrency": 512.0,
        "max_concurrency_tokens_per_request": 1024,
    }, id="kv-cache-size-cpu-real"),
    p(real("058", "GPU KV cache size"), "info", {"kv_cache_tokens": 42656, "process": "EngineCore_DP0"},
      id="kv-cache-size-thousands-real"),
    p(real("058", "Maximum concurrency"), "info",
      {"max_concurrency": 1.3, "max_concurrency_tokens_per_request": 32768}, id="concurrency-own-line"),
    p("INFO 01-13 11:35:23 gpu_executor.py:80] Maximum concurrency for 8192 tokens per request: 11.12x", "info",
      {"max_concurrency": 11.12, "max_concurrency_tokens_per_request": 8192}, id="concurrency-v0-plain"),
    p("INFO 01-13 11:35:23 gpu_executor.py:76] # GPU blocks: 5691, # CPU blocks: 2048", "info",
      {"gpu_blocks": 5691, "cpu_blocks": 2048}, id="gpu-blocks-v0"),
    p("INFO 02-13 11:35:23 [executor_base.py:76] # CUDA blocks: 5691, # CPU blocks: 2048", "info",
      {"gpu_blocks": 5691, "cpu_blocks": 2048}, id="cuda-blocks-v0-0.7"),
    p("INFO 01-13 11:35:23 kv_cache_utils.py:76] # GPU blocks: 5691", "info", {"gpu_blocks": 5691},
      id="gpu-blocks-v1-0.6"),
    p(real("049", "Available KV cache memory"), "info", {"available_kv_cache_gib": 26.91},
      id="available-kv-memory"),
    p("(EngineCore pid=212) INFO 11-02 12:00:40 [gpu_model_runner.py:5088] Model loading took 15.27 GiB memory "
      "and 6.431210 seconds", "info", {"model_load_gib": 15.27, "model_load_seconds": 6.43121},
      id="model-loading-0.14"),
    p("(EngineCore pid=212) INFO 11-02 12:00:40 [gpu_model_runner.py:5088] Model loading took 15.3 GiB and "
      "6.431210 seconds", "info", {"model_load_gib": 15.3}, id="model-loading-runner-v2"),
    p("INFO 11-18 12:00:40 [gpu_model_runner.py:1100] Model loading took 14.9888 GiB memory and 6.431210 seconds",
      "info", {"model_load_gib": 14.9888}, id="model-loading-0.11"),
    p("INFO 03-18 12:00:40 [model_runner.py:1110] Model loading took 14.9888 GB and 6.431210 seconds", "info",
      {"model_load_gib": 14.9888, "model_load_seconds": 6.43121}, id="model-loading-0.8-gb-is-gib"),
    p("INFO 03-01 12:00:40 model_runner.py:110] Loading model weights took 14.9888 GB", "info",
      {"model_load_gib": 14.9888}, id="loading-model-weights-0.4-gb-is-gib"),
    p(real("cpu", "Loading weights took"), "info", {"weights_load_seconds": 0.01, "process": "Worker"},
      id="loading-weights"),
    p(real("049", "Graph capturing finished"), "info", {"graph_capture_seconds": 14.0, "graph_capture_gib": 0.84},
      id="graph-capture"),
    p("INFO 03-01 12:01:10 model_runner.py:1110] Graph capturing finished in 12 secs.", "info",
      {"graph_capture_seconds": 12.0, "graph_capture_gib": None}, id="graph-capture-old"),
    p(real("049", "init engine"), "info", {"init_engine_seconds": 44.51}, id="init-engine-seconds"),
    p("(EngineCore pid=212) INFO 11-02 12:01:11 [core.py:405] init engine (profile, create kv cache, warmup model) "
      "took 31.06 s (compilation: 14.20 s — language_model: 10.00 s, encoder: 4.20 s)", "info",
      {"init_engine_seconds": 31.06}, id="init-engine-em-dash"),
    p(real("049", "torch.compile takes"), "info", {"torch_compile_seconds": 18.4}, id="torch-compile-takes"),
    p("INFO 03-20 12:00:00 [monitor.py:34] torch.compile took 18.40 s in total", "info",
      {"torch_compile_seconds": 18.4}, id="torch-compile-took"),
    p("INFO 10-18 12:00:00 [monitor.py:34] [backbone] torch.compile took 18.40 s in total", "info",
      {"torch_compile_seconds": 18.4}, id="torch-compile-tagged"),
    p("INFO 11-02 12:00:00 [model.py:2152] Using max model len 1024", "info", {"max_model_len": 1024},
      id="max-model-len"),
    p(real("cpu", "Starting vLLM server on"), "info", {"server_listening": True, "port": 18000},
      id="starting-server-0.18"),
    p("INFO 02-20 12:01:13 api_server.py:139] Starting vLLM API server on http://0.0.0.0:8000", "info",
      {"server_listening": True, "port": 8000}, id="starting-api-server-0.7"),
    p("INFO 07-01 12:01:13 [api_server.py:1024] Starting vLLM API server 0 on http://[::]:8001", "info",
      {"server_listening": True, "port": 8001}, id="starting-api-server-index-ipv6"),
    p("INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)", "info",
      {"server_listening": True, "port": 8000, "stamp": None}, id="uvicorn-running"),
    p("(APIServer pid=1) INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)", "info",
      {"server_listening": True, "port": 8000}, id="uvicorn-running-process-prefix"),
    p("INFO:     Application startup complete.", "info", {"server_listening": True}, id="uvicorn-startup-complete"),
    p("(APIServer pid=1) WARNING 11-02 12:00:10 [async_llm.py:150] AsyncLLM created with api_server_count more "
      "than 1; disabling stats logging to avoid incomplete stats.", "info",
      {"stats_logging_disabled": True, "level": "WARNING"}, id="api-server-count-disables-stats"),
    p("INFO 11-02 12:00:10 [api_server.py:150] Defaulting api_server_count to data_parallel_size (4).", "info",
      {"api_server_count": 4}, id="defaulting-api-server-count"),
]

ACCESS_CASES = [
    p('INFO:     127.0.0.1:50000 - "POST /v1/chat/completions HTTP/1.1" 200 OK', "access",
      {"method": "POST", "path": "/v1/chat/completions", "status": 200}, id="uvicorn-access"),
    p(real("019", '"POST'), "access", {"method": "POST", "status": 200}, id="access-process-prefix"),
    p(real("041", "500 Internal"), "access", {"status": 500, "path": "/v1/chat/completions"},
      id="access-500-reason-phrase"),
    p('INFO:     10.1.2.3:50000 - "GET /v1/models?limit=5&secret=abc HTTP/1.1" 200 OK', "access",
      {"method": "GET", "path": "/v1/models"}, id="access-query-dropped"),
    p('INFO:     [2001:db8::1]:50000 - "GET /health HTTP/1.1" 200 OK', "access", {"path": "/health"},
      id="access-ipv6-client"),
    p(real("017", '"POST /v1/chat/completions HTTP/1.1"'), "access", {"status": 200}, id="access-journald"),
    p(real("021", "....INFO:"), "access", {"path": "/v1/completions"}, id="access-after-tqdm-dots"),
    p('\x1b[32mINFO\x1b[0m:     127.0.0.1:50000 - "GET /metrics HTTP/1.1" \x1b[32m200 OK\x1b[0m', "access",
      {"path": "/metrics", "status": 200}, id="access-uvicorn-tty-colours"),
    p(json.dumps({"asctime": "2026-11-02 12:00:11,000", "levelname": "INFO", "name": "uvicorn.access",
                  "processName": "MainProcess", "process": 1,
                  "message": '127.0.0.1:50000 - "GET /health?x=1 HTTP/1.1" 200'}),
      "access", {"path": "/health", "status": 200, "stamp": "2026-11-02 12:00:11"}, id="access-json"),
]

PROBLEM_TAGS = {
    "engine_fatal", "engine_start_failed", "engine_dead", "process_died", "out_of_memory", "no_kv_memory",
    "kv_cache_too_small", "preemption", "stats_logging_disabled",
}
# Failure lines (section 6): a LogMessage with a tag, never their text.
LOG_CASES = [
    p(real("021", "EngineCore encountered a fatal error"), "log",
      {"problem": "engine_fatal", "level": "ERROR", "location": "core.py:517", "process": "EngineCore_0"},
      id="engine-core-fatal-real"),
    p(f"{ERR}EngineCore failed to start.", "log", {"problem": "engine_start_failed"}, id="engine-core-failed-start"),
    p("(APIServer pid=1) ERROR 11-02 12:00:10 [api_server.py:9] RuntimeError: Engine core initialization failed. "
      "See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}", "log", {"problem": "engine_start_failed"},
      id="engine-core-initialization-failed"),
    p(real("021", "EngineDeadError"), "log", {"problem": "engine_dead"}, id="engine-dead-error-real"),
    p(real("021", "output_handler failed"), "log", {"problem": "engine_dead", "location": "async_llm.py:420"},
      id="output-handler-failed-real"),
    p(f"{ERR}Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.", "log",
      {"problem": "process_died"}, id="engine-proc-died"),
    p(f"{ERR}RuntimeError: Engine core process EngineCore_DP0 died unexpectedly.", "log",
      {"problem": "process_died"}, id="engine-proc-died-0.20"),
    p(f"{ERR}Worker proc VllmWorker-0 died unexpectedly, shutting down executor.", "log",
      {"problem": "process_died"}, id="worker-died"),
    p(f"{ERR}Worker proc VllmWorker-3 died unexpectedly (exit code: -9), shutting down executor.", "log",
      {"problem": "process_died"}, id="worker-died-exit-code"),
    p("ERROR 05-05 10:00:00 async_llm_engine.py:61] Engine background task failed", "log",
      {"problem": "engine_dead"}, id="v0-engine-background-task-failed"),
    p("ERROR 05-05 10:00:00 async_llm_engine.py:61] AsyncEngineDeadError: Background loop has errored already.",
      "log", {"problem": "engine_dead"}, id="v0-background-loop"),
    p("ERROR 05-05 10:00:00 client.py:300] MQLLMEngineDeadError: Engine loop is not running. Inspect the stacktrace "
      "to find the original error: RuntimeError('x').", "log", {"problem": "engine_dead"}, id="v0-mq-engine-dead"),
    p(f"{ERR}Failed to load model - not enough GPU memory. Try lowering --gpu-memory-utilization to free memory "
      "for weights, increasing --tensor-parallel-size, or using --quantization.", "log",
      {"problem": "out_of_memory"}, id="oom-loading-weights"),
    p(f"{ERR}RuntimeError: CUDA out of memory occurred when warming up sampler with 256 dummy requests. Please try "
      "lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.", "log",
      {"problem": "out_of_memory"}, id="oom-sampler-warmup"),
    p(f"{ERR}torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
      "of 79.15 GiB", "log", {"problem": "out_of_memory"}, id="oom-torch"),
    p(f"{ERR}torch.cuda.OutOfMemoryError: CUDA out of memory.", "log", {"problem": "out_of_memory"},
      id="oom-torch-cuda"),
    p(f"{ERR}ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
      "initializing the engine.", "log", {"problem": "no_kv_memory"}, id="no-kv-memory"),
    p(f"{ERR}ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be "
      "stored in KV cache (16000). Try increasing `gpu_memory_utilization`.", "log",
      {"problem": "kv_cache_too_small"}, id="kv-too-small-v0"),
    p(f"{ERR}ValueError: To serve at least one request with the models's max seq len (8192), (1.00 GiB KV cache "
      "is needed, which is larger than the available KV cache memory (0.50 GiB).", "log",
      {"problem": "kv_cache_too_small"}, id="kv-too-small-v1"),
    p("WARNING 05-05 10:00:00 scheduler.py:1089] Sequence group cmpl-42 is preempted by PreemptionMode.RECOMPUTE "
      "mode because there is not enough KV cache space. total_num_cumulative_preemption=51", "log",
      {"problem": "preemption", "level": "WARNING", "location": "scheduler.py:1089"}, id="v0-preemption-warning"),
    p(real("049", "Unable to detect current VLLM config"), "log",
      {"problem": None, "level": "WARNING", "location": "utils.py:101"}, id="plain-warning"),
    p("(Worker pid=9) WARNING 11-02 12:00:10 [model_executor/.../quantization/utils/fp8_utils.py:123] Using "
      "default W8A8 Block FP8 kernel config.", "log",
      {"location": "model_executor/.../quantization/utils/fp8_utils.py:123", "process": "Worker"},
      id="debug-style-elided-path-location"),
    p(real("021", "Traceback", 0), "log", {"problem": None, "level": "ERROR"}, id="traceback-header-line"),
    p("CRITICAL 11-02 12:00:10 [launcher.py:99] MQLLMEngine is already dead, terminating server process", "log",
      {"level": "CRITICAL"}, id="critical"),
    p("ERROR:    Exception in ASGI application", "log", {"level": "ERROR", "problem": None},
      id="uvicorn-error"),
    p("WARNING:  Invalid HTTP request received.", "log", {"level": "WARNING"}, id="uvicorn-warning"),
]

NONE_CASES = [
    p(real("026", "Added request"), "request",
      {"event": "added", "request_id": "chatcmpl-6a2e591b-e842-41b9-8269-46672ef25479"}, id="added-request"),
    p(real("cpu", "Resolved architecture"), None, id="plain-info-process-prefix"),
    p(real("cpu", "Route: /health"), None, id="route-line"),
    p(real("049", "Capturing CUDA graphs"), None, id="tqdm-bar"),
    p(real("cpu", "Loading safetensors checkpoint shards: 100%"), None, id="tqdm-shards"),
    p("Traceback (most recent call last):", None, id="traceback-no-header"),
    p('  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 508, in run_engine_core', None,
      id="traceback-frame-no-header"),
    p("    engine_core.run_busy_loop()", None, id="traceback-code-no-header"),
    p(real("021", "UserWarning"), None, id="python-warning-line"),
    p("", None, id="empty"),
    p("\r\n", None, id="crlf-only"),
    p("   \t ", None, id="blank"),
    p(_read("017")[0], None, id="truncated-access-line-017"),
    # `Engine 000: vllm cache_config_info ...` starts like a stats line but is not one: a start-up fact.
    p(real("049", "cache_config_info"), "info", {"gpu_blocks": 15745}, id="lookalike-cache-config-info"),
    p("(APIServer pid=1) INFO 11-02 12:00:10 [loggers.py:250] 4 Engines: vllm cache_config_info with "
      "initialization after num_gpu_blocks is: 15745", "info", {"gpu_blocks": 15745},
      id="lookalike-cache-config-info-aggregated"),
    p(f"{HDR}MM cache usage: 3.4%", None, id="lookalike-mm-cache-usage"),
    p(f"{HDR}Engine 000: MM cache usage: 3.4%, MM cache hit rate: 10.0%", None, id="lookalike-mm-cache-usage-engine"),
    p(f"{HDR}Using FLASH_ATTN MLA prefill backend.", None, id="lookalike-mla-prefill-backend"),
    p(f"{HDR}Using Torch SDPA backend for ViT model.", None, id="lookalike-vit-backend"),
    # MFU lines (--enable-mfu-metrics) are their own event, never a stats line.
    p("(APIServer pid=1) INFO 11-02 12:00:10 [perf.py:335] Engine 000: MFU: 12.3 TF/s/device 45.6 GB/s/device",
      "mfu", {"engine": 0, "tflops_per_device": 12.3, "gbps_per_device": 45.6}, id="mfu-0.30"),
    p("(APIServer pid=1) INFO 11-02 12:00:10 [perf.py:1651] Engine 001: MFU: 123.4 TF/s/GPU 456.7 GB/s/GPU",
      "mfu", {"engine": 1, "tflops_per_device": 123.4, "gbps_per_device": 456.7}, id="mfu-0.14"),
    p("(RustFrontend pid=4) INFO 11-02 12:00:10 [log_stats.rs:280] MFU: 1.5 TF/s/GPU 2.0 GB/s/GPU",
      "mfu", {"engine": None, "tflops_per_device": 1.5}, id="mfu-rust"),
    p(f"{HDR}Engine 000: MFU: twelve TF/s/device", "unparsed", {"what": "mfu"}, id="mfu-unreadable"),
    p(f"{HDR}Engine 000: Iteration(5): 1 context requests, 100 context tokens, 2 generation requests, 2 generation "
      "tokens, iteration elapsed time: 12.34 ms (dummy), GPU KV cache usage: 1.0%", "iteration",
      {"engine": 0, "iteration": 5, "context_requests": 1, "context_tokens": 100, "generation_requests": 2,
       "generation_tokens": 2, "elapsed_ms": 12.34, "dummy": True, "kv_cache_usage_pct": 1.0, "device": "GPU"},
      id="iteration-0.26"),
    p("(EngineCore_DP0 pid=1) INFO 11-02 12:00:10 [core.py:335] Iteration(5): 1 context requests, 100 context "
      "tokens, 2 generation requests, 2 generation tokens, iteration elapsed time: 12.34 ms", "iteration",
      {"engine": None, "elapsed_ms": 12.34, "dummy": False, "kv_cache_usage_pct": None}, id="iteration-0.14"),
    p("(APIServer pid=1) INFO 11-02 12:00:10 [cuda_graph.py:33] **CUDAGraph Stats:**", None, id="cudagraph-title"),
    p("(APIServer pid=1) INFO 11-02 12:00:10 [cuda_graph.py:33] | Unpadded Tokens | Padded Tokens | Num Paddings "
      "| Runtime Mode | Count |", None, id="cudagraph-table-header"),
    p("(APIServer pid=1) INFO 11-02 12:00:10 [cuda_graph.py:33] | 4 | 8 | 4 | FULL | 12 |", None,
      id="cudagraph-table-row"),
    p("(APIServer pid=1) INFO 11-02 12:00:10 [cuda_graph.py:33] - Capture sizes: [1, 2, 4, 8]", None,
      id="cudagraph-capture-sizes"),
    p(real("cpu", "api_utils.py:347]        "), None, id="logo-art-line"),
    p("(APIServer pid=29214) INFO 11-29 19:23:35 [api_utils.py:347] ", None, id="logo-empty-line"),
    p("[2025-08-14 22:22:32,227] LMCache INFO: Stored 471 out of total 471 tokens. size: 0.0575 gb", None,
      id="lmcache-third-party"),
    p("INFO:     Started server process [12345]", None, id="uvicorn-started"),
    p("INFO:     Shutting down", None, id="uvicorn-shutting-down"),
    p("{not json at all}", None, id="braces-not-json"),
    p('{"levelname": "INFO", "message": 42}', None, id="json-without-text-message"),
    p("[1, 2, 3]", None, id="json-array"),
]

ALL_CASES = (
    STATS_CASES + PREFIX_SPEC_CASES + TRANSFER_CASES + INFO_CASES + ACCESS_CASES + LOG_CASES + NONE_CASES
)


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    if isinstance(want, float):
        return bool(got == pytest.approx(want))
    if isinstance(want, tuple):
        return isinstance(got, tuple) and len(got) == len(want) and all(map(_same, got, want))
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want)
    return bool(got == want)


def check(event: Event | None, kind: str | None, fields: dict[str, Any]) -> None:
    if kind is None:
        assert event is None, event
        return
    assert event is not None
    assert event.kind == kind, event
    for name, want in fields.items():
        got = getattr(event, name)
        assert _same(got, want), f"{name}: got {got!r}, want {want!r}"


@pytest.mark.parametrize(("line", "kind", "fields"), ALL_CASES)
def test_parse_line_table(line: str, kind: str | None, fields: dict[str, Any]) -> None:
    check(parse_line(line), kind, fields)


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[A-Za-z]{6,}", text)}


@pytest.mark.parametrize(("line", "kind", "fields"), LOG_CASES)
def test_log_message_holds_no_message_text(line: str, kind: str | None, fields: dict[str, Any]) -> None:
    """Logs hold users' prompts: a LogMessage keeps level, location, process, a tag and an exception's
    type (the line's first word, a dotted name), never the text."""
    event = parse_line(line)
    assert isinstance(event, LogMessage)
    assert event.problem is None or event.problem in PROBLEM_TAGS
    kept = json.dumps({k: v for k, v in asdict(event).items() if k not in {"problem", "location", "process", "exception"}})
    message = line.split("] ", 1)[-1] if "] " in line else line
    assert event.exception is None or (re.fullmatch(r"[\w.]+", event.exception) and message.startswith(
        (f"{event.exception}: ", event.exception)))
    leaked = {w for w in _words(message) if w in kept and w != event.level}
    assert not leaked, leaked


@pytest.mark.parametrize(("line", "kind", "fields"), ACCESS_CASES)
def test_access_keeps_no_client_or_query(line: str, kind: str | None, fields: dict[str, Any]) -> None:
    event = parse_line(line)
    assert isinstance(event, HttpAccess)
    dumped = json.dumps(asdict(event))
    for secret in ("127.0.0.1", "10.1.2.3", "2001:db8", "172.31.0.1", "10.10.7.200", "50000", "secret", "?"):
        assert secret not in dumped


def test_every_rule_and_variant_has_a_row() -> None:
    """The table keeps one row per variant: a deleted row is a lost guarantee."""
    ids = {case.id for case in ALL_CASES}
    for needed in (
        "v0-0.2.7-llm_engine.py-trailing-spaces", "v0-trailing-period", "v0-bracketed-0.8", "v1a-0.7.0-stub-trailing-space",
        "v1b-0.7.1-missing-comma-trailing-period", "v1c-0.7.3", "v1d-0.8.0", "v1e-0.8.3-engine-prefix",
        "v1f-preemptions-mm-cache", "v1g-deferred", "v1h-xpu-engine-001", "v1h-cpu-backend-real-0.32",
        "v1i-0.31-no-prefix-cache-field", "v1j-kv-fetch", "aggregated-engines", "engine-4-digits", "rust-frontend",
        "json-0.32-formatter", "journald-prefix", "docker-timestamps", "compose-prefix",
        "ray-actor-nested-parentheses", "ansi-without-esc-byte", "ansi-colored-formatter-whole-line",
        "logging-prefix-before-process-0.31", "logging-prefix-after-process-0.10", "debug-level-path-location",
        "crlf", "nan-inf-values", "unknown-fields-kept-and-counted", "garbage-known-value", "v0-prefix-line",
        "v0-prefix-line-negative", "spec-a-0.8.3", "spec-b-c-per-position-at-end", "spec-d-nan",
        "spec-v0-tokens-tokens-typo", "diffusion-decoding", "truncated-access-line-017", "kv-transfer-nixl-0.32",
        "kv-transfer-nixl-0.11.0", "kv-transfer-mooncake-failures-only", "kv-transfer-multiconnector-dicts",
        "kv-transfer-offloading-label-in-key", "ec-transfer-0.31",
    ):
        assert needed in ids


# --- the Assembler (scan.Assembler): state between lines ----------------------------------------------

V0_STATS = ("INFO 05-25 06:50:29 [metrics.py:486] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
            "15.5 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%, CPU KV "
            "cache usage: 0.1%.")
V0_PREFIX = "INFO 05-25 06:50:29 [metrics.py:502] Prefix cache hit rate: GPU: 12.50%, CPU: 90.00%"
SPEC = ("(APIServer pid=1) INFO 11-02 12:00:10 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: 2.20, "
        "Accepted throughput: 15.60 tokens/s, Drafted throughput: 38.99 tokens/s, Accepted: {n} tokens, Drafted: "
        "195 tokens, Per-position acceptance rate: 0.615, 0.415, 0.169, Avg Draft acceptance rate: 40.0%")


def assemble(lines: Iterable[str], *, hold: bool = True) -> list[Event]:
    assembler = Assembler("x.log", hold=hold)
    out: list[Event] = []
    for number, line in enumerate(lines, 1):
        event = parse_line(line)
        if event is not None:
            out.extend(assembler.feed(event, number))
    return out + assembler.flush()


def test_v0_prefix_line_merged_when_stamps_match() -> None:
    events = assemble([V0_STATS, V0_PREFIX])
    assert [e.kind for e in events] == ["stats"]
    stats = events[0]
    assert isinstance(stats, EngineStats)
    assert (stats.prefix_cache_hit_rate_pct, stats.prefix_cache_hit_rate_cpu_pct) == (12.5, 90.0)
    assert (stats.file, stats.line) == ("x.log", 1)


def test_v0_prefix_line_real_012() -> None:
    events = list(iter_events(_read("012"), "012.log"))
    assert [e.kind for e in events] == ["stats"] * 3
    assert all(isinstance(e, EngineStats) and e.prefix_cache_hit_rate_cpu_pct == 90.0 for e in events)
    assert [e.line for e in events] == [1, 3, 5]


def test_v0_prefix_line_not_merged_across_stamps_or_processes() -> None:
    later = V0_PREFIX.replace("06:50:29", "06:50:30")
    events = assemble([V0_STATS, later])
    assert [e.kind for e in events] == ["stats", "prefix"]
    assert isinstance(events[0], EngineStats) and events[0].prefix_cache_hit_rate_pct is None
    other = "(VllmWorkerProcess pid=3) " + V0_PREFIX
    assert [e.kind for e in assemble([V0_STATS, other])] == ["stats", "prefix"]
    assert [e.kind for e in assemble([V0_PREFIX])] == ["prefix"]


def test_v0_held_record_flushed_before_the_next_record() -> None:
    access = 'INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 200 OK'
    events = assemble([V0_STATS, access, V0_PREFIX])
    assert [e.kind for e in events] == ["stats", "access", "prefix"]


def test_hold_false_passes_prefix_event_through() -> None:
    events = assemble([V0_STATS, V0_PREFIX], hold=False)
    assert [e.kind for e in events] == ["stats", "prefix"]
    assert isinstance(events[1], PrefixCacheRates) and events[1].line == 2


def test_spec_line_gets_engine_of_preceding_stats_line_of_same_process() -> None:
    e0 = V1_LINE
    e1 = V1_LINE.replace("Engine 000", "Engine 001")
    kv = "(APIServer pid=1) INFO 11-02 12:00:10 [metrics.py:108] KV Transfer metrics: Num successful transfers=4"
    events = assemble([e0, SPEC.format(n=1), kv, e1, SPEC.format(n=2), kv])
    spec = [e for e in events if isinstance(e, SpecDecodeStats)]
    assert [(s.engine, s.accepted_tokens) for s in spec] == [(0, 1), (1, 2)]
    assert [e.kind for e in events] == ["stats", "spec", "transfer", "stats", "spec", "transfer"]
    assert [e.engine for e in events if isinstance(e, TransferStats)] == [0, 1]


def test_spec_line_attribution_is_per_process() -> None:
    a0 = V1_LINE.replace("(APIServer pid=1)", "(ApiServer_0 pid=5)")
    a1 = V1_LINE.replace("(APIServer pid=1)", "(ApiServer_1 pid=6)").replace("Engine 000", "Engine 003")
    spec_a0 = SPEC.format(n=7).replace("(APIServer pid=1)", "(ApiServer_0 pid=5)")
    events = assemble([a0, a1, spec_a0])
    spec = [e for e in events if isinstance(e, SpecDecodeStats)]
    assert [s.engine for s in spec] == [0]
    assert [s.engine for s in assemble([SPEC.format(n=1)]) if isinstance(s, SpecDecodeStats)] == [None]


def test_traceback_counted_once_real_021() -> None:
    """Three tracebacks (two interleaved EngineCore ones, one AsyncLLM one): three log events."""
    events = [e for e in iter_events(_read("021"), "021.log") if isinstance(e, LogMessage)]
    assert [(e.process, e.problem, e.line) for e in events] == [
        ("EngineCore_0", "engine_fatal", 4), ("EngineCore_1", "engine_fatal", 7), (None, "engine_dead", 18),
    ]


def test_interleaved_tracebacks_each_keep_their_exception_type_real_021() -> None:
    """Two processes' tracebacks interleaved line by line: each record keeps its own exception type."""
    events = [e for e in iter_events(_read("021"), "021.log") if isinstance(e, LogMessage)]
    assert [(e.line, e.exception) for e in events] == [
        (4, "AttributeError"), (7, "AttributeError"), (18, "vllm.v1.engine.exceptions.EngineDeadError")]


def test_a_record_held_for_its_traceback_keeps_its_place() -> None:
    """Offline holds a fault's record until its traceback ends (to keep the exception type), and gives it
    before the next record; live (`hold=False`) gives it at once, without the type."""
    info = "(EngineCore_DP0 pid=7) INFO 11-02 12:00:10 [s.py:171] "
    lines = [f"{info}[FT] Engine 0 status -> UNHEALTHY:", f"{info}Traceback (most recent call last):",
             f"{info}  File \"/x/core.py\", line 1, in run", f"{info}RuntimeError: boom", V1_LINE,
             f"{info}RuntimeError: no record of its own"]
    events = assemble(lines)
    assert [(e.kind, e.line) for e in events] == [("info", 1), ("stats", 5)]
    assert isinstance(events[0], ServerInfo) and events[0].exception == "RuntimeError"
    live = assemble(lines, hold=False)
    assert [(e.kind, e.line) for e in live] == [("info", 1), ("stats", 5)]
    assert isinstance(live[0], ServerInfo) and live[0].exception is None


@pytest.mark.parametrize(("msg", "want"), [
    ("torch.AcceleratorError: CUDA error: an illegal memory access was encountered", "torch.AcceleratorError"),
    ("KeyboardInterrupt", "KeyboardInterrupt"),
    ("asyncio.exceptions.CancelledError:", "asyncio.exceptions.CancelledError"),
    ("Route: /health, Methods: GET", None),
    ("Traceback (most recent call last):", None),
    ("EngineCore failed to start.", None),
    ("a.b.SomeError with words: x", None),
    ("x." * 80 + "LongError: y", None),  # longer than EXCEPTION_CHARS
])
def test_exception_of(msg: str, want: str | None) -> None:
    assert exception_of(msg) == want


def test_traceback_continuation_with_new_problem_is_reported() -> None:
    lines = [
        f"{ERR}EngineCore failed to start.",
        f"{ERR}Traceback (most recent call last):",
        f'{ERR}  File "/x/core.py", line 1, in run',
        f"{ERR}torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    ]
    assert [e.problem for e in assemble(lines) if isinstance(e, LogMessage)] == [
        "engine_start_failed", "out_of_memory"]


def test_separate_error_records_each_counted() -> None:
    first = f"{ERR}Something failed"
    later = first.replace("12:00:10", "12:00:11")
    other_place = first.replace("core.py:900", "core.py:901")
    assert len(assemble([first, f"{ERR}  detail", later, other_place])) == 3
    # a record of the same process in between ends the multi-line record
    same_proc_info = f"(EngineCore_DP0 pid=7) INFO 11-02 12:00:10 [core.py:1] Engine 000: {V1_BODY}"
    assert [e.kind for e in assemble([first, same_proc_info, first])] == ["log", "stats", "log"]


def test_assembler_gives_time_with_a_clock() -> None:
    from zoneinfo import ZoneInfo

    from vllm_logwatch.parsing.stamps import YearClock

    events = list(iter_events([V1_LINE, 'INFO:     1.2.3.4:5 - "GET / HTTP/1.1" 200 OK'], "f.log",
                              YearClock(2026, ZoneInfo("UTC"))))
    assert events[0].time is not None and events[0].time.isoformat() == "2026-11-02T12:00:10+00:00"
    assert events[1].time is None and events[1].line == 2


# --- robustness: parse_line never raises -----------------------------------------------------------

_REAL_STATS = sorted({
    line for name in ("002", "004", "010", "011", "012", "017", "019", "021", "026", "034", "041", "047", "cpu")
    for line in _read(name) if "throughput" in line or "metrics:" in line or "hit rate" in line
})
_MUTATION_SEEDS = _REAL_STATS + [case.values[0] for case in TRANSFER_CASES]
_GARBAGE = ["nan", "-inf", "inf", "1e999", "-1", "99999999999999999999999999", "1,2,3", "%", "", ", ", ": ",
            "\x00", "\x1b[0m", "\u2588", "reqs", "tokens/s", "(x pid=1)", "]", "[", "{", "}", "é", "\r"]
_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _assert_event_or_none(result: object) -> None:
    assert result is None or isinstance(
        result, (EngineStats, PrefixCacheRates, SpecDecodeStats, TransferStats, ServerInfo, HttpAccess, LogMessage,
                 Unparsed))


@_SETTINGS
@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=400))
def test_parse_line_never_raises_on_text(text: str) -> None:
    _assert_event_or_none(parse_line(text))


@_SETTINGS
@given(st.binary(max_size=400))
def test_parse_line_never_raises_on_decoded_bytes(data: bytes) -> None:
    _assert_event_or_none(parse_line(data.decode("utf-8", "replace")))


@st.composite
def mutated_real_lines(draw: st.DrawFn) -> str:
    line = draw(st.sampled_from(_MUTATION_SEEDS))
    rng = random.Random(draw(st.integers(0, 2**32)))
    chars = list(line)
    for _ in range(draw(st.integers(1, 8))):
        op = rng.random()
        pos = rng.randrange(len(chars) + 1)
        if op < 0.25:
            chars.insert(pos, rng.choice(_GARBAGE + list(",:%. 0123456789")))
        elif op < 0.45 and chars:
            del chars[min(pos, len(chars) - 1)]
        elif op < 0.65 and chars:
            chars[min(pos, len(chars) - 1)] = rng.choice(_GARBAGE)
        elif op < 0.8:  # duplicate a field
            fields = "".join(chars).split(", ")
            fields.insert(rng.randrange(len(fields) + 1), rng.choice(fields))
            chars = list(", ".join(fields))
        else:  # replace every number by a huge, negative or garbage value
            text = re.sub(r"\d+(?:\.\d+)?", lambda _m: rng.choice([*_GARBAGE, "-5", "1" * 40]), "".join(chars))
            chars = list(text)
    return "".join(chars)


@_SETTINGS
@given(mutated_real_lines())
def test_parse_line_never_raises_on_mutated_real_lines(line: str) -> None:
    _assert_event_or_none(parse_line(line))


@pytest.mark.parametrize("line", _REAL_STATS[:40])
def test_real_stats_and_spec_lines_parse_cleanly(line: str) -> None:
    event = parse_line(line)
    assert event is not None and event.kind in ("stats", "spec", "prefix")
    if isinstance(event, EngineStats):
        assert event.unknown_fields == 0


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_long_damaged_lines_are_read_in_linear_time() -> None:
    """Half-MiB lines that start like a stats or spec line (a corrupted log) must not stall the reader
    (field splitting used to be quadratic: 40 s for one such 1 MiB line)."""
    import time

    glued = HDR + "Engine 000: Avg prompt throughput: 1.0 tokens/s, " + "Ab: 1 " * 90_000
    listed = HDR + "SpecDecoding metrics: Accepted: 1 tokens, Per-position acceptance rate: " + ", ".join(["0.5"] * 100_000)
    start = time.perf_counter()
    stats, spec = parse_line(glued), parse_line(listed)
    assert time.perf_counter() - start < 3.0
    assert isinstance(stats, EngineStats) and stats.unknown_fields == 90_000 and len(stats.extra) <= 32
    assert isinstance(spec, SpecDecodeStats) and spec.per_position_acceptance_rate is not None
    assert len(spec.per_position_acceptance_rate) == 100_000


# --- the one-match reader of the common V1 line gives what the field reader gives --------------------


def _field_reader(line: str, monkeypatch: pytest.MonkeyPatch) -> Event | None:
    with monkeypatch.context() as m:
        m.setattr(parse_module, "_CANONICAL", re.compile(r"(?!)"))  # never matches: the general reader
        return parse_line(line)


_CANONICAL_SEEDS = sorted({line for line in _REAL_STATS if "Engine 0" in line} | {V1_LINE})


@pytest.mark.parametrize("line", _CANONICAL_SEEDS)
def test_canonical_reader_equals_field_reader_on_real_lines(line: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow = parse_line(line), _field_reader(line, monkeypatch)
    assert fast == slow


_COUNT = st.integers(0, 10**20).map(str)


@_SETTINGS
@given(engine=st.integers(0, 99999), nums=st.lists(st.floats(0, 1e18, allow_nan=False, allow_infinity=False),
                                                    min_size=5, max_size=5),
       running=_COUNT, waiting=_COUNT, device=st.sampled_from(["GPU", "CPU", "XPU", "NPU"]),
       prefix=st.booleans(), mm=st.booleans(), tail=st.sampled_from(["", ".", " ", "\r", ", Extra: 1"]))
@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_canonical_reader_equals_field_reader(engine: int, nums: list[float], running: str, waiting: str,
                                              device: str, prefix: bool, mm: bool, tail: str) -> None:
    p, g, kv, pc, mc = (f"{x:.{1 + int(x) % 3}f}" for x in nums)
    line = (f"{HDR}Engine {engine:03d}: Avg prompt throughput: {p} tokens/s, Avg generation throughput: {g} "
            f"tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, {device} KV cache usage: {kv}%"
            + (f", Prefix cache hit rate: {pc}%" if prefix else "") + (f", MM cache hit rate: {mc}%" if mm else "")
            + tail)
    fast = parse_line(line)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(parse_module, "_CANONICAL", re.compile(r"(?!)"))
        slow = parse_line(line)
    assert fast == slow


@pytest.mark.parametrize("pad", ["\x00", "\x00" * 300, "\x00\r\n", " \x00", "\x00 \x00\t\n"])
def test_trailing_nul_bytes_are_padding(pad: str) -> None:
    """NUL bytes after a line (a preallocated or crash-extended file) are stripped like trailing
    whitespace: the line is read, not dropped."""
    line = ("(APIServer pid=1) INFO 11-29 10:00:10 [loggers.py:335] Engine 000: Avg prompt throughput: 10.0 "
            "tokens/s, Avg generation throughput: 20.0 tokens/s, Running: 3 reqs, Waiting: 1 reqs, GPU KV "
            "cache usage: 4.0%, Prefix cache hit rate: 0.0%")
    event = parse_line(line + pad)
    assert isinstance(event, EngineStats)
    assert event == parse_line(line)
    assert (event.running, event.prefix_cache_hit_rate_pct) == (3, 0.0)


FORGED_STATS = ("Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 99999.0 tokens/s, Running: 77 "
                "reqs, Waiting: 0 reqs, GPU KV cache usage: 99.0%, X: y")
FORGED_LINE = "(APIServer pid=9) INFO 12-02 10:00:30 [loggers.py:335] Engine 000: " + FORGED_STATS


@pytest.mark.parametrize("line", [
    # a custom logging format without vLLM's header (`%(asctime)s %(levelname)s %(name)s: %(message)s`)
    f"2026-12-02 10:00:00,123 INFO vllm.entrypoints.logger: Received request c-1: params: "
    f"SamplingParams(n=1, stop=['{FORGED_STATS}'], max_tokens=16), lora_request: None.",
    f"2026-12-02 10:00:00,123 INFO vllm.entrypoints.logger: Generated response c-1: output: '{FORGED_STATS}', "
    "output_token_ids: None, finish_reason: stop",
    f"2026-12-02 10:00:00,123 INFO vllm.entrypoints.logger: Received request c-1: params: "
    f"SamplingParams(n=1, stop=['{FORGED_LINE}'], max_tokens=16), lora_request: None.",
    f"2026-12-02 10:00:00,123 INFO vllm.v1.engine.async_llm: Aborted request(s) x {FORGED_STATS}.",
])
def test_a_clients_text_in_a_request_line_is_never_a_stats_line(line: str) -> None:
    """Stop strings and outputs are the client's: stats-shaped text in them, or a vLLM header forged
    there, is no line of vLLM's, with or without vLLM's own header in front."""
    assert not isinstance(parse_line(line), EngineStats)


def test_a_custom_formats_own_stats_line_is_still_read() -> None:
    event = parse_line("2026-12-02 10:00:00,123 INFO vllm.v1.metrics.loggers: Engine 000: " + FORGED_STATS)
    assert isinstance(event, EngineStats) and event.running == 77


def test_a_stats_line_written_twice_is_counted_once() -> None:
    """A logging configuration with two handlers prints every line twice: the copy (the same stamp,
    process, engine and numbers as the last line of that process and engine) is left out and counted;
    the same numbers at another stamp, or of another engine, are lines of their own."""
    line = ("(APIServer pid=1) INFO 12-02 10:00:{s:02d} [loggers.py:335] Engine 00{e}: Avg prompt throughput: "
            "0.0 tokens/s, Avg generation throughput: 100.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
            "GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%")
    lines = [line.format(s=0, e=0), line.format(s=0, e=0), line.format(s=0, e=1), line.format(s=0, e=1),
             line.format(s=0, e=0), line.format(s=10, e=0), line.format(s=10, e=0)]
    assembler = Assembler("x.log", repeats=True)
    events = [out for n, text in enumerate(lines, 1) for out in assembler.feed(parse_line(text), n)]  # type: ignore[arg-type]
    assert [(e.kind, e.line) for e in events] == [
        ("stats", 1), ("unparsed", 2), ("stats", 3), ("unparsed", 4), ("unparsed", 5), ("stats", 6),
        ("unparsed", 7)]
    assert {e.what for e in events if isinstance(e, Unparsed)} == {"duplicate"}
    assert [e.kind for e in assemble(lines)] == ["stats"] * 7  # parse --csv, --jsonl: lines as written


def test_the_facts_a_start_up_line_gives_by_purpose() -> None:
    """One rule for which facts a line gives (`ServerInfo.facts`): never where or when it was written, the
    banner's flag or a traceback's exception type; the server's facts leave out what it did while running
    (counted instead), a launch's leave out whether it listened or logged stats."""
    info = ServerInfo(file="f.log", line=3, stamp="11-20 10:00:00", level="INFO", process="APIServer", pid=7,
                      new_launch=True, vllm_version="0.34.0", ft_status="HEALTHY", problem="engine_dead",
                      server_listening=True, stats_logging_disabled=True, exception="RuntimeError")
    assert info.facts("server") == {"vllm_version": "0.34.0", "server_listening": True,
                                    "stats_logging_disabled": True}
    assert info.facts("launch") == {"vllm_version": "0.34.0", "ft_status": "HEALTHY", "problem": "engine_dead"}


def test_every_float_field_of_every_record_of_the_test_logs_holds_a_float() -> None:
    """The records are not validated: the parser gives a float field a float (`3.0`, never `3`, which JSON
    lines would print as `3`)."""
    wrong = set()
    for path in sorted(DATA.rglob("*.log")):
        for text in path.read_text(errors="replace").splitlines():
            event = parse_line(text)
            for f in fields(event) if event is not None else ():
                value, kind = getattr(event, f.name), str(f.type)
                if "float" in kind and "int" not in kind and "dict" not in kind and "tuple" not in kind \
                        and value is not None and not isinstance(value, float):
                    wrong.add((type(event).__name__, f.name, repr(value)))
    assert not wrong, sorted(wrong)
