"""Benchmark result files -> runs: when each ran, what it asked of the server, what the client measured.

Every format docs/audit.md lists is validated with a pydantic model naming the fields it reads
(anything else is a one-line `InputError` naming what was looked for). Only those fields are built
(`read_documents`): a `--save-detailed` result or a GuideLLM report holds every request, hundreds of
MB as Python lists. Read with ijson (yajl, in C), a value the models do not name is skipped where it
lies; an object's other keys are kept with None (the message on an unknown file names what it has).
ijson is strict JSON: NaN and Infinity (which Python's json writes), bytes that are not UTF-8 and
broken JSON raise its `JSONError`, and such a file is read whole the standard way.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import IO, Any, TypeAlias, cast, get_args, get_origin

import ijson
from pydantic import (
    AliasChoices,
    AliasPath,
    BaseModel,
    ConfigDict,
    Field,
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

JSONError = ijson.JSONError

Keep: TypeAlias = "bool | dict[str | None, Keep]"
"""What to build of a value: True all of it, False none, a dict the keys it names (None: each item
of an array)."""

_OPEN = frozenset({"start_map", "start_array"})
_CLOSE = frozenset({"end_map", "end_array"})


def at(key: str, *path: str | int, default: Any = None) -> Any:
    """A field read from `key` and down `path` in the document (an int: that item of an array), for
    `wanted` to build that alone; `default=...`: required."""
    return Field(default, validation_alias=AliasPath(key, *path))


def wanted(model: type[BaseModel]) -> dict[str | None, Keep]:
    """The fields of `model` (by their JSON names, or the paths `at` and `AliasChoices` give), down
    through the models and lists of models they hold: a field of any other type is kept whole."""
    keep: dict[str | None, Keep] = {}
    for name, field in model.model_fields.items():
        alias = field.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias or field.alias or name]
        for choice in choices:
            path = choice.path if isinstance(choice, AliasPath) else [choice]
            where = keep
            keys = [None if isinstance(step, int) else step for step in path]
            for key in keys[:-1]:
                where = cast(dict[str | None, Keep], where.setdefault(key, {}))
            where[keys[-1]] = _wanted(field.annotation)
    return keep


def _wanted(annotation: Any) -> Keep:
    for arg in (annotation, *get_args(annotation)):  # Model, Model | None, list[Model]
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return wanted(arg)
        if get_origin(arg) is list:
            item = _wanted(get_args(arg)[0])
            return True if item is True else {None: item}
    return True


def read_documents(fh: IO[bytes], keep: Keep) -> list[Any]:
    """The JSON values of `fh` (one, or several one after another: `--append-result`), each with only
    what `keep` names. Raises `JSONError` for anything ijson cannot read."""
    events = iter(ijson.basic_parse(fh, use_float=True, multiple_values=True))
    return [_value(events, event, value, keep) for event, value in events]


def _value(events: Iterator[tuple[str, Any]], event: str, value: Any, keep: Keep) -> Any:
    if event == "start_map":
        found: dict[str, Any] = {}
        for event, key in events:
            if event == "end_map":
                break
            sub = keep if isinstance(keep, bool) else keep.get(key, False)
            event, value = next(events)
            if sub:
                found[key] = _value(events, event, value, sub)
            else:
                found[key] = None
                _skip(events, event)
        return found
    if event == "start_array":
        sub = keep if isinstance(keep, bool) else keep.get(None, False)
        items = []
        for event, value in events:
            if event == "end_array":
                break
            if sub:
                items.append(_value(events, event, value, sub))
            else:
                _skip(events, event)
        return items
    return value


def _skip(events: Iterator[tuple[str, Any]], event: str) -> None:
    """Past the value that `event` begins, building nothing."""
    if event not in _OPEN:
        return
    depth = 1
    for event, _ in events:
        if event in _OPEN:
            depth += 1
        elif event in _CLOSE:
            depth -= 1
            if not depth:
                return


KNOWN_FORMATS = ("vllm bench serve JSON (date, duration, completed, model_id), a vllm bench sweep folder "
                 "(run=N.json files), GuideLLM benchmarks JSON (benchmarks: [...]), AIPerf's "
                 "profile_export_aiperf.json (input_config, start_time, end_time), an llm-d Benchmark "
                 "Report 0.2 (version, run, results; YAML or JSON), inference-perf's "
                 "stage_N_lifecycle_metrics.json (load_summary, successes)")
"""What `read_results` looks for, for the error on anything else."""


@dataclass(frozen=True)
class Run:
    """One benchmark run as its client saw it: what the readers of every format give."""

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


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class VllmBenchResult(_Loose):
    """The fields of a `vllm bench serve --save-result` JSON the audit reads (others are allowed)."""

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


# GuideLLM's benchmarks JSON (0.8): one run per entry of `benchmarks`, with Unix start and end times.

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
            datetime.fromtimestamp(value, UTC)
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
    """The runs of a GuideLLM report."""
    runs = []
    for n, b in enumerate(report.benchmarks):
        concurrency = b.streams if b.strategy == "concurrent" else 1 if b.strategy == "synchronous" else None
        runs.append(Run(
            where if len(report.benchmarks) == 1 else f"{where} [{n}]", "guidellm", report.model,
            datetime.fromtimestamp(b.start_time, UTC),
            datetime.fromtimestamp(b.end_time, UTC),
            concurrency, b.rate if b.strategy in ("constant", "poisson", "async") else None, b.output_tok_s,
            b.totals.successful, b.totals.errored + b.totals.incomplete, b.itl_ms, b.tpot_ms,
        ))
    return runs

# NVIDIA AIPerf's `profile_export_aiperf.json` (GenAI-Perf's successor): one run, its times the client's
# local time with no zone; the `profile_export.jsonl` beside it gives each request's `X-Request-ID`, which
# vLLM takes as its request id (`cmpl-<id>-0`): the audit says how many the log holds (`join_share`).

REQUESTS_FILE = "profile_export.jsonl"


class _Phase(_Loose):
    kind: str | None = None
    concurrency: PositiveInt | None = None
    request_rate: float | None = None


class AIPerfResult(_Loose):
    """The fields of a `profile_export_aiperf.json` the audit reads (others are allowed)."""

    start_time: datetime
    end_time: datetime
    phases: list[_Phase] = at("input_config", "phases", default=[])
    loadgen: _Phase | None = at("input_config", "loadgen")
    model: str | None = Field(None, validation_alias=AliasChoices(
        AliasPath("input_config", "models", "items", 0, "name"),
        AliasPath("input_config", "endpoint", "model_names", 0)))
    completed: float | None = at("request_count", "avg")
    errors: float | None = at("error_request_count", "avg")
    output_tok_s: float | None = at("output_token_throughput", "avg")
    itl_ms: float | None = at("inter_token_latency", "avg")


def aiperf_run(result: AIPerfResult, where: str, zone: tzinfo, path: str | None) -> Run:
    """The run of an AIPerf export; `path`: the file (its folder's `profile_export.jsonl` gives the
    requests' ids)."""
    # the profiling phase's load (0.13), else the load generator's (up to 0.5)
    load = next((p for p in result.phases if p.kind in (None, "profiling")), result.loadgen or _Phase())
    start, end = (t if t.tzinfo else t.replace(tzinfo=zone) for t in (result.start_time, result.end_time))
    ids = _request_ids(os.path.join(os.path.dirname(path), REQUESTS_FILE)) if path else None
    return Run(where, "aiperf", result.model, start, end, load.concurrency, load.request_rate,
               result.output_tok_s, None if result.completed is None else int(result.completed),
               int(result.errors or 0), result.itl_ms, None, ids)


def _request_ids(path: str) -> tuple[str, ...] | None:
    """The `X-Request-ID` of every request of the per-request export, None without one (or unreadable)."""
    ids: list[str] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                meta = record.get("metadata") if isinstance(record, dict) else None
                found = meta.get("x_request_id") if isinstance(meta, dict) else None
                if isinstance(found, str) and found:
                    ids.append(found)
    except OSError:
        return None
    return tuple(ids) or None


_ID_FORM = re.compile(r"^(?:cmpl-|chatcmpl-)?(.*?)(?:-\d+)?$")
"""vLLM's request id of a client's X-Request-ID X: `cmpl-X-0` (completions), `chatcmpl-X` (chat)."""


def log_request_keys(request_ids: Iterable[str]) -> set[str]:
    """The log's request ids as a client's X-Request-ID reads them (and as they are).

    >>> sorted(log_request_keys(["cmpl-f3772f16-af2b-0", "chatcmpl-abc"]))
    ['abc', 'chatcmpl-abc', 'cmpl-f3772f16-af2b-0', 'f3772f16-af2b']
    """
    keys: set[str] = set()
    for rid in request_ids:
        keys.add(rid)
        m = _ID_FORM.match(rid)
        if m and m.group(1):
            keys.add(m.group(1))
    return keys


def join_share(run: Run, keys: set[str]) -> tuple[int, int] | None:
    """(requests of `run` whose X-Request-ID the log's request lines hold, requests); None: no ids."""
    if not run.request_ids:
        return None
    return sum(1 for rid in run.request_ids if rid in keys), len(run.request_ids)

# The llm-d Benchmark Report (0.2.x, YAML or JSON; llm-d's converter makes one of the other formats), and
# inference-perf's `stage_N_lifecycle_metrics.json`, windowed by the `inference-perf.partial.stage_N.yaml`
# (a Benchmark Report) beside it: the stage's own times are monotonic.

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
    return t if t.tzinfo else t.replace(tzinfo=UTC)  # the schema's times are UTC ('Z')


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
    """The runs of one document, its format told by the keys it has."""
    d = doc if isinstance(doc, dict) else {}
    if str(d.get("version", "")).startswith("0.2") and "results" in d:
        return [report_run(_valid(BenchmarkReport, doc, where, "Benchmark Report"), where)]
    if {"load_summary", "successes"} <= d.keys():
        partial = partial_report_path(path) if path else None
        report = _valid(BenchmarkReport, _yaml(partial, shown_path(partial)), shown_path(partial),
                        "Benchmark Report") if partial else None
        stage = _valid(InferencePerfStage, doc, where, "inference-perf stage")
        return [stage_run(stage, where, path, report)]
    if {"input_config", "start_time"} <= d.keys() and not d.keys().isdisjoint(
            {"aiperf_version", "request_throughput", "schema_version"}):  # AIPerf's aggregate export
        return [aiperf_run(_valid(AIPerfResult, doc, where, "AIPerf export"), where, zone, path)]
    if "benchmarks" in d:
        return guidellm_runs(_valid(GuideLLMFile, doc, where, "GuideLLM benchmarks JSON"), where)
    if {"date", "duration", "model_id"} <= d.keys():
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
