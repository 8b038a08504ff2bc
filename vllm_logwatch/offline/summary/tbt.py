"""The time between tokens: one definition for `summary` (its launch and concurrency tables and its
context x concurrency matrix), `compare` and `audit`. docs/offline.md ("Time between tokens") says what
it holds and how it compares with vLLM's and the benchmarks' figures.

Little's law: over intervals of one length, the mean time between a stream's tokens is sum(streams) /
sum(generation tok/s). An interval's streams are its steps' mean generation requests where the log has
iteration lines, else its Running count over the decode-dominated intervals only (`little`);
`Tbt.source` says which (`TbtFrom`), and the text and Markdown say it beside the figure (`tbt_note`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

DECODE_MIN_SHARE = 0.5
"""Decode-dominated: generation tok/s at least this share of prompt tok/s (an interval mostly spent in
prefills has requests counted in Running that produce no token yet)."""
TbtFrom = Literal["iteration lines", "stats lines", "iteration and stats lines"]
TBT_SHORT: dict[TbtFrom, str] = {"iteration lines": "steps", "stats lines": "Running",
                                 "iteration and stats lines": "steps+Running"}
"""Where a figure came from, in a table's cell beside it (`audit`)."""
TBT_HOW: dict[TbtFrom, str] = {"iteration lines": "the iteration lines' cadence",
                               "stats lines": "Running / generation tok/s",
                               "iteration and stats lines": "the iteration lines' cadence, else Running / "
                                                            "generation tok/s"}
"""Where a figure came from, in a sentence (`audit`'s verdict)."""


@dataclass(frozen=True)
class Tbt:
    """Little's law over some intervals."""

    intervals: int
    """The intervals it rests on."""
    generated: float
    """Their generation tok/s, summed."""
    streams: float
    """Their streams, summed."""
    source: TbtFrom | None
    """What the streams were read from (None: no interval)."""

    @property
    def per_request_tps(self) -> float | None:
        """One stream's speed: generation tok/s summed over streams summed."""
        return self.generated / self.streams if self.generated > 0 and self.streams > 0 else None

    @property
    def ms(self) -> float | None:
        """The time between a stream's tokens: 1000 / `per_request_tps`."""
        return 1000.0 * self.streams / self.generated if self.generated > 0 and self.streams > 0 else None


Column = Sequence[float] | Sequence[int] | np.ndarray
"""A summary column: an `array` of the intervals' values (read in place), a list or a numpy array."""


def _selector(rows: bytes | np.ndarray) -> np.ndarray:
    if isinstance(rows, bytes):
        selected: np.ndarray = np.frombuffer(rows, dtype=np.uint8) != 0
        return selected
    return np.asarray(rows, dtype=bool)


def little(generation: Column, prompt: Column, running: Column, streams: Column, rows: bytes | np.ndarray,
           stepped_rows: bytes | np.ndarray | None = None) -> Tbt:
    """Little's law over the intervals `rows` selects (1 or True: kept), from their columns: generation
    and prompt tok/s, Running count, and the steps' mean generation requests (NaN: no iteration line).
    An interval with iteration lines counts those (of the ones `stepped_rows` selects, if given: they
    need not be held); one without, its Running count, if it is decode-dominated. Intervals that
    generated nothing are left out.

    >>> t = little([400.0, 400.0, 300.0], [0.0, 0.0, 900.0], [4, 4, 4], [2.0, float("nan"), float("nan")],
    ...            bytes([1, 1, 1]))
    >>> t.intervals, t.ms, t.source
    (2, 7.5, 'iteration and stats lines')
    """
    gen = np.asarray(generation, dtype=np.float64)
    mean = np.asarray(streams, dtype=np.float64)
    keep = _selector(rows)
    stepped = ~np.isnan(mean)
    by_steps = stepped & (gen > 0) & (keep if stepped_rows is None else _selector(stepped_rows))
    decode = gen >= DECODE_MIN_SHARE * np.asarray(prompt, dtype=np.float64)
    by_running = ~stepped & keep & (gen > 0) & decode
    n_steps, n_running = int(by_steps.sum()), int(by_running.sum())
    source: TbtFrom | None = (None if not n_steps + n_running else "iteration lines" if not n_running
                              else "stats lines" if not n_steps else "iteration and stats lines")
    return Tbt(n_steps + n_running, float(gen[by_steps | by_running].sum()),
               float(mean[by_steps].sum()) + float(np.asarray(running, dtype=np.float64)[by_running].sum()),
               source)


def tbt_source(sources: Sequence[TbtFrom | None]) -> TbtFrom | None:
    """What figures of these sources rest on together.

    >>> tbt_source(["iteration lines", None, "stats lines"])
    'iteration and stats lines'
    """
    found = {s for s in sources if s is not None}
    return None if not found else found.pop() if len(found) == 1 else "iteration and stats lines"


_NOTES: dict[TbtFrom, str] = {
    "iteration lines": "each interval's steps' mean generation requests over its generation tok/s",
    "stats lines": "each interval's Running count over its generation tok/s (decode-dominated intervals)",
    "iteration and stats lines": "the steps' mean generation requests where an interval has them, "
                                 "else Running",
}


def tbt_note(source: TbtFrom | None) -> str | None:
    """The line that says where a table's TBT ms came from (None: no figure)."""
    return None if source is None else f"TBT ms from the {source}: {_NOTES[source]}."
