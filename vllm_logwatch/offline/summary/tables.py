"""Render a `Summary` as aligned text, Markdown or JSON, with what each column means; the tables of
launch facts (a launch's start-up facts in a fixed order, with short column names), MFU and the context
x concurrency matrix as (head, rows), which compare renders too."""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict, replace
from datetime import datetime
from functools import partial
from typing import Any

from ...shown import json_safe
from ...shown import shown_number as _f
from ..reading.launches import Launch
from .answers import Asked, answer_lines, answer_notes, answers_json
from .build import ConcurrencyRow, GroupSummary, Summary
from .matrix import MATRIX_CAVEAT, Matrix
from .steps import STEP_COLUMNS, STEP_NOTE, StepTable, steps_json, steps_lines
from .tbt import tbt_note, tbt_source

FACT_COLUMNS: dict[str, tuple[str, str]] = {
    "vllm_version": ("vLLM", "vLLM version (banner or engine config line)"),
    "model": ("model", "the model as given to vllm serve"),
    "served_model_name": ("served", "--served-model-name"),
    "dtype": ("dtype", "weights and activations dtype (the engine's resolved one when it is logged)"),
    "quantization": ("quant", "--quantization (or the one the engine config resolved)"),
    "kv_cache_dtype": ("KV dtype", "--kv-cache-dtype"),
    "tensor_parallel_size": ("TP", "tensor parallel size"),
    "pipeline_parallel_size": ("PP", "pipeline parallel size"),
    "data_parallel_size": ("DP", "data parallel size"),
    "max_model_len": ("max len", "maximum model length in tokens"),
    "max_num_seqs": ("max seqs", "--max-num-seqs: most requests running at once"),
    "max_num_batched_tokens": ("batched tokens", "--max-num-batched-tokens"),
    "enable_prefix_caching": ("prefix caching", "prefix caching on or off, as the arguments or config say"),
    "speculative_method": ("spec", "speculative decoding method (eagle, mtp, ngram, draft_model, ...)"),
    "num_speculative_tokens": ("spec tokens", "tokens drafted per step"),
    "attention_backend": ("attention", "the attention backend vLLM chose or was given"),
    "gpu_memory_utilization": ("GPU mem", "--gpu-memory-utilization, 0-1"),
    "kv_cache_tokens": ("KV tokens", "KV cache size in tokens (`KV cache size: N tokens`)"),
    "kv_cache_extended_gib": ("KV GiB", "KV cache memory per worker after warm-up (0.34: `Extended KV cache "
                              "to N blocks (X GiB)`)"),
    "max_concurrency": ("max conc", "maximum concurrency for max-length requests (`Maximum concurrency`)"),
}
"""Fact key -> (column name, what it is), in the order the tables show them."""

MFU_COLUMNS: dict[str, str] = {
    "MFU lines": "MFU lines read (--enable-mfu-metrics; vLLM prints none for an interval without work)",
    "TF/s median, p90": "estimated model TFLOP/s per device (GPU) over the MFU lines",
    "GB/s median, p90": "estimated memory traffic per device, GB/s (10^9 bytes) read and written",
}


def fact_text(value: Any) -> str:
    """A fact or argument value as a table shows it.

    >>> fact_text(True), fact_text(0.9), fact_text(524288), fact_text(None), fact_text(["a", "b"])
    ('on', '0.9', '524,288', '-', 'a,b')
    """
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ",".join(fact_text(v) for v in value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {fact_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def launch_facts(launch: Launch) -> dict[str, Any]:
    """The launch's facts that `FACT_COLUMNS` names, in that order (absent ones left out)."""
    return {key: launch.facts[key] for key in FACT_COLUMNS if key in launch.facts}


Table = tuple[tuple[str, ...], list[list[str]]]


def facts_table(launches: list[Launch]) -> Table | None:
    """One row per launch, a column per fact any of them logged; None when none did."""
    facts = [launch_facts(la) for la in launches]
    keys = [key for key in FACT_COLUMNS if any(key in f for f in facts)]
    if not keys:
        return None
    head = ("launch", *(FACT_COLUMNS[k][0] for k in keys))
    rows = [[la.label, *(fact_text(f.get(k)) for k in keys)] for la, f in zip(launches, facts, strict=True)]
    return head, rows


def fact_notes(launches: list[Launch]) -> list[str]:
    """`column: meaning` of the facts `facts_table` shows."""
    facts = [launch_facts(la) for la in launches]
    return [f"{name}: {text}" for key, (name, text) in FACT_COLUMNS.items() if any(key in f for f in facts)]


def mfu_table(groups: list[Any]) -> Table | None:
    """Launch, engine, MFU lines and the medians and p90s of the groups with MFU lines."""
    rows = [[g.launch, g.engine, str(g.mfu.lines), _f(g.mfu.tflops_median), _f(g.mfu.tflops_p90),
             _f(g.mfu.gbps_median), _f(g.mfu.gbps_p90)] for g in groups if g.mfu is not None]
    if not rows:
        return None
    return ("launch", "engine", "MFU lines", "TF/s median", "TF/s p90", "GB/s median", "GB/s p90"), rows


def matrix_cells(matrix: Matrix) -> str:
    """What a cell holds: `median gen tok/s (intervals)`, per-request tok/s and the time between tokens,
    and the engine step time where the launch printed iteration lines."""
    steps = ", engine step ms median" if any(c.step_ms_median is not None for c in matrix.cells) else ""
    return f"median gen tok/s (intervals); per-request tok/s, time between tokens ms{steps}"


def matrix_title(title: str, matrix: Matrix) -> str:
    """`title` (`... (intervals))`), saying what a cell's figures after the intervals are
    (`matrix_cells`)."""
    return title[:-1] + matrix_cells(matrix).removeprefix("median gen tok/s (intervals)") + ")"


def matrix_table(matrix: Matrix) -> Table:
    """Rows: context; columns: running; cells `median gen tok/s (intervals)`, then `; per-request tok/s,
    TBT ms` and `, step ms` (the median decode step's own time there) where the launch printed iteration
    lines."""
    rows = []
    for row in matrix.rows:
        cells = []
        for column in matrix.columns:
            cell = matrix.cell(row, column)
            text = "" if cell is None else f"{_f(cell.gen_tps_median, 0)} ({cell.intervals})"
            if cell is not None and cell.tbt_ms is not None:
                text += f"; {_f(cell.per_request_tps, 0)}/s, {cell.tbt_ms:g} ms"
            if cell is not None and cell.step_ms_median is not None:
                text += f", step {cell.step_ms_median:g} ms"
            cells.append(text)
        rows.append([row, *cells])
    return ("context \\ running", *matrix.columns), rows


def launch_json(launch: Launch) -> dict[str, Any]:
    """A launch for `--json`: where it is, its facts and its arguments (None: not in the log)."""
    return {"launch": launch.label, "file": launch.file, "line": launch.line, "restart": launch.restart,
            "facts": dict(launch.facts), "args": launch.args}


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
    "per-req tok/s": "one stream's speed: generation tok/s summed over streams summed, the streams being "
    "the steps' mean generation requests where the log has iteration lines, else running over the row's "
    "decode-dominated intervals (generation tok/s at least half the prompt tok/s); the line under the "
    "tables says which",
    "TBT ms": "time between a stream's tokens: 1000 / per-req tok/s (Little's law), the speed-test "
    "matrix's figure; it holds scheduling, output processing and the front end; from running it also "
    "holds each request's wait for its first token after its scheduling and, running being an instant, "
    "streams out of the server part of an interval, which a benchmark's mean ITL and the iteration lines' "
    "cadence leave out (measured against vllm bench serve and vLLM's /metrics: docs/offline.md)",
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
    "ttft_s. The time between tokens (TBT ms) is Little's law over the stats intervals, a mean over each "
    "interval, not a percentile (its p90 needs vLLM's /metrics histograms or a benchmark client). With "
    "--enable-logging-iteration-details, the engine step time by running streams is a table of its own: the "
    "step's own part of the time between tokens."
)
_HEAD = (
    "launch", "engine", "model", "start", "span", "lines", "busy", "prompt tokens", "gen tokens",
    "peak gen tok/s", "median gen tok/s", "mean KV %", "waiting %", "TBT ms", "prefix hit %", "MM hit %",
)
TABLE_HEAD = (
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
    return _f(None if share is None else share * 100, 0)


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


def concurrency_cells(r: ConcurrencyRow) -> list[str]:
    """A concurrency row's cells, as the summary prints them (`TABLE_HEAD`)."""
    return [
        r.running, f"{r.intervals}{'*' if r.few else ''}", _f(r.generation_median), _f(r.generation_p90),
        _f(r.per_request_tps), _f(r.tbt_ms, 2), _f(r.prompt_median), _f(r.kv_cache_usage_median_pct),
        _pct(r.waiting_share),
    ]


def _text_table(head: tuple[str, ...], rows: list[list[str]], width: int | None = None) -> list[str]:
    """Aligned columns. With a `width`: a header wider than its column's cells is set on two lines, and
    a table still wider goes on in parts under each other, each part led by the first column (and an
    engine or context column after it)."""
    heads = [_two_lines(h, max((len(r[i]) for r in rows), default=0)) if width and i else ("", h)
             for i, h in enumerate(head)]
    widths = [max(len(heads[i][0]), len(heads[i][1]), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]

    def line(cells: list[str] | tuple[str, ...], columns: list[int]) -> str:
        return "  ".join(
            cells[i].ljust(widths[i]) if _left(head[i]) else cells[i].rjust(widths[i]) for i in columns
        ).rstrip()

    top, bottom = [top for top, _ in heads], [bottom for _, bottom in heads]
    out: list[str] = []
    for columns in _parts(head, widths, width):
        out += [""] if out else []
        out += [line(top, columns)] if any(top[i] for i in columns) else []
        out += [line(cells, columns) for cells in (bottom, *rows)]
    return out


def _two_lines(head: str, cells: int) -> tuple[str, str]:
    """`head` as (top, bottom) lines: cut at the space that makes the wider half narrowest, when it is
    wider than its column's `cells`; else ("", head)."""
    cuts = [i for i, c in enumerate(head) if c == " "]
    if len(head) <= cells or not cuts:
        return "", head
    cut = min(cuts, key=lambda i: (max(i, len(head) - i - 1), -i))
    return head[:cut], head[cut + 1:]


def _parts(head: tuple[str, ...], widths: list[int], width: int | None) -> list[list[int]]:
    """The columns of each part of a table cut to `width` (one part when it fits, or `width` is None)."""
    keys = list(range(2 if head[1:2] in (("engine",), ("context",)) else 1))
    parts: list[list[int]] = []
    for i in range(len(keys), len(head)):
        if not parts or (width is not None and sum(widths[c] + 2 for c in parts[-1]) + widths[i] > width):
            parts.append(list(keys))
        parts[-1].append(i)
    return parts or [keys]


def _md_table(head: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    align = ["---" if _left(h) else "---:" for h in head]
    return ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
            for cells in (list(head), align, *rows)]


def tbt_lines(g: GroupSummary, markdown: bool) -> list[str]:
    """After a group's tables: where their TBT ms came from (`tbt.tbt_note`; none without a figure)."""
    cells = g.matrix.cells if g.matrix is not None else []
    note = tbt_note(tbt_source([g.tbt_from, *(r.tbt_from for r in g.concurrency),
                                *(c.tbt_from for c in cells)]))
    return [] if note is None else ["", note if markdown else _wrap(note, "", "")]


def table_lines(head: tuple[str, ...], rows: list[list[str]], markdown: bool) -> list[str]:
    """A table as aligned text or Markdown, the summary's way (compare's and audit's tables)."""
    return _md_table(head, rows) if markdown else _text_table(head, rows)


def _spec_table(groups: list[GroupSummary]) -> Table | None:
    rows = [[g.launch, g.engine, str(s.lines), _f(s.drafted_tokens, 0), _f(s.accepted_tokens, 0),
             _f(s.acceptance_pct), _f(s.mean_acceptance_length_median, 2)]
            for g in groups if (s := g.spec) is not None]
    return (_SPEC_HEAD, rows) if rows else None


def _transfer_table(groups: list[GroupSummary]) -> Table | None:
    rows = [[g.launch, g.engine, str(t.lines),
             *(_f(n, 0) for n in (t.succeeded, t.failed, t.failed_recv, t.expired_requests)),
             _f(t.gib, 2), _f(t.avg_transfer_ms_median, 3), _f(t.p90_transfer_ms_median, 3)]
            for g in groups if (t := g.transfers) is not None]
    return (_TRANSFER_HEAD, rows) if rows else None


def _title(g: GroupSummary, by: str) -> str:
    if by == "none" and g.launch.endswith("launches"):
        return f"all {g.launch}"
    if g.engine == "-":
        return g.launch
    return f"{g.launch}, engine{'s' if ',' in g.engine else ''} {g.engine}"


def _zone(summary: Summary) -> str:
    starts = [g.start for g in summary.groups if g.start]
    return f" ({starts[0].tzname()})" if starts and starts[0].tzname() else ""


WIDTH = 120
"""The text form's widest line: a wider table goes on in parts, the legend's lines are wrapped."""
EXPLAIN_HINT = "What each column means: logwatch summary --explain"


def _render_tables(summary: Summary, markdown: bool, asked: Asked, steps: list[StepTable],
                   explain: bool) -> str:
    table = _md_table if markdown else partial(_text_table, width=WIDTH)
    h = "## " if markdown else ""
    head = tuple(f"start{_zone(summary)}" if c == "start" else c for c in _HEAD)
    out = [f"{h}vLLM log summary (by {summary.by})", "", f"{h}Launches", ""]
    out += table(head, [_launch_row(g) for g in summary.groups])
    notes = [f"note: {note}" for note in _notes(summary)]
    out += ["", *(n if markdown else _wrap(n, "", "      ") for n in notes)] if notes else []
    tables = [("Speculative decoding", _spec_table(summary.groups)),
              ("KV transfers", _transfer_table(summary.groups)),
              ("Launch facts", facts_table(summary.launches)),
              ("MFU (--enable-mfu-metrics)", mfu_table(summary.groups))]
    for title, found in tables:
        if found is not None:
            out += ["", f"{h}{title}", "", *table(*found)]
    out += answer_lines(summary, asked, table, h)
    for g in summary.groups:
        out += ["", f"{h}Throughput by concurrency: {_title(g, summary.by)}", ""]
        rows = [concurrency_cells(r) for r in g.concurrency]
        out += table(TABLE_HEAD, rows) if rows else ["(nothing ran)"]
        if g.matrix is not None:
            out += ["", f"{h}Context x concurrency (estimated): {_title(g, summary.by)}", "",
                    f"cells: {matrix_cells(g.matrix)}", "", *table(*matrix_table(g.matrix))]
        out += tbt_lines(g, markdown)
    out += steps_lines(steps, table, h)
    legend = _legend(summary, bool(steps), markdown, asked) if explain else \
        ["", EXPLAIN_HINT]
    return "\n".join([*out, *legend, ""])


def _legend(summary: Summary, steps: bool, markdown: bool, asked: Asked) -> list[str]:
    """What the columns mean (`--explain`), after the tables: the data comes first."""
    h = "## " if markdown else ""
    bullet = "- " if markdown else "  "
    columns = [LAUNCH_COLUMNS, TABLE_COLUMNS]
    groups = summary.groups
    columns += [c for shown, c in ((any(g.spec for g in groups), SPEC_COLUMNS),
                                   (any(g.transfers for g in groups), TRANSFER_COLUMNS),
                                   (steps, STEP_COLUMNS), (any(g.mfu for g in groups), MFU_COLUMNS)) if shown]
    items = [[f"{name}: {text}" for name, text in c.items()] for c in columns]
    notes = fact_notes(summary.launches) + answer_notes(asked, "")
    items += [notes] if notes else []
    prose = [MATRIX_CAVEAT] if any(g.matrix for g in summary.groups) else []
    prose += [STEP_NOTE] if steps else []
    prose.append(NOT_IN_LOG)
    out = ["", f"{h}What the columns mean"]
    for group in items:
        out.append("")
        out += [bullet + item for item in group] if markdown else \
            [_wrap(item, bullet, bullet * 2) for item in group]
    for text in prose:
        out += ["", text if markdown else _wrap(text, "", "")]
    return out


def _wrap(text: str, first: str, rest: str) -> str:
    return textwrap.fill(text, WIDTH, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False)


def _notes(summary: Summary) -> list[str]:
    """What the reader must know to read the tables: servers that shared one log."""
    return [f"{g.stats_processes} vLLM processes wrote the stats lines of "
            f"engine{'s' if ',' in g.engine else ''} {g.engine} of {g.launch} at once (servers sharing one "
            "log): each one's tokens are counted over its own windows, but the intervals and medians mix "
            "their lines"
            for g in summary.groups if g.stats_processes > 1]


def _json_group(g: GroupSummary) -> dict[str, Any]:
    # The times are set below: asdict would deep-copy their zone (a zone read from /etc/localtime
    # cannot be copied).
    data: dict[str, Any] = json_safe(asdict(replace(g, start=None, end=None)))
    data["start"] = g.start.isoformat() if g.start else None
    data["end"] = g.end.isoformat() if g.end else None
    data["span_seconds"] = g.span_seconds
    return data


def render(summary: Summary, fmt: str = "text", asked: Asked | None = None, *,
           steps: list[StepTable] | None = None, explain: bool = False) -> str:
    """The summary as `text` (aligned columns, at most `WIDTH` wide), `markdown` (pipe tables) or `json`;
    `asked`: the answers asked for (`answers.py`: capacity at a target speed, cost at a price); `steps`:
    the engine step tables (`steps.py`); `explain`: what the columns mean, after the tables (JSON always
    holds it, under `columns`)."""
    asked = asked or Asked()
    steps = steps or []
    if fmt == "json":
        doc = {
            "by": summary.by,
            "groups": [_json_group(g) for g in summary.groups],
            "launches": [json_safe(launch_json(la)) for la in summary.launches],
            "matrix_caveat": MATRIX_CAVEAT,
            "columns": {**LAUNCH_COLUMNS, **TABLE_COLUMNS, **SPEC_COLUMNS, **TRANSFER_COLUMNS},
            "not_in_log": NOT_IN_LOG,
            "answers": json_safe(answers_json(summary, asked)),
            "notes": _notes(summary),
        }
        if steps:
            doc["steps"] = steps_json(steps)
        return json.dumps(doc, indent=2) + "\n"
    return _render_tables(summary, markdown=fmt == "markdown", asked=asked, steps=steps, explain=explain)
