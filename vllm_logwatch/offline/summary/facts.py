"""What the summary and compare show of a launch besides its stats lines: its start-up facts (in a fixed
order, with short column names) and its MFU lines (`--enable-mfu-metrics`), summed up per group.

Pure: `Launch.facts` (offline/reading/launches.py) in, rows and medians out.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from typing import Any

from ..reading.launches import Launch
from .sorting import median_sorted, quantile_sorted

FACT_COLUMNS: dict[str, tuple[str, str]] = {
    "vllm_version": ("vLLM", "vLLM version (banner or engine config line)"),
    "model": ("model", "the model as given to vllm serve"),
    "served_model_name": ("served", "--served-model-name"),
    "dtype": ("dtype", "weights and activations dtype (the engine's resolved one when it is logged)"),
    "quantization": ("quant", "--quantization (or the one the engine config resolved)"),
    "kv_cache_dtype": ("KV dtype", "--kv-cache-dtype"),
    "tensor_parallel_size": ("TP", "tensor parallel size"),
    "pipeline_parallel_size": ("PP", "pipeline parallel size"),
    "data_parallel_size": ("DP", "data parallel size"),
    "max_model_len": ("max len", "maximum model length in tokens"),
    "max_num_seqs": ("max seqs", "--max-num-seqs: most requests running at once"),
    "max_num_batched_tokens": ("batched tokens", "--max-num-batched-tokens"),
    "enable_prefix_caching": ("prefix caching", "prefix caching on or off, as the arguments or config say"),
    "speculative_method": ("spec", "speculative decoding method (eagle, mtp, ngram, draft_model, ...)"),
    "num_speculative_tokens": ("spec tokens", "tokens drafted per step"),
    "attention_backend": ("attention", "the attention backend vLLM chose or was given"),
    "gpu_memory_utilization": ("GPU mem", "--gpu-memory-utilization, 0-1"),
    "kv_cache_tokens": ("KV tokens", "KV cache size in tokens (`KV cache size: N tokens`)"),
    "kv_cache_extended_gib": ("KV GiB", "KV cache memory per worker after warm-up (0.34: `Extended KV cache "
                              "to N blocks (X GiB)`)"),
    "max_concurrency": ("max conc", "maximum concurrency for max-length requests (`Maximum concurrency`)"),
}
"""Fact key -> (column name, what it is), in the order the tables show them."""

MFU_COLUMNS: dict[str, str] = {
    "MFU lines": "MFU lines read (--enable-mfu-metrics; vLLM prints none for an interval without work)",
    "TF/s median, p90": "estimated model TFLOP/s per device (GPU) over the MFU lines",
    "GB/s median, p90": "estimated memory traffic per device, GB/s (10^9 bytes) read and written",
}


def fact_text(value: Any) -> str:
    """A fact or argument value as a table shows it.

    >>> fact_text(True), fact_text(0.9), fact_text(524288), fact_text(None), fact_text(["a", "b"])
    ('on', '0.9', '524,288', '-', 'a,b')
    """
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ",".join(fact_text(v) for v in value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {fact_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def launch_facts(launch: Launch) -> dict[str, Any]:
    """The launch's facts that `FACT_COLUMNS` names, in that order (absent ones left out)."""
    return {key: launch.facts[key] for key in FACT_COLUMNS if key in launch.facts}


@dataclass
class MfuSummary:
    """A group's MFU lines: medians and 90th percentiles per device."""

    lines: int
    tflops_median: float
    tflops_p90: float
    gbps_median: float
    gbps_p90: float


class MfuTotals:
    """MFU lines of one group as they are read."""

    def __init__(self) -> None:
        self.tflops = array("d")
        self.gbps = array("d")

    def add(self, tflops: float, gbps: float) -> None:
        """An MFU line's TF/s and GB/s per device."""
        if math.isfinite(tflops) and math.isfinite(gbps):
            self.tflops.append(tflops)
            self.gbps.append(gbps)

    def finish(self) -> MfuSummary | None:
        if not self.tflops:
            return None
        tflops, gbps = sorted(self.tflops), sorted(self.gbps)
        return MfuSummary(lines=len(tflops), tflops_median=median_sorted(tflops),
                          tflops_p90=quantile_sorted(tflops, 0.9), gbps_median=median_sorted(gbps),
                          gbps_p90=quantile_sorted(gbps, 0.9))
