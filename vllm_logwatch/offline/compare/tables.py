"""Render a `Comparison` (offline/compare/differences.py) as aligned text, Markdown or JSON: the differing
arguments and facts first, then each launch's tables."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from ...shown import json_safe
from ...shown import shown_number as _f
from ..summary.answers import Asked, answer_lines, answer_notes, answers_json
from ..summary.build import ConcurrencyRow
from ..summary.matrix import MATRIX_CAVEAT
from ..summary.steps import STEP_COLUMNS, steps_json, steps_lines
from ..summary.tables import (
    FACT_COLUMNS,
    NOT_IN_LOG,
    TABLE_COLUMNS,
    TABLE_HEAD,
    concurrency_cells,
    fact_text,
    launch_facts,
    launch_json,
    matrix_table,
    matrix_title,
    table_lines,
    tbt_lines,
)
from .differences import (
    DEFAULT,
    IGNORED_ARGS,
    MIN_INTERVALS,
    SLOWER_SHARE,
    Comparison,
    LaunchComparison,
    Regression,
    comparison_summary,
    regressions,
    startup_rows,
)

_HEAD = (*TABLE_HEAD, "preemptions")
_PREEMPTIONS = ("preemptions: summed from the lines' Preemptions field ('-': the launch's lines have none; "
                "vLLM 0.32 on CPU never prints it)")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{_f(value)}%"


def _value(value: Any) -> str:
    if value is None:
        return "? (not logged)"
    return value if value == DEFAULT else fact_text(value)


def _row_json(r: ConcurrencyRow, preemptions: int | None) -> dict[str, Any]:
    return {"running": r.running, "running_min": r.lo, "running_max": r.hi, "intervals": r.intervals,
            "gen_tps_median": r.generation_median, "gen_tps_p90": r.generation_p90,
            "gen_tps_p10": r.generation_p10, "per_request_tps_median": r.per_request_median,
            "per_request_tps": r.per_request_tps, "tbt_ms": r.tbt_ms, "tbt_from": r.tbt_from,
            "decode_intervals": r.decode_intervals,
            "few_intervals": r.few,
            "prompt_tps_median": r.prompt_median, "kv_cache_usage_median_pct": r.kv_cache_usage_median_pct,
            "waiting_share": r.waiting_share, "preemptions": preemptions}


def _launch_json(c: LaunchComparison) -> dict[str, Any]:
    g = c.group
    return {
        **launch_json(c.launch), "label": c.tag, "model_name": g.model_name,
        "stats_lines": g.lines, "busy_intervals": g.busy_intervals,
        "generation_tokens": g.generation_tokens, "prompt_tokens": g.prompt_tokens,
        "median_generation_tps": g.median_generation, "peak_generation_tps": g.peak_generation,
        "prefix_cache_hit_rate_pct": g.prefix_cache_hit_rate_pct,
        "mm_cache_hit_rate_pct": g.mm_cache_hit_rate_pct,
        "by_concurrency": [_row_json(r, c.preemptions.get(r.running)) for r in g.concurrency],
        "spec": asdict(g.spec) if g.spec else None, "mfu": asdict(g.mfu) if g.mfu else None,
        "matrix": asdict(g.matrix) if g.matrix else None,
        "steps": steps_json(c.steps), "steps_shared_with_other_launches": c.steps_shared,
    }


def _regression_json(r: Regression) -> dict[str, Any]:
    return {"launch": r.launch, "previous": r.previous, "running": r.running, "intervals": list(r.intervals),
            "gen_tps_median": r.gen_tps, "previous_gen_tps_median": r.previous_gen_tps,
            "change": r.change, "slower": r.slower}


def _json(cmp: Comparison, asked: Asked, scripts: dict[int, str]) -> str:
    doc = {
        "launches": [_launch_json(c) for c in cmp.launches],
        "differing_args": cmp.differing_args,
        "differing_facts": cmp.differing_facts,
        "args_unknown": cmp.args_unknown,
        "ignored_args": list(IGNORED_ARGS),
        "columns": {**TABLE_COLUMNS, "preemptions": _PREEMPTIONS, **STEP_COLUMNS},
        "matrix_caveat": MATRIX_CAVEAT,
        "not_in_log": NOT_IN_LOG,
        "startup_seconds": {row[0]: row[1:] for row in startup_rows(cmp)},
        "against_previous": [_regression_json(r) for r in regressions(cmp, scripts)],
        "answers": answers_json(comparison_summary(cmp), asked),
    }
    return json.dumps(json_safe(doc), indent=2, default=str) + "\n"


def _differences(cmp: Comparison, markdown: bool, h: str) -> list[str]:
    labels = [c.name for c in cmp.launches]
    out = [f"{h}Launches", ""]
    out += table_lines(("launch", "model", "vLLM", "file", "line", "legend"),
                       [[c.name, c.group.model_name or "-", c.launch.vllm_version or "-",
                         c.launch.file, str(c.launch.line), c.tag] for c in cmp.launches], markdown)
    out += ["", f"{h}Arguments that differ", ""]
    if len(cmp.launches) < 2:
        out.append("(one launch: nothing to compare it with)")
    elif cmp.differing_args:
        rows = [[k, *map(_value, v)] for k, v in cmp.differing_args.items()]
        out += table_lines(("argument", *labels), rows, markdown)
    elif len(cmp.args_unknown) >= len(cmp.launches) - 1:
        out.append("(not known: fewer than two launches logged their arguments)")
    else:
        out.append("(none: the launches that logged their arguments give the same ones; "
                   f"{', '.join(IGNORED_ARGS)} are not compared)")
    if cmp.args_unknown:
        out += ["", "Arguments unknown (no `non-default args:` or `args:` line in the log): "
                + ", ".join(cmp.args_unknown)]
    if cmp.differing_facts:
        out += ["", f"{h}Start-up facts that differ", ""]
        out += table_lines(("fact", *labels), [[FACT_COLUMNS[k][0], *map(_value, v)]
                                               for k, v in cmp.differing_facts.items()], markdown)
    return out


def _heading(text: str, markdown: bool, level: int = 2) -> str:
    return f"{'#' * level} {text}" if markdown else text


def _launch_tables(c: LaunchComparison, markdown: bool) -> list[str]:
    g = c.group
    out = ["", _heading(c.tag, markdown), ""]
    facts = launch_facts(c.launch)
    known = ", ".join(f"{FACT_COLUMNS[k][0]} {fact_text(v)}" for k, v in facts.items())
    out.append(f"{known}." if known else "Start-up lines not in the log: arguments and facts unknown.")
    out.append(f"Prefix cache hit rate at the end: {_pct(g.prefix_cache_hit_rate_pct)}, MM cache hit rate: "
               f"{_pct(g.mm_cache_hit_rate_pct)} (vLLM: over its last ~1000 requests).")
    s = g.spec
    out.append("Speculative decoding: none logged." if s is None else (
        f"Speculative decoding: {_f(s.drafted_tokens, 0)} drafted, {_f(s.accepted_tokens, 0)} accepted "
        f"({_f(s.acceptance_pct)}%), mean acceptance length {_f(s.mean_acceptance_length_median, 2)}."))
    if g.mfu is not None:
        out.append(f"MFU: {_f(g.mfu.tflops_median)} TF/s and {_f(g.mfu.gbps_median)} GB/s per device "
                   "(median).")
    if not g.concurrency:
        return [*out, "", "(nothing ran)"]
    rows = [[*concurrency_cells(r), _f(c.preemptions.get(r.running), 0)] for r in g.concurrency]
    out += ["", _heading("Throughput by concurrency", markdown, 3), "", *table_lines(_HEAD, rows, markdown)]
    if g.matrix is not None:
        title = matrix_title("Context x concurrency (estimated; median gen tok/s (intervals))", g.matrix)
        out += ["", _heading(title, markdown, 3), ""]
        out += table_lines(*matrix_table(g.matrix), markdown)
    return out + tbt_lines(g, markdown) + _step_tables(c, markdown)


def _step_tables(c: LaunchComparison, markdown: bool) -> list[str]:
    """The engine step time by running streams (summary/steps.py's tables), where the launch's file
    has iteration lines."""
    if c.steps_shared:
        return ["", "Engine step time: the file's iteration lines hold other launches too (see "
                "`logwatch summary` on it)."]
    return steps_lines(c.steps, lambda head, rows: table_lines(head, rows, markdown),
                       "### " if markdown else "", files=False)


def _answers(cmp: Comparison, markdown: bool, h: str, asked: Asked, scripts: dict[int, str]) -> list[str]:
    """Start-up seconds, each launch against the previous one of its script, capacity and cost."""
    labels = [c.name for c in cmp.launches]
    out: list[str] = []
    rows = startup_rows(cmp)
    if rows:
        out += ["", f"{h}Start-up (seconds)", ""]
        out += table_lines(("phase", *labels), [[r[0], *(_f(v, 2) for v in r[1:])] for r in rows], markdown)
    found = regressions(cmp, scripts)
    out += ["", f"{h}Against the previous launch of the same script", ""]
    if found:
        out += table_lines(
            ("launch", "previous", "running", "intervals", "gen tok/s", "before", "change", "slower"),
            [[r.launch, r.previous, r.running, f"{r.intervals[0]}/{r.intervals[1]}", _f(r.gen_tps),
              _f(r.previous_gen_tps), f"{r.change * 100:+.0f}%", "yes" if r.slower else ""] for r in found],
            markdown)
    else:
        out.append(f"(no launch shares a running count, {MIN_INTERVALS}+ intervals each, with the previous "
                   "launch of its script)")
    def table(head: tuple[str, ...], rows: list[list[str]]) -> list[str]:
        return table_lines(head, rows, markdown)

    return out + answer_lines(comparison_summary(cmp), asked, table, h)


def render_comparison(cmp: Comparison, fmt: str = "text", asked: Asked | None = None,
                      scripts: dict[int, str] | None = None) -> str:
    """The comparison as `text`, `markdown` or `json`; `asked`: the answers asked for (capacity at a
    target speed, cost at a price); `scripts`: launch index -> its script (for the previous launch)."""
    asked, scripts = asked or Asked(), scripts or {}
    if fmt == "json":
        return _json(cmp, asked, scripts)
    markdown = fmt == "markdown"
    h = "## " if markdown else ""
    out = [f"{h}vLLM launches compared ({len(cmp.launches)})", ""]
    out += _differences(cmp, markdown, h)
    out += _answers(cmp, markdown, h, asked, scripts)
    for c in cmp.launches:
        out += _launch_tables(c, markdown)
    bullet = "- " if markdown else "  "
    out += ["", f"{h}What the columns mean", ""]
    out += [f"{bullet}{name}: {text}" for name, text in TABLE_COLUMNS.items()]
    out += [f"{bullet}{_PREEMPTIONS}"]
    out += [f"{bullet}against the previous launch: the median gen tok/s of each running count both launches "
            f"have ({MIN_INTERVALS}+ intervals each); slower: {SLOWER_SHARE:.0%} or more below it (a "
            "launch's script: its file name without a trailing timestamp)"]
    out += answer_notes(asked, bullet)
    if any(c.steps for c in cmp.launches):
        out += [f"{bullet}engine step time, {name}: {text}" for name, text in STEP_COLUMNS.items()]
    if any(c.group.matrix for c in cmp.launches):
        out += ["", MATRIX_CAVEAT]
    out += ["", NOT_IN_LOG, ""]
    return "\n".join(out)
