"""The llm-d Benchmark Report (0.2.x, PyPI `llmd-benchmark-report`, YAML or JSON) and inference-perf's
stage results: the fields the audit reads.

A Benchmark Report is one run: `run.time` (`start` and `end` in ISO 8601 with their zone; or `end` and
`duration`; or, as the converter writes a `vllm bench serve` result, `end` alone, the start then being
`results.request_performance.aggregate.requests.total` over its `request_rate`), the load
(`scenario.load.standardized`: `concurrency`, `rate_qps`), and the aggregate metrics, each with its
`units` (`ms`, `s`, `ms/token`, `s/token`). llm-d's converter makes one from `vllm bench serve`, GuideLLM,
AIPerf and inference-perf results; inference-perf writes its stages' in this form itself
(`inference-perf.partial.stage_N.yaml`).

inference-perf's `stage_N_lifecycle_metrics.json` has the stage's metrics but no wall-clock time (its
per-request times are monotonic): its window is the one of the `inference-perf.partial.stage_N.yaml`
beside it.
"""

from __future__ import annotations

import math
import os
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from pydantic import BaseModel, ConfigDict, NonNegativeInt, PositiveInt

from ...errors import InputError
from .fields import at
from .run import Run

__all__ = ["BenchmarkReport", "InferencePerfStage", "is_benchmark_report", "is_inference_perf_stage",
           "partial_report_path", "report_run", "stage_run"]


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Stat(_Loose):
    mean: float | None = None
    units: str | None = None


_AGGREGATE = ("results", "request_performance", "aggregate")


class BenchmarkReport(_Loose):
    """The fields of an llm-d Benchmark Report 0.2.x the audit reads."""

    version: str
    start: datetime | None = at("run", "time", "start")
    end: datetime | None = at("run", "time", "end")
    duration: str | float | None = at("run", "time", "duration")
    concurrency: PositiveInt | None = at("scenario", "load", "standardized", "concurrency")
    rate_qps: float | str | None = at("scenario", "load", "standardized", "rate_qps")
    tool: str | None = at("scenario", "load", "standardized", "tool")
    total: NonNegativeInt | None = at(*_AGGREGATE, "requests", "total")
    failures: NonNegativeInt | None = at(*_AGGREGATE, "requests", "failures")
    itl: _Stat | None = at(*_AGGREGATE, "latency", "inter_token_latency")
    tpot: _Stat | None = at(*_AGGREGATE, "latency", "time_per_output_token")
    output_tok_s: float | None = at(*_AGGREGATE, "throughput", "output_token_rate", "mean")
    request_rate: float | None = at(*_AGGREGATE, "throughput", "request_rate", "mean")


def is_benchmark_report(doc: Any) -> bool:
    return isinstance(doc, dict) and str(doc.get("version", "")).startswith("0.2") and "results" in doc


_MS = {"ms": 1.0, "ms/token": 1.0, "s": 1000.0, "s/token": 1000.0, "us": 0.001, "us/token": 0.001}


def _ms(mean: float | None, units: str | None) -> float | None:
    """A latency's mean in ms (its `units`; none: ms), None without one or in units not known."""
    if mean is None or not math.isfinite(mean):
        return None
    factor = _MS.get((units or "ms").strip().lower())
    return None if factor is None else mean * factor


_ISO_DURATION = re.compile(r"^P(?:T)?(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?$")


def _seconds(duration: str | float | None) -> float | None:
    """`PT56.040S`, `PT1H2M`, or a number of seconds.

    >>> _seconds("PT56.040S"), _seconds("PT1H2M3S"), _seconds(12.5), _seconds("soon")
    (56.04, 3723.0, 12.5, None)
    """
    if isinstance(duration, (int, float)):
        return float(duration) if math.isfinite(duration) and duration >= 0 else None
    m = _ISO_DURATION.match(duration or "")
    if not m or not any(m.groups()):
        return None
    h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return h * 3600 + mi * 60 + s


def _zoned(t: datetime) -> datetime:
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)  # the schema's times are UTC ('Z')


def report_run(report: BenchmarkReport, where: str) -> Run:
    """The run of a Benchmark Report; `InputError` when it gives no window."""
    start, end = report.start, report.end
    if start is None and end is not None:
        seconds = _seconds(report.duration)
        if seconds is None and report.request_rate and report.total:
            seconds = report.total / report.request_rate  # the converter's request rate: total / duration
        start = end - timedelta(seconds=seconds) if seconds is not None else None
    if start is None or end is None:
        raise InputError(f"{where}: a Benchmark Report, but it gives no time window (run.time: start and "
                         f"end, or end and duration)")
    rate = report.rate_qps if isinstance(report.rate_qps, (int, float)) and math.isfinite(report.rate_qps) \
        else None
    failed = report.failures if report.failures is not None or report.total is None else 0
    return Run(where, f"benchmark report ({report.tool})" if report.tool else "benchmark report", None,
               _zoned(start), _zoned(end), report.concurrency, rate, report.output_tok_s,
               None if report.total is None else report.total - (failed or 0), failed,
               _ms(report.itl.mean, report.itl.units) if report.itl else None,
               _ms(report.tpot.mean, report.tpot.units) if report.tpot else None)


class InferencePerfStage(_Loose):
    """The fields of inference-perf's `stage_N_lifecycle_metrics.json` the audit reads (its latencies
    in seconds)."""

    concurrency: PositiveInt | None = at("load_summary", "concurrency")
    requested_rate: float | None = at("load_summary", "requested_rate")
    completed: NonNegativeInt = at("successes", "count", default=0)
    failed: NonNegativeInt = at("failures", "count", default=0)
    output_tok_s: float | None = at("successes", "throughput", "output_tokens_per_sec")
    itl_s: float | None = at("successes", "latency", "inter_token_latency", "mean")
    tpot_s: float | None = at("successes", "latency", "time_per_output_token", "mean")


def is_inference_perf_stage(doc: Any) -> bool:
    return isinstance(doc, dict) and "load_summary" in doc and "successes" in doc


_STAGE = re.compile(r"stage_(\d+)_lifecycle_metrics\.json$")


def stage_run(stage: InferencePerfStage, where: str, path: str | None, report: BenchmarkReport | None) -> Run:
    """The run of an inference-perf stage, windowed by its partial report `report` (the
    `inference-perf.partial.stage_N.yaml` beside `path`, read by the caller: `partial_report_path`)."""
    if report is None:
        raise InputError(f"{where}: inference-perf stage metrics, but no inference-perf.partial.stage_N.yaml "
                         "beside it to give its window (the stage's own times are monotonic)")
    window = report_run(report, where)
    return Run(where, "inference-perf", None, window.start, window.end, stage.concurrency,
               None if stage.concurrency else stage.requested_rate, stage.output_tok_s, stage.completed,
               stage.failed, _ms(stage.itl_s, "s"), _ms(stage.tpot_s, "s"))


def partial_report_path(path: str) -> str | None:
    """The `inference-perf.partial.stage_N.yaml` beside a `stage_N_lifecycle_metrics.json`, if there."""
    m = _STAGE.search(os.path.basename(path))
    if m is None:
        return None
    found = os.path.join(os.path.dirname(path), f"inference-perf.partial.stage_{m.group(1)}.yaml")
    return found if os.path.isfile(found) else None

