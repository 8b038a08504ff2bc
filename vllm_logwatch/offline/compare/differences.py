"""`logwatch compare`: launches side by side. Pure: a `Summary` by launch (offline/summary/build.py) and the
preemptions counted per launch and running count in, a `Comparison` out, rendered as aligned text,
Markdown or JSON and drawn (`build_compare_figure`). docs/compare.md says what differs and how it is
told, what is set against the previous launch of a script (and why here, not as an alert) and what the
figure shows; its rows are the tables' own, so the picture and the tables never disagree.

matplotlib (the `plot` extra) is imported only for the figure, on the Agg canvas, without pyplot.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from ...exporting.catalogue import STARTUP_PHASES
from ...shown import json_safe
from ...shown import shown_number as _f
from ..plot.collect import literal, require_matplotlib
from ..reading.launches import Launch
from ..summary.answers import Asked, answer_lines, answer_notes, answers_json, pareto
from ..summary.build import ConcurrencyRow, GroupSummary, Summary
from ..summary.matrix import MATRIX_CAVEAT
from ..summary.steps import STEP_COLUMNS, StepTable, steps_json, steps_lines
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

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

IGNORED_ARGS = ("host", "port", "model_tag")
"""Arguments never shown as differing: where the server listened, and `model_tag` (the model again)."""
LOGGING_ARGS = frozenset({
    "enable_mfu_metrics", "disable_log_stats", "enable_log_requests", "disable_log_requests",
    "enable_log_outputs", "max_log_len", "uvicorn_log_level", "disable_uvicorn_access_log",
    "disable_fastapi_docs", "log_error_stack", "enable_server_load_tracking",
})
"""Arguments that change what vLLM logs or serves about itself, not how fast it runs: shown in the
differing arguments, never in a legend (a launch labelled `enable_mfu_metrics=on` says nothing)."""
DEFAULT = "(default)"
"""The value shown for an argument a launch did not name (vLLM's default)."""
_TAG_CHARS = 80


@dataclass
class LaunchComparison:
    launch: Launch
    group: GroupSummary
    tag: str
    """What tells it apart from the others, for legends: its name and the differing arguments' values,
    else the differing facts', else its name alone."""
    name: str
    """Its name in every table: its label (`Launch.label`), or, when another launch's label is the same
    (`exp-a/serve.log`, `exp-b/serve.log`), as many of its path's last parts as tell them apart."""
    preemptions: dict[str, int | None] = field(default_factory=dict)
    """Concurrency row label -> preemptions summed from its lines' `Preemptions:` field (None: the
    launch's lines have no such field)."""
    steps: list[StepTable] = field(default_factory=list)
    """The engine step time by running streams of the launch's file (offline/summary/steps.py), one
    table per engine; empty without iteration lines, or when the file holds more than one launch
    (its steps cannot be told apart by launch: `steps_shared`)."""
    steps_shared: bool = False
    """The launch's file has iteration lines but holds other launches too."""


@dataclass
class Comparison:
    launches: list[LaunchComparison]
    differing_args: dict[str, list[Any]]
    """Argument -> its value in each launch, in launch order (DEFAULT: not named; None: unknown)."""
    differing_facts: dict[str, list[Any]]
    args_unknown: list[str]
    """Labels of the launches without an arguments line."""


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _differing(values: list[dict[str, Any] | None], keys: list[str], missing: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for key in keys:
        row = [None if v is None else v.get(key, missing) for v in values]
        known = {_key(x) for x, v in zip(row, values, strict=True) if v is not None}
        if len(known) > 1:
            out[key] = row
    return out


def _short(value: Any) -> str:
    """A value for a legend: a local path by its last part."""
    text = fact_text(value)
    return text.rsplit("/", 1)[-1] if text.startswith(("/", "<", ".", "~")) else text


def _unusual(values: list[Any], index: int) -> bool:
    """Is launch `index`'s value not the most common one among the known values?"""
    known = [_key(v) for v in values if v is not None]
    common = max(known, key=known.count)
    return values[index] is not None and _key(values[index]) != common


def _legend_order(table: dict[str, list[Any]], index: int) -> list[str]:
    """The keys for a legend: the model first, the served name only without the model, none whose
    value is `(default)` there, no logging switch (`LOGGING_ARGS`)."""
    keys = sorted((k for k in table if k not in LOGGING_ARGS),
                  key=lambda k: (k not in ("model", "served_model_name"), k))
    if "model" in table and "served_model_name" in keys:
        keys.remove("served_model_name")
    return [k for k in keys if table[k][index] != DEFAULT]


def launch_names(launches: list[Launch]) -> list[str]:
    """Each launch's name: its label, or with as many folders before it as tell it from the launches of
    the same label.

    >>> launch_names([Launch(0, "/x/exp-a/serve.log", 1), Launch(1, "/x/exp-b/serve.log", 1),
    ...               Launch(2, "/x/o.log", 1)])
    ['exp-a/serve.log', 'exp-b/serve.log', 'o.log']
    """
    labels = [la.label for la in launches]
    paths = [os.path.abspath(la.file).split(os.sep) for la in launches]
    names = list(labels)
    for k in range(2, max((len(p) for p in paths), default=0) + 1):
        if len(set(names)) == len(names):
            break
        names = [label if labels.count(label) == 1 else
                 "/".join(path[-k:]) + (f" #{la.restart + 1}" if la.restart else "")
                 for label, path, la in zip(labels, paths, launches, strict=True)]
    return names


def _tag(index: int, name: str, args: dict[str, list[Any]], facts: dict[str, list[Any]]) -> str:
    """The launch's label and what sets it apart: the differing arguments where its value is not the
    most common one (else all of its differing arguments), else the same of the differing facts."""
    parts: list[str] = []
    for table, is_args in ((args, True), (facts, False)):
        keys = _legend_order(table, index)
        shown = {k: f"{k}={_short(table[k][index])}" if is_args
                 else f"{FACT_COLUMNS[k][0]} {_short(table[k][index])}" for k in keys}
        parts = [shown[k] for k in keys if _unusual(table[k], index)]
        parts = parts or [shown[k] for k in keys if table[k][index] is not None]
        if parts:
            break
    text = ", ".join(parts)
    if len(text) > _TAG_CHARS:
        text = text[:_TAG_CHARS - 3] + "..."
    return f"{name}: {text}" if text else name


def _row_preemptions(row: ConcurrencyRow, counts: dict[int, int]) -> int | None:
    if not counts:
        return None
    hi = row.hi
    return sum(n for running, n in counts.items() if running >= row.lo and (hi is None or running <= hi))


def compare(summary: Summary, preemptions: dict[tuple[int, int], int] | None = None,
            steps: list[StepTable] | None = None) -> Comparison:
    """The comparison of a summary by launch; `preemptions`: (launch index, running) -> preemptions;
    `steps`: the step tables of the inputs (offline/summary/steps.py `StepCollector`), given to the
    launch of their file when it is the file's only launch."""
    by_index = {la.index: la for la in summary.launches}
    pairs = [(by_index[g.launch_index], g) for g in summary.groups
             if g.launch_index is not None and g.launch_index in by_index]
    all_args = [la.args for la, _ in pairs]
    arg_keys = sorted({k for a in all_args if a is not None for k in a if k not in IGNORED_ARGS})
    logged = sum(a is not None for a in all_args)
    differing_args = _differing(all_args, arg_keys, DEFAULT) if logged > 1 else {}
    facts = [launch_facts(la) or None for la, _ in pairs]
    fact_keys = [k for k in FACT_COLUMNS if any(f is not None and k in f for f in facts)]
    differing_facts = {k: v for k, v in _differing(facts, fact_keys, None).items()
                       if sum(x is not None for x in v) > 1}
    counts: dict[int, dict[int, int]] = {}
    for (index, running), n in (preemptions or {}).items():
        counts.setdefault(index, {})[running] = n  # the keys are unique: nothing to add up
    per_file = Counter(la.file for la in summary.launches)
    launches = []
    names = launch_names([la for la, _ in pairs])
    for i, (launch, group) in enumerate(pairs):
        mine = counts.get(launch.index, {})
        tables = [t for t in steps or [] if t.file == launch.file]
        shared = bool(tables) and per_file[launch.file] > 1
        launches.append(LaunchComparison(
            launch=launch, group=group, tag=_tag(i, names[i], differing_args, differing_facts), name=names[i],
            preemptions={r.running: _row_preemptions(r, mine) for r in group.concurrency},
            steps=[] if shared else tables, steps_shared=shared,
        ))
    return Comparison(launches=launches, differing_args=differing_args, differing_facts=differing_facts,
                      args_unknown=[name for (la, _), name in zip(pairs, names, strict=True)
                                    if la.args is None])


SLOWER_SHARE = 0.10
"""A row is slower when its median generation tok/s is this share or more below the previous launch's."""
MIN_INTERVALS = 2
"""Rows compared only when both launches have at least this many intervals in them."""


def comparison_summary(cmp: Comparison) -> Summary:
    """The compared launches as a summary by launch (what `summary/answers.py` reads)."""
    return Summary(by="launch", groups=[c.group for c in cmp.launches],
                   launches=[c.launch for c in cmp.launches])


def startup_rows(cmp: Comparison) -> list[list[Any]]:
    """Phase -> its seconds in each launch (None: not logged), the phases some launch logged."""
    rows = []
    for phase, key in STARTUP_PHASES.items():
        values = [c.launch.facts.get(key) for c in cmp.launches]
        if any(v is not None for v in values):
            rows.append([phase, *values])
    return rows


@dataclass
class Regression:
    launch: str
    previous: str
    running: str
    intervals: tuple[int, int]
    """Intervals of the row in the launch and in the previous one."""
    gen_tps: float
    previous_gen_tps: float

    @property
    def change(self) -> float:
        return self.gen_tps / self.previous_gen_tps - 1.0 if self.previous_gen_tps else 0.0

    @property
    def slower(self) -> bool:
        return self.change <= -SLOWER_SHARE


def _start(c: LaunchComparison) -> float:
    return c.group.start.timestamp() if c.group.start is not None else float("inf")


def regressions(cmp: Comparison, scripts: dict[int, str]) -> list[Regression]:
    """Every concurrency row a launch shares with the previous launch of its script serving the same
    model (both with `MIN_INTERVALS`), its median generation tok/s then and now; `scripts`: launch
    index -> script. (Launch files named alike hold other models too: `serve_<time>.log`.)"""
    last: dict[tuple[str, str | None], LaunchComparison] = {}
    out = []
    for c in sorted(cmp.launches, key=_start):
        script = scripts.get(c.launch.index)
        if script is None:
            continue
        before = last.get((script, c.group.model_name))
        last[(script, c.group.model_name)] = c
        if before is None:
            continue
        rows = {r.running: r for r in before.group.concurrency if r.intervals >= MIN_INTERVALS}
        for r in c.group.concurrency:
            old = rows.get(r.running)
            if old is not None and r.intervals >= MIN_INTERVALS:
                out.append(Regression(c.name, before.name, r.running,
                                      (r.intervals, old.intervals), r.generation_median,
                                      old.generation_median))
    return out


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
    return steps_lines(c.steps, partial(table_lines, markdown=markdown), "### " if markdown else "",
                       files=False)


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
    return out + answer_lines(comparison_summary(cmp), asked, partial(table_lines, markdown=markdown), h)


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


COMPARE_FIGSIZE = (11.0, 12.0)
_MOST_INTERVALS = 100
"""Past this many intervals a row's dot grows no more."""
_TICK_GAP = 4.0
"""Pixels between two tick labels at least."""


def row_x(row: ConcurrencyRow) -> float:
    """Where a concurrency row sits on the log2 running axis: its count, or its bucket's geometric middle
    (an open bucket `>128`: its lower end).

    >>> from vllm_logwatch.offline.summary.build import ConcurrencyRow
    >>> row_x(ConcurrencyRow("5-8", 5, 8, 1, 0, 0, 0, 0, 0, None, 0))
    6.324555320336759
    """
    if row.hi is None or row.hi == row.lo:
        return float(row.lo)
    return math.sqrt(row.lo * row.hi)


def runs(rows: list[ConcurrencyRow]) -> list[list[ConcurrencyRow]]:
    """The rows cut where a running count lies between two of them with no row of its own: a line joins
    only the rows of one run, so none is drawn across counts the log has no data for.

    >>> from vllm_logwatch.offline.summary.build import ConcurrencyRow
    >>> row = lambda lo, hi: ConcurrencyRow(str(lo), lo, hi, 1, 0, 0, 0, 0, 0, None, 0)
    >>> [[r.running for r in run] for run in runs([row(1, 1), row(2, 2), row(3, 4), row(9, 16)])]
    [['1', '2', '3'], ['9']]
    """
    out: list[list[ConcurrencyRow]] = []
    for r in rows:
        before = out[-1][-1] if out else None
        if before is not None and before.hi is not None and r.lo == before.hi + 1:
            out[-1].append(r)
        else:
            out.append([r])
    return out


def frontier(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The non-dominated points (no other point is as high on both axes and higher on one), left to
    right: along it one axis rises as the other falls, so a line through them never crosses itself.

    >>> frontier([(1, 9), (3, 5), (2, 4), (3, 6), (5, 1)])
    [(1, 9), (3, 6), (5, 1)]
    """
    kept: list[tuple[float, float]] = []
    for x, y in sorted(points, key=lambda p: (-p[0], -p[1])):  # right to left, the higher first
        if not kept or y > kept[-1][1]:
            kept.append((x, y))
    return kept[::-1]


def legend_names(cmp: Comparison) -> list[str]:
    """Each launch's name in the legend: its folder's name when every file is in a folder of its own
    and the folders' names differ (vLLM's `serve_<time>.log` names tell launches apart by time only;
    `mns8-prefix/` says what the run was), with `#2` ... for a restart inside a file; else its label."""
    files = [c.launch.file for c in cmp.launches]
    folders = {f: os.path.basename(os.path.dirname(os.path.abspath(f))) for f in files}
    by_folder: dict[str, set[str]] = {}
    for f, folder in folders.items():
        by_folder.setdefault(folder, set()).add(f)
    if len(files) < 2 or any(len(group) > 1 for group in by_folder.values()) or "" in by_folder:
        return [c.name for c in cmp.launches]
    return [folders[c.launch.file] + (f" #{c.launch.restart + 1}" if c.launch.restart else "")
            for c in cmp.launches]


def marker_area(intervals: int) -> float:
    """A row's marker area (points^2): grows with the intervals behind its median, so a median of one
    interval does not look as solid as one of fifty.

    >>> [round(marker_area(n)) for n in (1, 10, 50)]
    [8, 22, 74]
    """
    return 6.0 + 2.0 * math.pow(min(intervals, _MOST_INTERVALS), 0.9)


def marker_alpha(intervals: int) -> float:
    """A row's marker opacity: faint for one interval, solid from ten.

    >>> [round(marker_alpha(n), 2) for n in (1, 5, 10, 50)]
    [0.35, 0.64, 1.0, 1.0]
    """
    return 0.35 + 0.65 * (min(intervals, 10) - 1) / 9


def build_compare_figure(cmp: Comparison, gpus: int | None = None) -> Figure:
    """The figure of the comparison (nothing is written); `gpus`: `--gpus` for the Pareto view. Tick
    labels that would overlap are thinned (measured by the renderer, buckets and powers of two kept
    first)."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_rgb
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, NullLocator

    fig = Figure(figsize=COMPARE_FIGSIZE, layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(3, 1, height_ratios=(1.6, 1, 1.2))
    top = fig.add_subplot(grid[0])
    bottom = fig.add_subplot(grid[1], sharex=top)
    top.tick_params(labelbottom=False)
    _pareto(fig.add_subplot(grid[2]), cmp, gpus)
    ticks: dict[float, str] = {}
    names = legend_names(cmp)
    most = 1
    for i, c in enumerate(cmp.launches):
        rows = c.group.concurrency
        if not rows:
            continue
        color = f"C{i % 10}"
        xs = [row_x(r) for r in rows]
        ticks.update({x: r.running for x, r in zip(xs, rows, strict=True)})
        counts = [r.intervals for r in rows]
        most = max(most, *counts)
        sizes = [marker_area(n) for n in counts]
        colors = [(*to_rgb(color), marker_alpha(n)) for n in counts]
        label = literal(names[i] + c.tag[len(c.name):])
        for n, run in enumerate(runs(rows)):  # a line only between rows with no count between them
            x = [row_x(r) for r in run]
            top.fill_between(x, [r.generation_p10 for r in run], [r.generation_p90 for r in run],
                             color=color, alpha=0.15, linewidth=0)
            top.plot(x, [r.generation_median for r in run], color=color, linewidth=1.6,
                     label=label if n == 0 else None)
            bottom.plot(x, [r.per_request_median for r in run], color=color, linewidth=1.6,
                        label=label if n == 0 else None)
        top.scatter(xs, [r.generation_median for r in rows], s=sizes, c=colors, zorder=3, linewidths=0)
        bottom.scatter(xs, [r.per_request_median for r in rows], s=sizes, c=colors, zorder=3, linewidths=0)
    top.set_title("Generation throughput by running requests (median, band p10-p90)", loc="left",
                  fontsize=11, fontweight="bold")
    top.set_ylabel("generation tokens/s (all requests)")
    bottom.set_title("Per-request generation throughput (median)", loc="left", fontsize=11,
                     fontweight="bold")
    bottom.set_ylabel("tokens/s per request")
    bottom.set_xlabel("requests running (log scale; buckets at their middle)")
    for ax in (top, bottom):
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    if ticks:
        bottom.xaxis.set_minor_locator(NullLocator())
        kept = _thinned(fig, bottom, ticks, FixedLocator)
        bottom.xaxis.set_major_locator(FixedLocator(kept))
        bottom.set_xticklabels([ticks[x] for x in kept])
        top.legend(loc="upper left", fontsize="small")
        shown = sorted({n for n in (1, 10, 50, most) if n <= most})
        sizes_legend = [Line2D([], [], linestyle="", marker="o", color="gray",
                               markersize=marker_area(n) ** 0.5, alpha=marker_alpha(n),
                               label=f"{n} interval{'s' if n != 1 else ''}") for n in shown]
        bottom.legend(handles=sizes_legend, loc="upper right", fontsize="small",
                      title="a dot's size: intervals in its row", title_fontsize="small")
    else:
        top.text(0.5, 0.5, "nothing ran in these launches", transform=top.transAxes, ha="center",
                 color="gray")
    return fig


def _pareto(ax: Any, cmp: Comparison, gpus: int | None) -> None:
    """Per-stream tok/s against total tok/s per GPU: each launch's points (by running count, faint) and
    its frontier (`frontier`: the points no other beats on both axes) as a line."""
    summary = comparison_summary(cmp)
    tags = {c.group.launch: c.tag for c in cmp.launches}
    for i, curve in enumerate(pareto(summary, gpus)):
        points = curve["points"]
        if not points:
            continue
        xs, ys = [p["total_tps_per_gpu"] for p in points], [p["per_stream_tps"] for p in points]
        best = frontier(list(zip(xs, ys, strict=True)))
        ax.scatter(xs, ys, s=16, color=f"C{i % 10}", alpha=0.45, linewidths=0, gid=curve["launch"])
        name = literal(tags.get(curve["launch"], curve["launch"]))
        ax.plot([x for x, _ in best], [y for _, y in best], color=f"C{i % 10}", marker="o", markersize=4,
                linewidth=1.2, label=f"{name} ({curve['gpus']} GPU)")
        for p, x, y in zip(points, xs, ys, strict=True):
            ax.annotate(str(p["running"]), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_title("Pareto frontier: per-stream tok/s against total tok/s per GPU (median, nothing waiting; "
                 "labels: running)", loc="left", fontsize=11, fontweight="bold")
    ax.set_xlabel("generation tokens/s per GPU (all streams)")
    ax.set_ylabel("tokens/s per stream")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)


def _thinned(fig: Figure, ax: Axes, ticks: dict[float, str], locator: Any) -> list[float]:
    """The tick positions whose labels do not overlap once drawn: buckets and powers of two first, then
    the other counts from the left, each kept only if its label clears the ones kept (4 px apart)."""
    positions = sorted(ticks)
    ax.xaxis.set_major_locator(locator(positions))
    ax.set_xticklabels([ticks[x] for x in positions])
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    boxes = {x: label.get_window_extent(renderer)
             for x, label in zip(positions, ax.get_xticklabels(), strict=True)}

    def rank(x: float) -> tuple[int, float]:
        text = ticks[x]
        exact_power = text.isdigit() and (int(text) & (int(text) - 1)) == 0
        return (0 if not text.isdigit() or exact_power else 1, x)

    kept: list[float] = []
    for x in sorted(positions, key=rank):
        box = boxes[x]
        if all(box.x1 + _TICK_GAP <= boxes[k].x0 or boxes[k].x1 + _TICK_GAP <= box.x0 for k in kept):
            kept.append(x)
    return sorted(kept)
