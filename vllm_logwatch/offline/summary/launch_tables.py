"""The summary's and compare's tables of launch facts, MFU and the context x concurrency matrix, as
(head, rows) for the text and Markdown renderers (`offline/summary/tables.py`, `offline/compare/tables.py`)
and as JSON-able dicts."""

from __future__ import annotations

from typing import Any

from ...shown import shown_number as _f
from ..reading.launches import Launch
from .facts import FACT_COLUMNS, fact_text, launch_facts
from .matrix import Matrix

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
