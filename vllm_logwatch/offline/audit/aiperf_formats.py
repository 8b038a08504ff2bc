"""NVIDIA AIPerf's results (`aiperf profile`, GenAI-Perf's successor): the fields the audit reads.

`profile_export_aiperf.json` is one run: its start and end (`start_time`, `end_time`: the client's
local time, with no zone: read in the audit's zone, `--tz`, else this machine's), the concurrency or
request rate it asked for (0.13: the profiling phase of `input_config.phases[]`; up to 0.5:
`input_config.loadgen`), the model (`input_config.models.items[].name`; before:
`input_config.endpoint.model_names`), and its metrics (`{"avg": ...}` each): requests, output tok/s and
the mean inter-token latency. The per-request file beside it, `profile_export.jsonl`, gives each request's
`X-Request-ID` (`metadata.x_request_id`), which vLLM takes as its request id (`cmpl-<id>-0` in its
`Received request` lines): the audit says how many of them the log holds (`join_share`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from datetime import datetime, tzinfo
from typing import Any

from pydantic import BaseModel, ConfigDict, PositiveInt

from .run import Run

__all__ = ["AIPerfResult", "aiperf_run", "is_aiperf", "join_share", "log_request_keys"]

REQUESTS_FILE = "profile_export.jsonl"


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Stat(_Loose):
    avg: float | None = None


class _Phase(_Loose):
    kind: str | None = None
    type: str | None = None
    concurrency: PositiveInt | None = None
    request_rate: float | None = None


class _Named(_Loose):
    name: str


class _Models(_Loose):
    items: list[_Named] = []


class _Endpoint(_Loose):
    model_names: list[str] = []


class _LoadGen(_Loose):
    concurrency: PositiveInt | None = None
    request_rate: float | None = None


class _InputConfig(_Loose):
    models: _Models | None = None
    endpoint: _Endpoint | None = None
    phases: list[_Phase] = []
    loadgen: _LoadGen | None = None


class AIPerfResult(_Loose):
    """The fields of a `profile_export_aiperf.json` the audit reads (others are allowed)."""

    start_time: datetime
    end_time: datetime
    input_config: _InputConfig
    request_count: _Stat | None = None
    output_token_throughput: _Stat | None = None
    inter_token_latency: _Stat | None = None
    error_request_count: _Stat | None = None


def is_aiperf(doc: Any) -> bool:
    """Does `doc` look like AIPerf's aggregate export?"""
    return isinstance(doc, dict) and "input_config" in doc and "start_time" in doc and (
        "aiperf_version" in doc or "request_throughput" in doc or "schema_version" in doc)


def _load(config: _InputConfig) -> tuple[int | None, float | None]:
    """The concurrency and request rate the profiling phase asked for."""
    for phase in config.phases:
        if phase.kind in (None, "profiling"):
            return phase.concurrency, phase.request_rate
    if config.loadgen is not None:
        return config.loadgen.concurrency, config.loadgen.request_rate
    return None, None


def _model(config: _InputConfig) -> str | None:
    if config.models is not None and config.models.items:
        return config.models.items[0].name
    if config.endpoint is not None and config.endpoint.model_names:
        return config.endpoint.model_names[0]
    return None


def _avg(stat: _Stat | None) -> float | None:
    return stat.avg if stat is not None else None


def aiperf_run(result: AIPerfResult, where: str, zone: tzinfo, path: str | None) -> Run:
    """The run of an AIPerf export; `path`: the file (its folder's `profile_export.jsonl` gives the
    requests' ids)."""
    concurrency, rate = _load(result.input_config)
    start, end = (t if t.tzinfo else t.replace(tzinfo=zone) for t in (result.start_time, result.end_time))
    completed, errors = _avg(result.request_count), _avg(result.error_request_count)
    ids = _request_ids(os.path.join(os.path.dirname(path), REQUESTS_FILE)) if path else None
    return Run(where, "aiperf", _model(result.input_config), start, end, concurrency, rate,
               _avg(result.output_token_throughput), None if completed is None else int(completed),
               int(errors or 0), _avg(result.inter_token_latency), None, ids)


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
