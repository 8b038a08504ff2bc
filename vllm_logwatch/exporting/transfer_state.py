"""Per-engine state of KV / EC connector transfers (disaggregated prefill, KV offloading), from the
`KV Transfer metrics:` / `EC Transfer metrics:` lines: counters summed over the lines (each line
covers one stats interval) and the timing gauges of the last line.

vLLM prints a transfer line only for an interval with transfers (or failures), so the gauges keep the
last busy interval's values; the counters are what to rate() and alert on.

The offloading connectors of vLLM 0.33 (`vllm:kv_offload_*`, `vllm:kv_offload_tiering_*`,
`vllm:simple_kv_offload_*` keys, read into `OffloadSample`s) and HiSparse print in the same lines
(`OffloadState`). Label values are bounded: directions, results and reasons from fixed sets, tiers as
vLLM names them (`N:type`) up to `MAX_TIERS`, every further one folded into `other` (counted).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypedDict

from ..parsing.events import OffloadSample, TransferStats, json_fields
from ..shown import json_safe

MIB = float(1 << 20)
"""vLLM's `MB` in these lines is MiB (bytes / 2**20)."""

Sample = tuple[str, tuple[str, ...], float]
"""(short metric name, label values after engine and model_name, value)."""


class TransferSnapshot(TypedDict):
    """One KV/EC connector cache of an engine: its totals and the last line's values."""

    transfers: dict[str, int]
    expired_requests: int | None
    last: dict[str, Any] | None


@dataclass
class _Totals:
    transfers: dict[str, int] = field(default_factory=dict)
    """By the results the lines reported at all (a connector without failure counts shows none)."""
    expired_requests: int | None = None  # None: the lines never reported it
    bytes: float | None = None
    last: TransferStats | None = None
    timed: TransferStats | None = None
    """The last line with successful transfers: a failures-only interval prints zeros for timings."""


class TransferState:
    """Transfer counters and last values of one engine, by cache (`kv` or `ec`)."""

    def __init__(self) -> None:
        self._caches: dict[str, _Totals] = {}
        self.offload = OffloadState()
        self.unreadable_keys = 0

    def apply(self, line: TransferStats) -> None:
        self.offload.apply(line)
        self.unreadable_keys += line.unreadable_keys
        totals = self._caches.setdefault(line.cache, _Totals())
        for result, count in (("succeeded", line.successful_transfers), ("failed", line.failed_transfers),
                              ("failed_recv", line.failed_recvs)):
            if count is not None:
                totals.transfers[result] = totals.transfers.get(result, 0) + count
        if line.expired_requests is not None:
            totals.expired_requests = (totals.expired_requests or 0) + line.expired_requests
        if line.successful_transfers is not None and line.avg_mb_per_transfer is not None:
            totals.bytes = (totals.bytes or 0.0) + line.successful_transfers * line.avg_mb_per_transfer * MIB
        totals.last = line
        if line.successful_transfers:
            totals.timed = line

    def reset(self) -> None:
        """A new launch: the gauges go (the counters stay, as the token counters do)."""
        for totals in self._caches.values():
            totals.last = totals.timed = None
        self.offload.reset()

    def samples(self) -> Iterator[Sample]:
        """Every series this engine has data for, in base units (seconds, bytes)."""
        for cache, totals in sorted(self._caches.items()):
            for result in ("succeeded", "failed", "failed_recv"):
                if result in totals.transfers:
                    yield "transfers", (cache, result), float(totals.transfers[result])
            if totals.expired_requests is not None:
                yield "transfer_expired_requests", (cache,), float(totals.expired_requests)
            if totals.bytes is not None:
                yield "transfer_bytes", (cache,), totals.bytes
            last = totals.timed
            if last is None:
                continue
            for short, stat, ms in (("transfer_time_seconds", "avg", last.avg_transfer_ms),
                                    ("transfer_time_seconds", "p90", last.p90_transfer_ms),
                                    ("transfer_post_time_seconds", "avg", last.avg_post_ms),
                                    ("transfer_post_time_seconds", "p90", last.p90_post_ms)):
                if ms is not None:
                    yield short, (cache, stat), ms / 1000.0
            if last.throughput_mb_per_s is not None:
                yield "transfer_throughput_bytes_per_second", (cache,), last.throughput_mb_per_s * MIB
        yield from self.offload.samples()

    def snapshot(self) -> dict[str, TransferSnapshot]:
        """For the status endpoint: per cache, the totals and the last line's values (log units)."""
        out: dict[str, TransferSnapshot] = {}
        for cache, totals in sorted(self._caches.items()):
            last = totals.last
            out[cache] = TransferSnapshot(
                transfers=dict(sorted(totals.transfers.items())),
                expired_requests=totals.expired_requests,
                last=None if last is None else json_safe(json_fields(
                    last, {"file", "line", "stamp", "level", "process", "pid", "kind", "cache", "engine",
                             "time", "offload"})),
            )
        return out


MAX_TIERS = 8
"""Tier label values of one engine; later tiers are folded into `other`."""
_TIER = re.compile(r"\d{1,2}:[a-z0-9_]{1,16}")
_FAILURE_REASONS = frozenset(
    {"dropped_cpu_full", "dropped_request_gone", "dropped_null_block", "dropped_not_hashed"}
)


class _Series(NamedTuple):
    metric: str
    label: str
    """The label value after the tier label of an `offload_tier_*` metric."""


_OFFLOAD: dict[str, _Series] = {  # by vLLM's series name (after `vllm:`)
    "kv_offload_load_bytes": _Series("offload_bytes", "load"),
    "kv_offload_store_bytes": _Series("offload_bytes", "store"),
    "kv_offload_load_time": _Series("offload_time_seconds", "load"),
    "kv_offload_store_time": _Series("offload_time_seconds", "store"),
    "kv_offload_load_size_count": _Series("offload_operations", "load"),
    "kv_offload_store_size_count": _Series("offload_operations", "store"),
    "kv_offload_allocation_failure": _Series("offload_failures", "allocation"),
    "kv_offload_stores_skipped": _Series("offload_failures", "store_skipped"),
    "kv_offload_tiering_promotion_allocation_failures": _Series("offload_failures", "promotion_allocation"),
    "kv_offload_tiering_read_bytes": _Series("offload_tier_bytes", "read"),
    "kv_offload_tiering_write_bytes": _Series("offload_tier_bytes", "write"),
    "kv_offload_tiering_read_time": _Series("offload_tier_time_seconds", "read"),
    "kv_offload_tiering_write_time": _Series("offload_tier_time_seconds", "write"),
    "kv_offload_tiering_promotion_job_failures": _Series("offload_tier_job_failures", "promotion"),
    "kv_offload_tiering_cascade_job_failures": _Series("offload_tier_job_failures", "cascade"),
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
        key = f"{sample.name}_{sample.suffix}" if sample.suffix else sample.name
        series = _OFFLOAD.get(key)
        tiered = series is not None and series.metric.startswith("offload_tier_")
        if series is not None and len(sample.labels) == tiered:
            labels = (self._tier(sample.labels[0]), series.label) if tiered else (series.label,)
            self._add(series.metric, labels, sample.value)
        elif sample.name == _PROMOTION and sample.suffix and len(sample.labels) == 2:
            result = sample.labels[1] if sample.labels[1] in ("success", "failure") else "other"
            short = (
                "offload_tier_promotions" if sample.suffix == "count" else "offload_tier_promotion_seconds"
            )
            self._add(short, (self._tier(sample.labels[0]), result), sample.value)
        elif key == "kv_offload_cpu_cache_usage_perc" and not sample.labels:
            self._gauges["offload_cpu_cache_usage_ratio"] = sample.value  # vLLM's `perc` is 0-1
        elif key == "simple_kv_offload_save_outcomes_total" and len(sample.labels) == 1:
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
