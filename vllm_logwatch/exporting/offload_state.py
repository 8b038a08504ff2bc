"""Per-engine KV offloading and HiSparse state, from the `KV Transfer metrics:` lines of vLLM 0.33's
offloading connectors (`vllm:kv_offload_*`, `vllm:kv_offload_tiering_*`, `vllm:simple_kv_offload_*`
keys, read into `OffloadSample`s) and of the HiSparse connector.

Each line covers one stats interval, so counts and sums are added up; gauges keep the last value.
Label values are bounded: directions, results and reasons from fixed sets, tiers as vLLM names them
(`N:type`) up to `MAX_TIERS`, every further one folded into `other` (counted).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..parsing.events import OffloadSample, TransferStats

__all__ = ["MAX_TIERS", "OffloadState"]

MAX_TIERS = 8
"""Tier label values of one engine; later tiers are folded into `other`."""
_TIER = re.compile(r"\d{1,2}:[a-z0-9_]{1,16}")
_FAILURE_REASONS = frozenset(
    {"dropped_cpu_full", "dropped_request_gone", "dropped_null_block", "dropped_not_hashed"}
)

Sample = tuple[str, tuple[str, ...], float]

# vLLM name (after `vllm:`), suffix -> (metric, fixed label values); `None` in a label slot is the tier.
_PLAIN: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {
    ("kv_offload_load_bytes", ""): ("offload_bytes", ("load",)),
    ("kv_offload_store_bytes", ""): ("offload_bytes", ("store",)),
    ("kv_offload_load_time", ""): ("offload_time_seconds", ("load",)),
    ("kv_offload_store_time", ""): ("offload_time_seconds", ("store",)),
    ("kv_offload_load_size", "count"): ("offload_operations", ("load",)),
    ("kv_offload_store_size", "count"): ("offload_operations", ("store",)),
    ("kv_offload_allocation_failure", ""): ("offload_failures", ("allocation",)),
    ("kv_offload_stores_skipped", ""): ("offload_failures", ("store_skipped",)),
    ("kv_offload_tiering_promotion_allocation_failures", ""): ("offload_failures", ("promotion_allocation",)),
}
_TIERED: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {
    ("kv_offload_tiering_read_bytes", ""): ("offload_tier_bytes", ("read",)),
    ("kv_offload_tiering_write_bytes", ""): ("offload_tier_bytes", ("write",)),
    ("kv_offload_tiering_read_time", ""): ("offload_tier_time_seconds", ("read",)),
    ("kv_offload_tiering_write_time", ""): ("offload_tier_time_seconds", ("write",)),
    ("kv_offload_tiering_promotion_job_failures", ""): ("offload_tier_job_failures", ("promotion",)),
    ("kv_offload_tiering_cascade_job_failures", ""): ("offload_tier_job_failures", ("cascade",)),
}
_PROMOTION = "kv_offload_tiering_promotion_latency_seconds"


class OffloadState:
    """The offloading and HiSparse counters and gauges of one engine."""

    def __init__(self) -> None:
        self._counters: dict[tuple[str, tuple[str, ...]], float] = {}
        self._gauges: dict[str, float] = {}
        self._tiers: set[str] = set()
        self.folded = 0
        """Samples whose tier was folded into `other` (the exporter's `label_overflow{label="tier"}`)."""

    def apply(self, line: TransferStats) -> None:
        for sample in line.offload:
            self._sample(sample)
        hits, misses = line.hisparse_hits, line.hisparse_misses
        if hits is not None:
            self._add("hisparse_lookups", ("hit",), hits)
        if misses is not None:
            self._add("hisparse_lookups", ("miss",), misses)
        if hits is not None and misses is not None and hits + misses > 0:
            self._gauges["hisparse_hit_ratio"] = hits / (hits + misses)
        if line.hisparse_host_to_device_bytes is not None:
            self._add("hisparse_host_to_device_bytes", (), line.hisparse_host_to_device_bytes)
        if line.hisparse_host_cache_usage_pct is not None:
            self._gauges["hisparse_host_cache_usage_ratio"] = line.hisparse_host_cache_usage_pct / 100.0

    def _sample(self, sample: OffloadSample) -> None:
        key = (sample.name, sample.suffix)
        if key in _PLAIN and not sample.labels:
            self._add(*_PLAIN[key], sample.value)
        elif key in _TIERED and len(sample.labels) == 1:
            short, fixed = _TIERED[key]
            self._add(short, (self._tier(sample.labels[0]), *fixed), sample.value)
        elif sample.name == _PROMOTION and sample.suffix and len(sample.labels) == 2:
            result = sample.labels[1] if sample.labels[1] in ("success", "failure") else "other"
            short = (
                "offload_tier_promotions" if sample.suffix == "count" else "offload_tier_promotion_seconds"
            )
            self._add(short, (self._tier(sample.labels[0]), result), sample.value)
        elif key == ("kv_offload_cpu_cache_usage_perc", "") and not sample.labels:
            self._gauges["offload_cpu_cache_usage_ratio"] = sample.value  # vLLM's `perc` is 0-1
        elif key == ("simple_kv_offload_save_outcomes_total", "") and len(sample.labels) == 1:
            outcome = sample.labels[0]
            if outcome != "stored":
                self._add(
                    "offload_failures", (outcome if outcome in _FAILURE_REASONS else "other",), sample.value
                )

    def _tier(self, label: str) -> str:
        if label in self._tiers:
            return label
        if _TIER.fullmatch(label) is None or len(self._tiers) >= MAX_TIERS:
            self.folded += 1
            return "other"
        self._tiers.add(label)
        return label

    def _add(self, short: str, labels: tuple[str, ...], value: float) -> None:
        self._counters[(short, labels)] = self._counters.get((short, labels), 0.0) + value

    def reset(self) -> None:
        """A new launch: the gauges go, the counters stay."""
        self._gauges.clear()

    def samples(self) -> Iterator[Sample]:
        for short, value in self._gauges.items():
            yield short, (), value
        for (short, labels), total in self._counters.items():
            yield short, labels, total
