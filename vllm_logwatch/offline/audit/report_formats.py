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
from .run import Run

__all__ = ["BenchmarkReport", "InferencePerfStage", "is_benchmark_report", "is_inference_perf_stage",
           "partial_report_path", "report_run", "stage_run"]


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Stat(_Loose):
    mean: float | None = None
    units: str | None = None


class _Latency(_Loose):
    inter_token_latency: _Stat | None = None
    time_per_output_token: _Stat | None = None


class _Requests(_Loose):
    total: NonNegativeInt | None = None
    failures: NonNegativeInt = 0


class _Throughput(_Loose):
    output_token_rate: _Stat | None = None
    request_rate: _Stat | None = None


class _Aggregate(_Loose):
    requests: _Requests | None = None
    latency: _Latency | None = None
    throughput: _Throughput | None = None


class _RequestPerformance(_Loose):
    aggregate: _Aggregate | None = None


class _Results(_Loose):
    request_performance: _RequestPerformance | None = None


class _Time(_Loose):
    start: datetime | None = None
    end: datetime | None = None
    duration: str | float | None = None


class _RunInfo(_Loose):
    time: _Time | None = None


class _Standardized(_Loose):
    concurrency: PositiveInt | None = None
    rate_qps: float | str | None = None
    tool: str | None = None


class _Load(_Loose):
    standardized: _Standardized | None = None


class _Scenario(_Loose):
    load: _Load | None = None


class BenchmarkReport(_Loose):
    """The fields of an llm-d Benchmark Report 0.2.x the audit reads."""

    version: str
    run: _RunInfo | None = None
    scenario: _Scenario | None = None
    results: _Results | None = None


def is_benchmark_report(doc: Any) -> bool:
    return isinstance(doc, dict) and str(doc.get("version", "")).startswith("0.2") and "results" in doc


_MS = {"ms": 1.0, "ms/token": 1.0, "s": 1000.0, "s/token": 1000.0, "us": 0.001, "us/token": 0.001}


def _ms(stat: _Stat | None) -> float | None:
    """A latency's mean in ms (its `units`; none: ms), None without one or in units not known."""
    if stat is None or stat.mean is None or not math.isfinite(stat.mean):
        return None
    factor = _MS.get((stat.units or "ms").strip().lower())
    return None if factor is None else stat.mean * factor


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
    agg = report.results.request_performance.aggregate if report.results and \
        report.results.request_performance else None
    requests = agg.requests if agg else None
    throughput = agg.throughput if agg else None
    time = report.run.time if report.run else None
    start, end = (time.start, time.end) if time else (None, None)
    if start is None and end is not None and time is not None:
        seconds = _seconds(time.duration)
        rate = throughput.request_rate.mean if throughput and throughput.request_rate else None
        if seconds is None and rate and requests and requests.total:
            seconds = requests.total / rate  # the converter's request rate: total / duration
        start = end - timedelta(seconds=seconds) if seconds is not None else None
    if start is None or end is None:
        raise InputError(f"{where}: a Benchmark Report, but it gives no time window (run.time: start and "
                         f"end, or end and duration)")
    load = report.scenario.load.standardized if report.scenario and report.scenario.load else None
    rate_qps = load.rate_qps if load else None
    rate = rate_qps if isinstance(rate_qps, (int, float)) and math.isfinite(rate_qps) else None
    failed = requests.failures if requests else None
    total = requests.total if requests else None
    latency = agg.latency if agg else None
    return Run(where, f"benchmark report ({load.tool})" if load and load.tool else "benchmark report", None,
               _zoned(start), _zoned(end), load.concurrency if load else None, rate,
               throughput.output_token_rate.mean if throughput and throughput.output_token_rate else None,
               None if total is None else total - (failed or 0), failed,
               _ms(latency.inter_token_latency) if latency else None,
               _ms(latency.time_per_output_token) if latency else None)


class _LoadSummary(_Loose):
    concurrency: PositiveInt | None = None
    requested_rate: float | None = None


class _StageLatency(_Loose):
    inter_token_latency: _Stat | None = None
    time_per_output_token: _Stat | None = None


class _StageThroughput(_Loose):
    output_tokens_per_sec: float | None = None


class _Successes(_Loose):
    count: NonNegativeInt = 0
    latency: _StageLatency | None = None
    throughput: _StageThroughput | None = None


class _Failures(_Loose):
    count: NonNegativeInt = 0


class InferencePerfStage(_Loose):
    """The fields of inference-perf's `stage_N_lifecycle_metrics.json` the audit reads."""

    load_summary: _LoadSummary
    successes: _Successes
    failures: _Failures | None = None


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
    latency = stage.successes.latency
    concurrency = stage.load_summary.concurrency
    rate = None if concurrency else stage.load_summary.requested_rate
    return Run(where, "inference-perf", None, window.start, window.end, concurrency, rate,
               stage.successes.throughput.output_tokens_per_sec if stage.successes.throughput else None,
               stage.successes.count, stage.failures.count if stage.failures else 0,
               _s_to_ms(latency.inter_token_latency) if latency else None,
               _s_to_ms(latency.time_per_output_token) if latency else None)


def _s_to_ms(stat: _Stat | None) -> float | None:
    """An inference-perf latency (seconds, no units field) in ms."""
    return None if stat is None or stat.mean is None or not math.isfinite(stat.mean) else stat.mean * 1000.0


def partial_report_path(path: str) -> str | None:
    """The `inference-perf.partial.stage_N.yaml` beside a `stage_N_lifecycle_metrics.json`, if there."""
    m = _STAGE.search(os.path.basename(path))
    if m is None:
        return None
    found = os.path.join(os.path.dirname(path), f"inference-perf.partial.stage_{m.group(1)}.yaml")
    return found if os.path.isfile(found) else None

