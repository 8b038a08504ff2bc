"""GuideLLM's benchmarks JSON (`guidellm run --output kind=json,...`; 0.8): the fields the audit reads.

One run per entry of `benchmarks`: its measured start and end (Unix seconds), its strategy (`concurrent`
with `streams`, `constant`/`poisson` with `rate`, `synchronous`, `throughput`), the requests that
succeeded, errored or were left incomplete, and the output tokens per second of the successful ones.
"""

from __future__ import annotations

from datetime import datetime, timezone

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    ValidationInfo,
    field_validator,
)

from .run import Run

__all__ = ["GuideLLMFile", "guidellm_runs"]


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class _Strategy(_Loose):
    type_: str = Field(alias="type_")
    streams: PositiveInt | None = None
    rate: float | None = None


class _Config(_Loose):
    strategy: _Strategy


class _Totals(_Loose):
    successful: NonNegativeInt = 0
    errored: NonNegativeInt = 0
    incomplete: NonNegativeInt = 0


class _Summary(_Loose):
    mean: float | None = None


class _Rates(_Loose):
    successful: _Summary | None = None


class _Metrics(_Loose):
    request_totals: _Totals
    output_tokens_per_second: _Rates | None = None
    inter_token_latency_ms: _Rates | None = None
    time_per_output_token_ms: _Rates | None = None


class _Benchmark(_Loose):
    start_time: float
    end_time: float
    config: _Config
    metrics: _Metrics

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


class _Backend(_Loose):
    model: str | None = None


class _Spec(_Loose):
    backend: _Backend | None = None


class _RunConfig(_Loose):
    spec: _Spec | None = None


class GuideLLMFile(_Loose):
    """The report: its benchmarks, and the arguments it ran with (`config.spec.backend.model`)."""

    benchmarks: list[_Benchmark]
    config: _RunConfig | None = None


def _model(report: GuideLLMFile) -> str | None:
    """The model the report's backend was pointed at, when it says."""
    spec = report.config.spec if report.config else None
    return spec.backend.model if spec and spec.backend else None


def _mean(rates: _Rates | None) -> float | None:
    """The successful requests' mean of a GuideLLM distribution."""
    return rates.successful.mean if rates and rates.successful else None


def guidellm_runs(report: GuideLLMFile, where: str) -> list[Run]:
    """The runs of a GuideLLM report (`Run`s of results.py)."""
    model = _model(report)
    runs = []
    for n, b in enumerate(report.benchmarks):
        s = b.config.strategy
        concurrency = s.streams if s.type_ == "concurrent" else 1 if s.type_ == "synchronous" else None
        rate = s.rate if s.type_ in ("constant", "poisson", "async") else None
        tok_s = b.metrics.output_tokens_per_second
        t = b.metrics.request_totals
        runs.append(Run(
            where if len(report.benchmarks) == 1 else f"{where} [{n}]", "guidellm", model,
            datetime.fromtimestamp(b.start_time, timezone.utc),
            datetime.fromtimestamp(b.end_time, timezone.utc),
            concurrency, rate, tok_s.successful.mean if tok_s and tok_s.successful else None,
            t.successful, t.errored + t.incomplete,
            _mean(b.metrics.inter_token_latency_ms), _mean(b.metrics.time_per_output_token_ms),
        ))
    return runs
