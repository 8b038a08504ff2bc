"""What `compare` adds to the summary's answers (`offline/summary/answers.py`): the start-up durations
side by side, and each launch against the previous launch of the same script and model at the same
concurrency.

"Slower than the previous launch" is done here, not as an alert: PromQL cannot group samples by a
sample's value (the running count is a value, not a label) nor find "the previous launch" (no fixed
`offset` reaches it). Launches are ordered by their first stats line; a launch's script is its file
name without the extension and a trailing timestamp (the `script` label of a watch of a folder of
launch files), given by the command. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...exporting.catalogue import STARTUP_PHASES
from ..summary.build import Summary
from .differences import Comparison, LaunchComparison

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
