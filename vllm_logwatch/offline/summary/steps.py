"""The summary's engine-step tables, where the logs hold iteration lines
(`--enable-logging-iteration-details`): the time between tokens by running streams (the decode-only
steps' own time, p50 and p90, by their generation requests) and the prefill time per 1000 prompt
tokens (the prefill-only steps). Read by a pass of their own over the inputs, through `parse --kind
iterations`' lane (`offline/reading/details.py`; a SIMD search, cheap where there are none), beside the stats
summary.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..reading.details import ITERATION_COLUMNS, source_rows
from ..reading.inputs import resolve_inputs
from ..reading.stream import ScanStats

__all__ = ["STEP_COLUMNS", "StepRow", "StepTable", "collect_steps", "steps_json", "steps_lines"]

STEP_COLUMNS = {
    "running": "the step's generation requests (streams decoding at once)",
    "steps": "decode-only steps (no prompt in them) with that many streams",
    "step ms p50, p90": "their `iteration elapsed time`: the time between tokens at that concurrency, the "
                        "engine step's own part (vLLM's inter-token latency also holds the scheduling and "
                        "output update between steps: 10-25% more on a real CPU run)",
    "prefill ms / 1k tokens": "prefill-only steps: their time over their prompt tokens, x 1000",
}


_COLUMNS = tuple(ITERATION_COLUMNS.index(c) for c in (
    "engine", "context_tokens", "generation_requests", "elapsed_ms", "phase", "dummy"))


@dataclass(frozen=True)
class StepRow:
    running: int
    steps: int
    p50_ms: float
    p90_ms: float


@dataclass
class StepTable:
    """One input's steps of one engine."""

    file: str
    engine: int | None
    rows: list[StepRow] = field(default_factory=list)
    prefill_steps: int = 0
    prefill_ms_per_1k: float | None = None


def collect_steps(inputs: list[str], year: int | None = None, tz: str | None = None) -> list[StepTable]:
    """The step tables of every input that has iteration lines."""
    sources, zone = resolve_inputs(inputs, tz)
    tables: list[StepTable] = []
    for source in sources:
        if source.is_stream:  # read once already by the summary
            continue
        decode: dict[int | None, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        prefill: dict[int | None, list[float]] = {}
        for row in source_rows(source, "iterations", zone, year, ScanStats()):
            engine, ctx_tokens, gen, ms, phase, dummy = (row[i] for i in _COLUMNS)
            if dummy:
                continue
            if phase == "decode":
                decode[engine][gen].append(ms)
            elif phase == "prefill" and ctx_tokens:
                acc = prefill.setdefault(engine, [0, 0.0, 0.0])
                acc[0], acc[1], acc[2] = acc[0] + 1, acc[1] + ms, acc[2] + ctx_tokens
        for engine in sorted(set(decode) | set(prefill), key=lambda n: -1 if n is None else n):
            rows = []
            for running, times in sorted(decode[engine].items()):
                p50, p90 = np.percentile(np.array(times), [50, 90])
                rows.append(StepRow(running, len(times), round(float(p50), 2), round(float(p90), 2)))
            steps, ms, tokens = prefill.get(engine, (0, 0.0, 0.0))
            tables.append(StepTable(source.name, engine, rows, int(steps),
                                    round(1000 * ms / tokens, 2) if tokens else None))
    return tables


def steps_lines(tables: list[StepTable], table: Any, h: str) -> list[str]:
    """The tables as the summary's text or Markdown (`table`: its table writer; `h`: its heading mark)."""
    out: list[str] = []
    for t in tables:
        engine = "" if t.engine is None else f", engine {t.engine}"
        prefill = "-" if t.prefill_ms_per_1k is None else f"{t.prefill_ms_per_1k:g} ({t.prefill_steps} steps)"
        out += ["", f"{h}Time between tokens by running streams (engine steps): {t.file}{engine}", ""]
        out += table(("running", "steps", "step ms p50", "step ms p90"),
                     [[str(r.running), f"{r.steps:,}", f"{r.p50_ms:g}", f"{r.p90_ms:g}"] for r in t.rows])
        out += ["", f"prefill ms / 1k tokens: {prefill}"]
    if tables:
        bullet = "- " if h else "  "
        out += ["", *(f"{bullet}{name}: {text}" for name, text in STEP_COLUMNS.items())]
        out += ["", "These come from vLLM's iteration lines (--enable-logging-iteration-details), which the "
                "stats lines' note above does not count on."]
    return out


def steps_json(tables: list[StepTable]) -> list[dict[str, Any]]:
    return [{"file": t.file, "engine": t.engine, "prefill_steps": t.prefill_steps,
             "prefill_ms_per_1k_tokens": t.prefill_ms_per_1k,
             "decode": [{"running": r.running, "steps": r.steps, "p50_ms": r.p50_ms, "p90_ms": r.p90_ms}
                        for r in t.rows]} for t in tables]
