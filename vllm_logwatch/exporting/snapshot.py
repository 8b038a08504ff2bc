"""The shape of the exporter's status snapshot (`ExporterMetrics.status()`), the core of
`/api/v1/status`: values in the log's own units (percent stays percent), per-engine age and state,
start-up facts and the exporter's own counters. Watch adds `pipeline` and `follower`, run `mode` and
the supervisor's side of `child`. The page (`web/page.py`) reads the same keys."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

EngineStateName = Literal["ok", "idle", "stalled", "dead", "ended"]
StatsMissing = Literal["stats_logging_disabled", "requests_without_stats"]
"""Why no engine has a stats line although vLLM runs (None in `ExporterStatus`: no reason known)."""


class TransferSnapshot(TypedDict):
    """One KV/EC connector cache of an engine: its totals and the last line's values."""

    transfers: dict[str, int]
    expired_requests: int | None
    last: dict[str, Any] | None


class EngineSnapshot(TypedDict):
    """One engine: the fields of its last stats line (log units), their age, its state, the token
    counters and transfers."""

    last: dict[str, Any]
    age_seconds: float
    state: EngineStateName
    interval_seconds: float | None
    prompt_tokens: float
    generation_tokens: float
    stats_lines: int
    transfers: dict[str, TransferSnapshot] | None


class Counters(TypedDict):
    """The exporter's own counters: what was read, and what could not be used."""

    log_lines: float
    log_bytes: float
    log_rotations: float
    log_truncations: float
    read_errors: float
    lines_cut: float
    state_errors: float
    parse_errors: dict[str, int]
    unknown_fields: int
    label_overflow: dict[str, int]
    log_messages: dict[str, int]
    problems: dict[str, int]
    http_requests: int


class ExporterStatus(TypedDict):
    """`ExporterMetrics.status()`."""

    engines: dict[str, EngineSnapshot]
    model_name: str
    server: dict[str, Any]
    stats_missing: StatsMissing | None
    launches: int
    launch_source: str | None
    stats_interval_seconds: float | None
    skipped_bytes: int | None
    """Bytes of the file before where reading started, not read (watch started at its end)."""
    counters: Counters
    child: dict[str, float | None] | None
    """Run mode: the supervised vLLM process as the exporter's child metrics see it (by metric name)."""
