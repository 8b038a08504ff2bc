"""GuideLLM's benchmarks JSON (`guidellm run --output kind=json,...`; 0.8): the fields the audit reads.

One run per entry of `benchmarks`: its measured start and end (Unix seconds), its strategy (`concurrent`
with `streams`, `constant`/`poisson` with `rate`, `synchronous`, `throughput`), the requests that
succeeded, errored or were left incomplete, and the output tokens per second of the successful ones.
"""

from __future__ import annotations

from datetime import datetime, timezone

from pydantic import BaseModel, ConfigDict, NonNegativeInt, PositiveInt, ValidationInfo, field_validator

from .fields import at
from .run import Run

__all__ = ["GuideLLMFile", "guidellm_runs"]


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Totals(_Loose):
    successful: NonNegativeInt = 0
    errored: NonNegativeInt = 0
    incomplete: NonNegativeInt = 0


class _Benchmark(_Loose):
    start_time: float
    end_time: float
    strategy: str = at("config", "strategy", "type_", default=...)
    streams: PositiveInt | None = at("config", "strategy", "streams")
    rate: float | None = at("config", "strategy", "rate")
    totals: _Totals = at("metrics", "request_totals", default=...)
    # the successful requests' means of GuideLLM's distributions
    output_tok_s: float | None = at("metrics", "output_tokens_per_second", "successful", "mean")
    itl_ms: float | None = at("metrics", "inter_token_latency_ms", "successful", "mean")
    tpot_ms: float | None = at("metrics", "time_per_output_token_ms", "successful", "mean")

    @field_validator("start_time", "end_time")
    @classmethod
    def _time(cls, value: float, info: ValidationInfo) -> float:
        try:
            datetime.fromtimestamp(value, timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise ValueError(f"{value:g} is not a time") from None
        if info.field_name == "end_time" and value < info.data.get("start_time", value):
            raise ValueError("it is before start_time")
        return value


class GuideLLMFile(_Loose):
    """The report: its benchmarks, and the model its backend was pointed at, when it says."""

    benchmarks: list[_Benchmark]
    model: str | None = at("config", "spec", "backend", "model")


def guidellm_runs(report: GuideLLMFile, where: str) -> list[Run]:
    """The runs of a GuideLLM report (`Run`s of results.py)."""
    runs = []
    for n, b in enumerate(report.benchmarks):
        concurrency = b.streams if b.strategy == "concurrent" else 1 if b.strategy == "synchronous" else None
        runs.append(Run(
            where if len(report.benchmarks) == 1 else f"{where} [{n}]", "guidellm", report.model,
            datetime.fromtimestamp(b.start_time, timezone.utc),
            datetime.fromtimestamp(b.end_time, timezone.utc),
            concurrency, b.rate if b.strategy in ("constant", "poisson", "async") else None, b.output_tok_s,
            b.totals.successful, b.totals.errored + b.totals.incomplete, b.itl_ms, b.tpot_ms,
        ))
    return runs
