"""One benchmark run as its client saw it: what the result readers give (results.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["Run"]


@dataclass(frozen=True)
class Run:
    """One benchmark run as its client saw it."""

    source: str
    """The result file (`#N` after it for the N-th run of a file that holds several)."""
    client: str
    """`vllm bench serve` or `guidellm`."""
    model: str | None
    start: datetime
    end: datetime
    concurrency: int | None
    """The concurrency it asked for (None: not capped, e.g. a rate-only run)."""
    rate: float | None
    """Requests per second it asked for (None: as fast as it could, `inf`)."""
    output_tok_s: float | None
    """The client's output tokens per second."""
    completed: int | None
    failed: int | None
    itl_ms: float | None = None
    """The client's mean inter-token latency (the gap between a stream's tokens after its first)."""
    tpot_ms: float | None = None
    """The client's mean time per output token after the first (a request's mean, averaged)."""
    request_ids: tuple[str, ...] | None = None
    """The `X-Request-ID` the client sent with each request, where its results say (AIPerf's
    per-request file): the audit joins them to the log's request lines."""

    @property
    def label(self) -> str:
        """What the run asked for, short: `c=8`, `8.0 req/s`, `c=4 at 2.0 req/s`, else `max`."""
        parts = [f"c={self.concurrency}"] if self.concurrency is not None else []
        if self.rate is not None:
            parts.append(f"{self.rate:g} req/s")
        return " at ".join(parts) or "max"
