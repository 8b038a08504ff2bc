"""The summary's engine-step tables, where the logs hold iteration lines
(`--enable-logging-iteration-details`): the engine step time by running streams (the decode-only
steps' own time, p50 and p90, by their generation requests; not the time between tokens, which also
holds scheduling, output processing and the front end: `build.py`'s TBT) and the prefill time per 1000
prompt tokens (the prefill-only steps). Filled from the step records of the summary's own pass
(`iter_summary_records(..., steps=True)`), handed over by `summarize` (its `on_step`), which also reads
their cadence for the time between tokens.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...parsing.columns import step_phase
from ...parsing.events import IterationStats
from ...shown import shown_number as _f
from ..reading.launches import Launch
from .build import Summary
from .matrix import add_step_times

STEP_COLUMNS = {
    "running": "the step's generation requests (streams decoding at once)",
    "steps": "decode-only steps (no prompt in them) with that many streams",
    "step ms p50, p90": "their `iteration elapsed time`: the engine step's own time, from after vLLM "
                        "scheduled the step until the model's output is back; not the time between tokens "
                        "(TBT ms in the concurrency table), which also holds the scheduling, the output "
                        "processing and the front end between steps",
    "prefill ms / 1k tokens": "prefill-only steps: their time over their prompt tokens, x 1000",
}

STEP_NOTE = ("The engine step tables come from vLLM's iteration lines (--enable-logging-iteration-details), "
             "not from the stats lines.")


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


class StepCollector:
    """The step tables of the inputs, by file and engine, from the step records of the summary's pass."""

    def __init__(self) -> None:
        self._decode: dict[tuple[str, int | None], dict[int, array[float]]] = {}
        self._prefill: dict[tuple[str, int | None], list[float]] = {}
        self._kv: dict[str, tuple[array[int], array[float], array[float]]] = {}
        """Per file, its decode steps' running count, own KV usage (NaN: not printed) and ms (the matrix)."""

    def add(self, launch: Launch, e: IterationStats) -> None:
        """A step record of the summary's pass (`summarize`'s `on_step`)."""
        if e.dummy:
            return
        ctx, gen, ms = e.context_requests, e.generation_requests, e.elapsed_ms
        key = (launch.file, e.engine)
        decode = self._decode.get(key)
        if decode is None:
            decode = self._decode[key] = {}
        phase = step_phase(ctx, gen)
        if phase == "decode":
            times = decode.get(gen)
            if times is None:
                times = decode[gen] = array("d")  # 8 bytes a step (a list of floats took 32)
            times.append(ms)
            columns = self._kv.get(launch.file)
            if columns is None:
                columns = self._kv[launch.file] = (array("q"), array("d"), array("d"))
            columns[0].append(gen)
            columns[1].append(math.nan if e.kv_cache_usage_pct is None else e.kv_cache_usage_pct)
            columns[2].append(ms)
        elif phase == "prefill" and e.context_tokens:
            acc = self._prefill.setdefault(key, [0, 0.0, 0.0])
            acc[0], acc[1], acc[2] = acc[0] + 1, acc[1] + ms, acc[2] + e.context_tokens

    def add_to_matrices(self, summary: Summary) -> None:
        """Each matrix of a launch that is its file's only one gets its decode steps' times
        (`matrix.add_step_times`; a file of several launches: its steps cannot be told apart)."""
        per_file = Counter(launch.file for launch in summary.launches)
        files = {la.index: la.file for la in summary.launches}
        for g in summary.groups:
            file = files.get(g.launch_index) if g.launch_index is not None else None
            if g.matrix is None or file is None or per_file[file] != 1 or file not in self._kv:
                continue
            if summary.by == "engine" and sum(f == file for f, _ in self._decode) > 1:
                continue  # one engine's group: the file's steps are every engine's
            add_step_times(g.matrix, *self._kv[file])

    def tables(self) -> list[StepTable]:
        """The tables, files in the order read, engines in order within a file."""
        files = list(dict.fromkeys(file for file, _ in self._decode))
        out: list[StepTable] = []
        for file in files:
            engines = sorted((n for f, n in self._decode if f == file), key=lambda n: -1 if n is None else n)
            for engine in engines:
                decode = self._decode[(file, engine)]
                steps, ms, tokens = self._prefill.get((file, engine), (0, 0.0, 0.0))
                if not decode and not steps:
                    continue
                rows = []
                for running, times in sorted(decode.items()):
                    p50, p90 = np.percentile(np.frombuffer(times, dtype=np.float64), [50, 90])
                    rows.append(StepRow(running, len(times), round(float(p50), 2), round(float(p90), 2)))
                out.append(StepTable(file, engine, rows, int(steps),
                                     round(1000 * ms / tokens, 2) if tokens else None))
        return out


def steps_lines(tables: list[StepTable], table: Any, h: str, files: bool = True) -> list[str]:
    """The tables as the summary's text or Markdown (`table`: its table writer; `h`: its heading mark;
    `files`: the title names the file); what their columns mean is in the legend (`STEP_COLUMNS`)."""
    out: list[str] = []
    for t in tables:
        engine = "" if t.engine is None else f", engine {t.engine}"
        prefill = "-" if t.prefill_ms_per_1k is None else f"{t.prefill_ms_per_1k:g} ({t.prefill_steps} steps)"
        out += ["", f"{h}Engine step time by running streams{f': {t.file}' if files else ''}{engine}", ""]
        out += table(("running", "steps", "step ms p50", "step ms p90"),
                     [[str(r.running), _f(r.steps, 0), f"{r.p50_ms:g}", f"{r.p90_ms:g}"] for r in t.rows])
        out += ["", f"prefill ms / 1k tokens: {prefill}"]
    return out


def steps_json(tables: list[StepTable]) -> list[dict[str, Any]]:
    return [{"file": t.file, "engine": t.engine, "prefill_steps": t.prefill_steps,
             "prefill_ms_per_1k_tokens": t.prefill_ms_per_1k,
             "decode": [{"running": r.running, "steps": r.steps, "p50_ms": r.p50_ms, "p90_ms": r.p90_ms}
                        for r in t.rows]} for t in tables]
