"""Per-engine state of KV / EC connector transfers (disaggregated prefill, KV offloading), from the
`KV Transfer metrics:` / `EC Transfer metrics:` lines: counters summed over the lines (each line
covers one stats interval) and the timing gauges of the last line.

vLLM prints a transfer line only for an interval with transfers (or failures), so the gauges keep the
last busy interval's values; the counters are what to rate() and alert on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ..parsing.events import TransferStats
from .offload_state import OffloadState
from .snapshot import TransferSnapshot

__all__ = ["MIB", "TransferState"]

MIB = float(1 << 20)
"""vLLM's `MB` in these lines is MiB (bytes / 2**20)."""

Sample = tuple[str, tuple[str, ...], float]
"""(short metric name, label values after engine and model_name, value)."""


@dataclass
class _Totals:
    transfers: dict[str, int] = field(default_factory=lambda: {"succeeded": 0, "failed": 0, "failed_recv": 0})
    seen: set[str] = field(default_factory=set)
    """The results the lines reported at all (a connector without failure counts shows none)."""
    expired_requests: int = 0
    reports_expiry: bool = False
    bytes: float = 0.0
    reports_bytes: bool = False
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
                totals.transfers[result] += count
                totals.seen.add(result)
        if line.expired_requests is not None:
            totals.expired_requests += line.expired_requests
            totals.reports_expiry = True
        if line.successful_transfers is not None and line.avg_mb_per_transfer is not None:
            totals.bytes += line.successful_transfers * line.avg_mb_per_transfer * MIB
            totals.reports_bytes = True
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
                if result in totals.seen:
                    yield "transfers", (cache, result), float(totals.transfers[result])
            if totals.reports_expiry:
                yield "transfer_expired_requests", (cache,), float(totals.expired_requests)
            if totals.reports_bytes:
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
                transfers={r: totals.transfers[r] for r in sorted(totals.seen)},
                expired_requests=totals.expired_requests if totals.reports_expiry else None,
                last=None if last is None else last.model_dump(
                    mode="json", exclude_none=True,
                    exclude={"file", "line", "stamp", "level", "process", "pid", "kind", "cache", "engine",
                             "time", "offload"}),
            )
        return out
