"""`logwatch compare`: launches side by side. Pure: a `Summary` by launch (offline/summary/build.py) and the
preemptions counted per launch and running count in, a `Comparison` out; `offline/compare/tables.py`
renders and draws it.

What differs is told from the launches' arguments (`non-default args:`, `args: Namespace(...)`): an
argument differs when two launches that logged their arguments give it different values (an
argument a launch does not name has vLLM's default there). A launch whose start-up lines are not in
the log has its arguments unknown: it neither makes an argument differ nor hides a difference.
The start-up facts (vLLM version, KV cache size, resolved dtype, ...) are compared the same way.

Then what `compare` adds to the summary's answers (`offline/summary/answers.py`): the start-up durations
side by side, and each launch against the previous launch of the same script and model at the same
concurrency.

"Slower than the previous launch" is done here, not as an alert: PromQL cannot group samples by a
sample's value (the running count is a value, not a label) nor find "the previous launch" (no fixed
`offset` reaches it). Launches are ordered by their first stats line; a launch's script is its file
name without the extension and a trailing timestamp (the `script` label of a watch of a folder of
launch files), given by the command.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ...exporting.catalogue import STARTUP_PHASES
from ..reading.launches import Launch
from ..summary.build import ConcurrencyRow, GroupSummary, Summary
from ..summary.steps import StepTable
from ..summary.tables import FACT_COLUMNS, fact_text, launch_facts

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
