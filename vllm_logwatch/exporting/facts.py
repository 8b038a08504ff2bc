"""The series of a launch's start-up facts (`ServerInfo` fields the exporter keeps as facts)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..parsing.launchargs import gpu_count
from .families import Families

STARTUP_PHASES: dict[str, str] = {
    "model_load": "model_load_seconds",
    "weights_load": "weights_load_seconds",
    "torch_compile": "torch_compile_seconds",
    "graph_capture": "graph_capture_seconds",
    "engine_init": "init_engine_seconds",
}
"""`startup_seconds{phase}` -> the start-up fact (`parsing/startup.py`) it comes from."""


def add_fact_series(out: Families, facts: Mapping[str, Any], model: str) -> None:
    """`server` info, KV cache capacity and blocks, maximum concurrency, GPU count, start-up durations:
    each once its line was read (a new launch starts its facts over)."""
    if any(k in facts for k in ("vllm_version", "model", "served_model_name")):
        out.info(
            "server",
            {"version": facts.get("vllm_version", ""), "model_name": model, "model": facts.get("model", "")},
        )
    if "kv_cache_tokens" in facts:
        out.add("kv_cache_capacity_tokens", (model,), facts["kv_cache_tokens"])
    blocks = facts.get("kv_cache_extended_blocks", facts.get("gpu_blocks"))
    if blocks is not None:
        out.add("kv_cache_blocks", (model,), blocks)
    if "max_concurrency" in facts:
        per_request = facts.get("max_concurrency_tokens_per_request")
        out.add(
            "max_concurrency",
            (model, "" if per_request is None else str(per_request)),
            facts["max_concurrency"],
        )
    if "kv_cache_extended_gib" in facts:  # 0.34: measured after warm-up; the estimate before overstates it
        out.add("kv_cache_capacity_bytes", (model, "after_warmup"), facts["kv_cache_extended_gib"] * 2**30)
    elif "available_kv_cache_gib" in facts:
        out.add("kv_cache_capacity_bytes", (model, "estimate"), facts["available_kv_cache_gib"] * 2**30)
    gpus = gpu_count(dict(facts))
    if gpus is not None:
        out.add("gpus", (model,), gpus)
    for phase, key in STARTUP_PHASES.items():
        if key in facts:
            out.add("startup_seconds", (model, phase), facts[key])
