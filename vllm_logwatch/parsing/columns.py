"""The kinds of record `logwatch parse --kind` writes, the columns of a stats record (CSV header,
JSON-lines keys, `EngineStats` fields) and of a step row (`parse --kind iterations`).

Pure constants and one function: the command line is built without loading the parser's models.
"""

from __future__ import annotations

from typing import Literal

Phase = Literal["decode", "prefill", "mixed", "idle"]

RECORD_KINDS: tuple[str, ...] = (
    "stats", "spec", "transfer", "mfu", "info", "access", "log", "iterations", "requests", "all")
"""`all` is every kind at once."""

STATS_COLUMNS: tuple[str, ...] = (
    "time",
    "file",
    "line",
    "engine",
    "prompt_throughput",
    "generation_throughput",
    "running",
    "waiting",
    "swapped",
    "gpu_kv_cache_usage_pct",
    "cpu_kv_cache_usage_pct",
    "prefix_cache_hit_rate_pct",
    "prefix_cache_hit_rate_cpu_pct",
    "mm_cache_hit_rate_pct",
    "extra",
)
"""CSV columns and JSONL keys of a stats record, in order."""
ITERATION_COLUMNS: tuple[str, ...] = (
    "time", "file", "line", "engine", "iteration", "context_requests", "context_tokens",
    "generation_requests", "generation_tokens", "elapsed_ms", "phase", "dummy", "kv_cache_usage_pct",
    "device", "encoder_inputs", "encoder_embeddings",
)
"""CSV columns and JSON-lines keys (after `kind`) of a step row, in order."""


def step_phase(context_requests: int, generation_requests: int) -> Phase:
    """A step's `phase` cell: `decode` (generation only: its time is the engine step's part of the time
    between tokens at `generation_requests` streams), `prefill` (context only), `mixed`, or `idle`
    (nothing scheduled)."""
    if context_requests == 0:
        return "decode" if generation_requests else "idle"
    return "mixed" if generation_requests else "prefill"
