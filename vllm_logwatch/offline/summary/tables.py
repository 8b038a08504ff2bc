"""Render a `Summary` as aligned text, Markdown or JSON, with what each column means."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from datetime import datetime
from typing import Any

from ...shown import json_safe
from ...shown import shown_number as _f
from .answers import Asked, answer_lines, answer_notes, answers_json
from .build import STEADY_MAX_PROMPT_SHARE, ConcurrencyRow, GroupSummary, Summary
from .facts import MFU_COLUMNS
from .launch_tables import Table, fact_notes, facts_table, launch_json, matrix_table, matrix_title, mfu_table
from .matrix import MATRIX_CAVEAT

__all__ = [
    "LAUNCH_COLUMNS", "NOT_IN_LOG", "SPEC_COLUMNS", "TABLE_COLUMNS", "TABLE_HEAD", "TRANSFER_COLUMNS",
    "concurrency_cells", "json_ready", "render", "table_lines",
]

_STEADY = (
    f"nothing waiting and prompt tok/s at most {STEADY_MAX_PROMPT_SHARE:.0%} of generation tok/s "
    "(no prefill burst): the closest a log gets to a benchmark's sustained-decode cell"
)
_STEADY_TITLE = f"Steady decode (nothing waiting, prompt <= {STEADY_MAX_PROMPT_SHARE:.0%} of generation)"
LAUNCH_COLUMNS: dict[str, str] = {
    "launch": "the log file; '#2', '#3': a restart inside it (a new start-up banner)",
    "engine": "vLLM's engine index ('-': lines without one, e.g. V0); several: summed per interval",
    "span": "first to last stats line (h:mm:ss)",
    "lines": "stats lines read",
    "busy": "intervals with requests running (an interval: one stats line, or the lines of all engines "
    "at the same second, summed); idle intervals (nothing running) count only in lines and tokens",
    "prompt tokens": "estimated as throughput x stats interval per line, like the exporter's "
    "prompt_tokens_total (vLLM >= 0.16: prefill tokens computed, prefix-cache hits excluded)",
    "gen tokens": "generated tokens, estimated the same way (generation_tokens_total)",
    "peak gen tok/s": "highest generation throughput of an interval",
    "median gen tok/s": "median generation throughput over the busy intervals",
    "mean KV %": "mean KV cache usage over the busy intervals",
    "waiting %": "share of busy intervals with requests waiting (the server was full)",
    "TBT ms": "time between tokens over all the rows below (their intervals' running summed over their "
    "generation tok/s summed): the launch's mean, as vLLM's inter-token latency mean is",
    "prefix hit %": "prefix cache hit rate at the end (vLLM: over its last ~1000 requests, not the run)",
    "MM hit %": "multi-modal cache hit rate at the end (same window)",
}
TABLE_COLUMNS: dict[str, str] = {
    "running": "requests running the whole interval: the Running count at both of its ends (the line "
    "before it and its own) is this one, so an interval in which the load started, stopped or changed "
    "is in no row; exact counts when few occur, else power-of-two buckets (1, 2, 3-4, 5-8, ..., 65-128, "
    ">128)",
    "intervals": "intervals in the row; '*': fewer than 3, read the row with care",
    "gen tok/s median, p90": "aggregate generation throughput of the interval, all running requests "
    "together: median and 90th percentile",
    "per-req tok/s": "one stream's speed: generation tok/s summed over running summed, over the row's "
    "decode-dominated intervals (generation tok/s at least half the prompt tok/s)",
    "TBT ms": "time between a stream's tokens: 1000 / per-req tok/s (Little's law), the speed-test "
    "matrix's figure; it holds scheduling, output processing, the front end and each request's wait for "
    "its first token spread over its tokens, which a benchmark's mean ITL leaves out (that is lower by "
    "about TTFT / output tokens; measured against vllm bench serve and vLLM's /metrics: docs/offline.md)",
    "prompt tok/s": "median prompt throughput",
    "KV %": "median KV cache usage",
    "waiting %": "share of the row's intervals with requests waiting",
}
SPEC_COLUMNS: dict[str, str] = {
    "spec lines": "SpecDecoding / Speculative metrics lines read",
    "drafted, accepted": "speculative tokens drafted and accepted, summed as the exporter counts them "
    "(V0 prints totals since start: the last one counts)",
    "acceptance %": "accepted / drafted",
    "median of mean accept len": "each SpecDecoding line prints its interval's mean acceptance length "
    "(tokens per step); this is the median of those means over the lines, not a mean over the run",
}
TRANSFER_COLUMNS: dict[str, str] = {
    "KV lines": "KV / EC Transfer metrics lines read (one per interval with transfers)",
    "succeeded, failed, failed recv": "connector transfers by result, summed ('-': the connector does "
    "not report that count)",
    "expired": "requests whose KV blocks expired before the other side fetched them",
    "GiB": "successful transfers x Avg MB per transfer (vLLM's MB is MiB)",
    "xfer ms avg, p90": "median over the lines with transfers of their average and p90 transfer time",
}
NOT_IN_LOG = (
    "Not in the stats lines: time to first token (TTFT); with vLLM's request lines and their streamed "
    "outputs (--enable-log-requests --enable-log-outputs) `parse --kind requests` gives each request's "
    "ttft_s. The time between tokens (TBT ms) is Little's law on the stats intervals, a mean over each "
    "interval, not a percentile (its p90 needs vLLM's /metrics histograms or a benchmark client). With "
    "--enable-logging-iteration-details, the engine step time by running streams follows: the step's own "
    "part of the time between tokens."
)
_HEAD = (
    "launch", "engine", "model", "start", "span", "lines", "busy", "prompt tokens", "gen tokens",
    "peak gen tok/s", "median gen tok/s", "mean KV %", "waiting %", "TBT ms", "prefix hit %", "MM hit %",
)
_TABLE_HEAD = (
    "running", "intervals", "gen tok/s median", "gen tok/s p90", "per-req tok/s", "TBT ms", "prompt tok/s",
    "KV %", "waiting %",
)
_SPEC_HEAD = ("launch", "engine", "spec lines", "drafted", "accepted", "acceptance %",
              "median of mean accept len")
_TRANSFER_HEAD = (
    "launch", "engine", "KV lines", "succeeded", "failed", "failed recv", "expired", "GiB", "xfer ms avg",
    "xfer ms p90",
)
_LEFT = {"launch", "engine", "model", "start", "running", "context", "argument", "fact", "limit", "evidence",
         "day", "phase"}


def _left(head: str) -> bool:
    return head.split(" ")[0] in _LEFT


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.0f}"


def _span(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    days, rest = divmod(round(seconds), 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"{days}d {h:02d}:{m:02d}:{s:02d}" if days else f"{h}:{m:02d}:{s:02d}"


def _time(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S") if t else "-"


def _launch_row(g: GroupSummary) -> list[str]:
    return [
        g.launch, g.engine, g.model_name or "-", _time(g.start), _span(g.span_seconds), str(g.lines),
        str(g.busy_intervals), _f(g.prompt_tokens, 0), _f(g.generation_tokens, 0), _f(g.peak_generation),
        _f(g.median_generation), _f(g.mean_kv_cache_usage_pct), _pct(g.waiting_share), _f(g.tbt_ms, 2),
        _f(g.prefix_cache_hit_rate_pct), _f(g.mm_cache_hit_rate_pct),
    ]


def _table_row(r: ConcurrencyRow) -> list[str]:
    return [
        r.running, f"{r.intervals}{'*' if r.few else ''}", _f(r.generation_median), _f(r.generation_p90),
        _f(r.per_request_tps), _f(r.tbt_ms, 2), _f(r.prompt_median), _f(r.kv_cache_usage_median_pct),
        _pct(r.waiting_share),
    ]


def _text_table(head: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]

    def line(cells: list[str] | tuple[str, ...]) -> str:
        return "  ".join(
            c.ljust(w) if _left(h) else c.rjust(w) for c, w, h in zip(cells, widths, head, strict=True)
        ).rstrip()

    return [line(head), *(line(r) for r in rows)]


def _md_table(head: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    align = ["---" if _left(h) else "---:" for h in head]
    return ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
            for cells in (list(head), align, *rows)]


TABLE_HEAD = _TABLE_HEAD


def concurrency_cells(r: ConcurrencyRow) -> list[str]:
    """A concurrency row's cells, as the summary prints them (`TABLE_HEAD`)."""
    return _table_row(r)


def table_lines(head: tuple[str, ...], rows: list[list[str]], markdown: bool) -> list[str]:
    """A table as aligned text or Markdown, the summary's way."""
    return _md_table(head, rows) if markdown else _text_table(head, rows)


def json_ready(value: Any) -> Any:
    """`value` with NaN and infinities as None (JSON has neither)."""
    return json_safe(value)


def _spec_row(g: GroupSummary) -> list[str] | None:
    s = g.spec
    if s is None:
        return None
    return [g.launch, g.engine, str(s.lines), _f(s.drafted_tokens, 0), _f(s.accepted_tokens, 0),
            _f(s.acceptance_pct), _f(s.mean_acceptance_length_median, 2)]


def _transfer_row(g: GroupSummary) -> list[str] | None:
    t = g.transfers
    if t is None:
        return None
    counts = (t.succeeded, t.failed, t.failed_recv, t.expired_requests)
    return [g.launch, g.engine, str(t.lines), *("-" if n is None else f"{n:,}" for n in counts),
            _f(t.gib, 2), _f(t.avg_transfer_ms_median, 3), _f(t.p90_transfer_ms_median, 3)]


def _title(g: GroupSummary, by: str) -> str:
    if by == "none" and g.launch.endswith("launches"):
        return f"all {g.launch}"
    if g.engine == "-":
        return g.launch
    return f"{g.launch}, engine{'s' if ',' in g.engine else ''} {g.engine}"


def _zone(summary: Summary) -> str:
    starts = [g.start for g in summary.groups if g.start]
    return f" ({starts[0].tzname()})" if starts and starts[0].tzname() else ""


def _render_tables(summary: Summary, markdown: bool, asked: Asked) -> str:
    table = _md_table if markdown else _text_table
    h = "## " if markdown else ""
    head = tuple(f"start{_zone(summary)}" if c == "start" else c for c in _HEAD)
    out = [f"{h}vLLM log summary (by {summary.by})", "", f"{h}Launches", ""]
    out += table(head, [_launch_row(g) for g in summary.groups])
    spec_rows = [row for g in summary.groups if (row := _spec_row(g)) is not None]
    transfer_rows = [row for g in summary.groups if (row := _transfer_row(g)) is not None]
    if spec_rows:
        out += ["", f"{h}Speculative decoding", "", *table(_SPEC_HEAD, spec_rows)]
    if transfer_rows:
        out += ["", f"{h}KV transfers", "", *table(_TRANSFER_HEAD, transfer_rows)]
    out += _extra_tables(summary, table, h)
    out += answer_lines(summary, asked, table, h)
    for g in summary.groups:
        if not g.concurrency:
            out += ["", f"{h}Throughput by concurrency: {_title(g, summary.by)}", "", "(nothing ran)"]
            continue
        for title, rows in (("Throughput by concurrency", g.concurrency), (_STEADY_TITLE, g.steady_decode)):
            out += ["", f"{h}{title}: {_title(g, summary.by)}", ""]
            out += table(_TABLE_HEAD, [_table_row(r) for r in rows]) if rows else ["(no such intervals)"]
        if g.matrix is not None:
            title = matrix_title("Context x concurrency (estimated, median gen tok/s (intervals))", g.matrix)
            out += ["", f"{h}{title}: {_title(g, summary.by)}", "", *table(*matrix_table(g.matrix))]
    return "\n".join([*out[:2], *_legend(summary, spec_rows, transfer_rows, markdown, asked), *out[2:], ""])


def _legend(summary: Summary, spec_rows: list[list[str]], transfer_rows: list[list[str]],
            markdown: bool, asked: Asked) -> list[str]:
    """What the columns mean, first (a summary of many files is hundreds of lines: a legend at its end
    scrolls away before the tables it explains), then a line saying the tables follow."""
    h = "## " if markdown else ""
    bullet = "- " if markdown else "  "
    out = [f"{h}What the columns mean", ""]
    out += [f"{bullet}{name}: {text}" for name, text in LAUNCH_COLUMNS.items()]
    out.append("")
    out += [f"{bullet}{name}: {text}" for name, text in TABLE_COLUMNS.items()]
    for shown, columns in ((spec_rows, SPEC_COLUMNS), (transfer_rows, TRANSFER_COLUMNS)):
        if shown:
            out.append("")
            out += [f"{bullet}{name}: {text}" for name, text in columns.items()]
    if any(g.mfu for g in summary.groups):
        out += ["", *(f"{bullet}{name}: {text}" for name, text in MFU_COLUMNS.items())]
    notes = fact_notes(summary.launches) + answer_notes(asked, "")
    if notes:
        out += ["", *(f"{bullet}{note}" for note in notes)]
    if any(g.matrix for g in summary.groups):
        out += ["", MATRIX_CAVEAT]
    out += ["", f"Steady decode: the intervals with {_STEADY}.", "", NOT_IN_LOG, ""]
    return out


def _extra_tables(summary: Summary, table: Any, h: str) -> list[str]:
    """The launch facts and MFU tables, when the logs have them."""
    out: list[str] = []
    tables: list[tuple[str, Table | None]] = [("Launch facts", facts_table(summary.launches)),
                                              ("MFU (--enable-mfu-metrics)", mfu_table(summary.groups))]
    for title, found in tables:
        if found is not None:
            out += ["", f"{h}{title}", "", *table(*found)]
    return out


def _json_group(g: GroupSummary) -> dict[str, Any]:
    # The times are set below: asdict would deep-copy their zone (a zone read from /etc/localtime
    # cannot be copied).
    data: dict[str, Any] = json_safe(asdict(replace(g, start=None, end=None)))
    data["start"] = g.start.isoformat() if g.start else None
    data["end"] = g.end.isoformat() if g.end else None
    data["span_seconds"] = g.span_seconds
    return data


def render(summary: Summary, fmt: str = "text", asked: Asked | None = None) -> str:
    """The summary as `text` (aligned columns), `markdown` (pipe tables) or `json`; `asked`: the
    answers asked for (`answers.py`: capacity at a target speed, cost at a price)."""
    asked = asked or Asked()
    if fmt == "json":
        doc = {
            "by": summary.by,
            "groups": [_json_group(g) for g in summary.groups],
            "launches": [json_safe(launch_json(la)) for la in summary.launches],
            "matrix_caveat": MATRIX_CAVEAT,
            "columns": {**LAUNCH_COLUMNS, **TABLE_COLUMNS, **SPEC_COLUMNS, **TRANSFER_COLUMNS},
            "steady_decode": _STEADY,
            "not_in_log": NOT_IN_LOG,
            "answers": json_ready(answers_json(summary, asked)),
        }
        return json.dumps(doc, indent=2) + "\n"
    return _render_tables(summary, markdown=fmt == "markdown", asked=asked)
