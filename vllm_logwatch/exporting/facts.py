"""The series of a launch's start-up facts (`ServerInfo` fields the exporter keeps as facts)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .families import Families

__all__ = ["add_fact_series"]


def add_fact_series(out: Families, facts: Mapping[str, Any], model: str) -> None:
    """`server` info, KV cache capacity and blocks, maximum concurrency: each once its line was read."""
    if any(k in facts for k in ("vllm_version", "model", "served_model_name")):
        out.info(
            "server",
            {"version": facts.get("vllm_version", ""), "model_name": model, "model": facts.get("model", "")},
        )
    if "kv_cache_tokens" in facts:
        out.add("kv_cache_capacity_tokens", (model,), facts["kv_cache_tokens"])
    if "gpu_blocks" in facts:
        out.add("kv_cache_blocks", (model,), facts["gpu_blocks"])
    if "max_concurrency" in facts:
        per_request = facts.get("max_concurrency_tokens_per_request")
        out.add(
            "max_concurrency",
            (model, "" if per_request is None else str(per_request)),
            facts["max_concurrency"],
        )
