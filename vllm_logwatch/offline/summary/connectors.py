"""The speculative-decoding and KV-transfer parts of `logwatch summary`: running totals per group
while reading, and what the tables show at the end.

Token and transfer counts come from the exporter's own per-engine state (`EngineState`), so the
summary counts exactly as `/metrics` does: V1 spec counts are summed, V0's cumulative ones taken as
totals; transfers are summed by result.
"""

from __future__ import annotations

import math
import statistics
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

from ...exporting.engine_state import EngineState
from ...parsing.events import SpecDecodeStats, TransferStats


@dataclass
class SpecSummary:
    """Speculative decoding of a group: tokens counted as the exporter counts them (V1 lines summed,
    V0's cumulative counts taken as totals)."""

    lines: int
    drafted_tokens: float
    accepted_tokens: float
    acceptance_pct: float | None
    mean_acceptance_length_median: float | None


@dataclass
class TransferSummary:
    """KV / EC connector transfers of a group, summed over the `KV Transfer metrics:` lines."""

    lines: int
    succeeded: int | None
    """None when the connector's lines do not report the count (NIXL has no failed recvs, ...)."""
    failed: int | None
    failed_recv: int | None
    expired_requests: int | None
    gib: float
    """Successful transfers x Avg MB per transfer, in GiB (vLLM's MB is MiB)."""
    avg_transfer_ms_median: float | None
    p90_transfer_ms_median: float | None


class SpecTotals:
    """Spec lines of one group as they are read."""

    def __init__(self) -> None:
        self.lines = 0
        self.lengths = array("d")

    def add(self, e: SpecDecodeStats, estimate: EngineState) -> None:
        self.lines += 1
        estimate.apply_spec(e)
        if e.mean_acceptance_length is not None and math.isfinite(e.mean_acceptance_length):
            self.lengths.append(e.mean_acceptance_length)

    def finish(self, estimates: Iterable[EngineState]) -> SpecSummary | None:
        if not self.lines:
            return None
        states = list(estimates)
        drafted = sum(t.spec_drafted.value for t in states)
        accepted = sum(t.spec_accepted.value for t in states)
        return SpecSummary(
            lines=self.lines, drafted_tokens=drafted, accepted_tokens=accepted,
            acceptance_pct=accepted / drafted * 100.0 if drafted else None,
            mean_acceptance_length_median=statistics.median(self.lengths) if self.lengths else None,
        )


class TransferTotals:
    """KV / EC Transfer lines of one group as they are read."""

    def __init__(self) -> None:
        self.lines = 0
        self.ms = (array("d"), array("d"))  # avg and p90 of the lines with transfers

    def add(self, e: TransferStats, estimate: EngineState) -> None:
        self.lines += 1
        estimate.apply_transfer(e)
        if e.successful_transfers:
            for values, ms in zip(self.ms, (e.avg_transfer_ms, e.p90_transfer_ms), strict=True):
                if ms is not None and math.isfinite(ms):
                    values.append(ms)

    def finish(self, estimates: Iterable[EngineState]) -> TransferSummary | None:
        if not self.lines:
            return None
        totals: dict[str, float] = {}
        for estimate in estimates:
            for short, labels, value in estimate.transfer.samples():
                if short in ("transfers", "transfer_expired_requests", "transfer_bytes"):
                    key = labels[-1] if short == "transfers" else short
                    totals[key] = totals.get(key, 0.0) + value

        def count(key: str) -> int | None:
            return round(totals[key]) if key in totals else None

        avg_ms, p90_ms = self.ms
        return TransferSummary(
            lines=self.lines, succeeded=count("succeeded"), failed=count("failed"),
            failed_recv=count("failed_recv"), expired_requests=count("transfer_expired_requests"),
            gib=totals.get("transfer_bytes", 0.0) / (1 << 30),
            avg_transfer_ms_median=statistics.median(avg_ms) if avg_ms else None,
            p90_transfer_ms_median=statistics.median(p90_ms) if p90_ms else None,
        )
