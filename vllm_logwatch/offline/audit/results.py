"""Benchmark result files -> runs: when each ran, what it asked of the server, what the client measured.

Formats read (each validated with a pydantic model; anything else is a one-line `InputError` naming what
was looked for):

* `vllm bench serve --save-result` JSON (one object; `--append-result` files: one per line). Its `date`
  is the client's local time when the run ended (second resolution), `duration` the run's seconds.
* a `vllm bench sweep serve` output folder: every `run=N.json` under it (the same JSON, plus the sweep's
  parameters); `warmup.json` and `summary.json` are left out.
* GuideLLM's benchmarks JSON (`guidellm benchmark --outputs ....json`): one run per entry of
  `benchmarks`, with Unix start and end times (guidellm_formats.py).
* AIPerf's `profile_export_aiperf.json` (aiperf_formats.py): one run, and the request ids of the
  `profile_export.jsonl` beside it.
* an llm-d Benchmark Report 0.2.x, YAML or JSON (report_formats.py), which llm-d's converter makes of
  the others and inference-perf writes of its stages; inference-perf's `stage_N_lifecycle_metrics.json`
  with the window of the `inference-perf.partial.stage_N.yaml` beside it.

Only the fields the models name are built (fields.py: a detailed result's per-request arrays are
skipped as they are read); a file that strict JSON refuses (NaN) is read whole the standard way.
"""

from __future__ import annotations

import json
import math
import os
from datetime import datetime, timedelta, tzinfo
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from ...errors import InputError
from ...parsing.stamps import utc
from ...shown import shown_path
from .aiperf_formats import AIPerfResult, aiperf_run, is_aiperf
from .fields import JSONError, Keep, read_documents, wanted
from .guidellm_formats import GuideLLMFile, guidellm_runs
from .report_formats import (
    BenchmarkReport,
    InferencePerfStage,
    is_benchmark_report,
    is_inference_perf_stage,
    partial_report_path,
    report_run,
    stage_run,
)
from .run import Run

__all__ = ["KNOWN_FORMATS", "Run", "read_results"]

KNOWN_FORMATS = ("vllm bench serve JSON (date, duration, completed, model_id), a vllm bench sweep folder "
                 "(run=N.json files), GuideLLM benchmarks JSON (benchmarks: [...]), AIPerf's "
                 "profile_export_aiperf.json (input_config, start_time, end_time), an llm-d Benchmark "
                 "Report 0.2 (version, run, results; YAML or JSON), inference-perf's "
                 "stage_N_lifecycle_metrics.json (load_summary, successes)")
"""What `read_results` looks for, for the error on anything else."""


class VllmBenchResult(BaseModel):
    """The fields of a `vllm bench serve --save-result` JSON the audit reads (others are allowed)."""

    model_config = ConfigDict(extra="allow")

    date: datetime
    duration: float
    completed: NonNegativeInt
    failed: NonNegativeInt = 0
    """Absent before vLLM 0.11: no failures were counted then."""
    model_id: str
    max_concurrency: PositiveInt | None = None
    request_rate: PositiveFloat | None = None
    output_throughput: float | None = None
    mean_itl_ms: float | None = None
    mean_tpot_ms: float | None = None

    @field_validator("date", mode="before")
    @classmethod
    def _date(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return datetime.strptime(value, "%Y%m%d-%H%M%S")
            except ValueError:
                raise ValueError(f"date {value!r} is not YYYYmmdd-HHMMSS") from None
        return value

    @field_validator("duration")
    @classmethod
    def _duration(cls, value: float, info: ValidationInfo) -> float:
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{value:g} is not a number of seconds")
        date = info.data.get("date")
        if date is not None:
            try:
                date - timedelta(seconds=value)
            except OverflowError:
                raise ValueError(f"{value:g} s before date {date.isoformat(' ')} is not a time") from None
        return value

    @field_validator("request_rate", mode="before")
    @classmethod
    def _rate(cls, value: Any) -> Any:
        return None if value in ("inf", None) or (isinstance(value, float) and math.isinf(value)) else value

    def run(self, source: str, zone: tzinfo) -> Run:
        end = self.date if self.date.tzinfo else self.date.replace(tzinfo=zone)
        # In UTC: a zone's time minus a duration is taken on its wall clock (an hour off across a fall-back).
        start = (utc(end) - timedelta(seconds=self.duration)).astimezone(end.tzinfo)
        return Run(source, "vllm bench serve", self.model_id, start, end,
                   self.max_concurrency, self.request_rate, self.output_throughput, self.completed,
                   self.failed, _finite(self.mean_itl_ms), _finite(self.mean_tpot_ms))


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) and value >= 0 else None


_KEEP: dict[str | None, Keep] = {**wanted(VllmBenchResult), **wanted(GuideLLMFile), **wanted(AIPerfResult),
                                 **wanted(BenchmarkReport), **wanted(InferencePerfStage)}
"""What the formats read of a file (fields.py); a list of results is read as each one."""
_KEEP[None] = _KEEP


def read_results(paths: list[str], zone: tzinfo) -> list[Run]:
    """Every run of `paths` (files or sweep folders), by start time. `zone`: the clients' local
    zone (vLLM's result dates carry none). Raises `InputError` (one line) for a file that cannot be read,
    is cut short, or is of no known format."""
    runs: list[Run] = []
    for path in paths:
        if os.path.isdir(path):
            runs.extend(_sweep(path, zone))
        else:
            runs.extend(_file(path, zone))
    return sorted(runs, key=lambda run: utc(run.start))


def _sweep(folder: str, zone: tzinfo) -> list[Run]:
    found = sorted(os.path.join(root, name) for root, _dirs, names in os.walk(folder) for name in names
                   if name.startswith("run=") and name.endswith(".json"))
    if not found:
        raise InputError(f"{shown_path(folder)}: a folder, but no vllm bench sweep run=N.json in it "
                         f"(looked for {KNOWN_FORMATS})")
    return [run for path in found for run in _file(path, zone)]


def _file(path: str, zone: tzinfo) -> list[Run]:
    shown = shown_path(path)
    if path.endswith((".yaml", ".yml")):
        return _runs_of(_yaml(path, shown), shown, zone, path)
    try:
        with open(path, "rb") as fh:
            try:
                documents = read_documents(fh, _KEEP)
            except JSONError:  # NaN, Infinity, bytes not UTF-8, or broken: read whole, or say where it breaks
                fh.seek(0)
                documents = _documents(fh.read().decode("utf-8", errors="replace"), shown)
    except OSError as exc:
        raise InputError(f"{shown}: cannot read ({exc.strerror or exc})") from None
    runs: list[Run] = []
    for n, doc in enumerate(documents):
        where = shown if len(documents) == 1 else f"{shown} #{n + 1}"
        runs.extend(_runs_of(doc, where, zone, path))
    return runs


def _documents(text: str, shown: str) -> list[Any]:
    """The JSON values of `text`: one, or several one after another (`--append-result`)."""
    decoder = json.JSONDecoder()
    docs: list[Any] = []
    at = 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            break
        try:
            doc, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            if not docs and _not_json(text, exc):
                raise InputError(f"{shown}: not JSON, so no benchmark result (looked for {KNOWN_FORMATS})") \
                    from None
            raise InputError(f"{shown}: the JSON is cut short or broken at line {exc.lineno} column "
                             f"{exc.colno} ({exc.msg.lower()}): a truncated result file?") from None
        docs.append(doc)
    if not docs:
        raise InputError(f"{shown}: empty, so no benchmark result (looked for {KNOWN_FORMATS})")
    return docs


_NOT_JSON_WITHIN = 64
"""A text whose first value breaks within this many characters, not for want of more, is no JSON at all
(a server log opening with `[launcher]` or `[2026-12-01 10:00:00]`): no result opens in fewer."""


def _not_json(text: str, exc: json.JSONDecodeError) -> bool:
    """Whether the failure to read `text`'s first value says it is not JSON at all, rather than a
    result cut short (the text ends inside the value) or broken further in."""
    cut_short = exc.pos >= len(text.rstrip()) or (
        exc.msg.startswith("Unterminated string") and '"' not in text[exc.pos + 1:])
    return exc.pos == 0 or (exc.pos < _NOT_JSON_WITHIN and not cut_short)


def _yaml(path: str, shown: str) -> Any:
    """A YAML result file (a Benchmark Report): its document, or `InputError` in one line."""
    import yaml

    try:
        with open(path, "rb") as fh:
            return yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except OSError as exc:
        raise InputError(f"{shown}: cannot read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{shown}: not YAML{where}, so no benchmark result (looked for {KNOWN_FORMATS})") \
            from None


def _runs_of(doc: Any, where: str, zone: tzinfo, path: str | None = None) -> list[Run]:
    if is_benchmark_report(doc):
        return [report_run(_valid(BenchmarkReport, doc, where, "Benchmark Report"), where)]
    if is_inference_perf_stage(doc):
        partial = partial_report_path(path) if path else None
        report = _valid(BenchmarkReport, _yaml(partial, shown_path(partial)), shown_path(partial),
                        "Benchmark Report") if partial else None
        stage = _valid(InferencePerfStage, doc, where, "inference-perf stage")
        return [stage_run(stage, where, path, report)]
    if is_aiperf(doc):
        return [aiperf_run(_valid(AIPerfResult, doc, where, "AIPerf export"), where, zone, path)]
    if isinstance(doc, dict) and "benchmarks" in doc:
        return guidellm_runs(_valid(GuideLLMFile, doc, where, "GuideLLM benchmarks JSON"), where)
    if isinstance(doc, dict) and {"date", "duration", "model_id"} <= doc.keys():
        return [_valid(VllmBenchResult, doc, where, "vllm bench serve result").run(where, zone)]
    if isinstance(doc, list) and doc and all(isinstance(d, dict) and "date" in d for d in doc):
        return [run for n, d in enumerate(doc) for run in _runs_of(d, f"{where} [{n}]", zone)]
    keys = ", ".join(list(doc)[:6]) if isinstance(doc, dict) else type(doc).__name__
    raise InputError(f"{where}: not a benchmark result of a known format (it has {keys}; looked for "
                     f"{KNOWN_FORMATS})")


def _valid(model: type[Any], doc: Any, where: str, what: str) -> Any:
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "the document"
        raise InputError(f"{where}: a {what}, but {field}: {first['msg'].lower()}") from None
