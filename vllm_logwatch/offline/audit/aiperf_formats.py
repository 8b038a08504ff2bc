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

from pydantic import AliasChoices, AliasPath, BaseModel, ConfigDict, Field, PositiveInt

from .fields import at
from .run import Run

__all__ = ["AIPerfResult", "aiperf_run", "is_aiperf", "join_share", "log_request_keys"]

REQUESTS_FILE = "profile_export.jsonl"


class _Phase(BaseModel):
    model_config = ConfigDict(extra="allow")

    kind: str | None = None
    concurrency: PositiveInt | None = None
    request_rate: float | None = None


class AIPerfResult(BaseModel):
    """The fields of a `profile_export_aiperf.json` the audit reads (others are allowed)."""

    model_config = ConfigDict(extra="allow")

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


def is_aiperf(doc: Any) -> bool:
    """Does `doc` look like AIPerf's aggregate export?"""
    return isinstance(doc, dict) and "input_config" in doc and "start_time" in doc and (
        "aiperf_version" in doc or "request_throughput" in doc or "schema_version" in doc)


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
