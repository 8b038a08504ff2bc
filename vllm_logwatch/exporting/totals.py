"""`RunningTotal`: a counter that never goes down, whatever its source does."""

from __future__ import annotations

import math

__all__ = ["RunningTotal"]


class RunningTotal:
    """A counter that never goes down, fed increments (`add`) or a source's cumulative readings
    (`observe_total`, e.g. V0's spec-decode counts or the tailer's line count).

    A cumulative reading below the previous one means the source started over (vLLM or the tailer
    restarted): the old total is kept as a base, so the exported counter stays monotonic.

    >>> t = RunningTotal()
    >>> t.observe_total(5); t.observe_total(2); t.value
    7.0
    """

    __slots__ = ("_base", "_raw")

    def __init__(self) -> None:
        self._base = 0.0
        self._raw = 0.0

    @property
    def value(self) -> float:
        return self._base + self._raw

    def add(self, amount: float | None) -> None:
        """Count `amount` more; a missing, negative or non-finite amount would corrupt the counter."""
        if amount is not None and math.isfinite(amount) and amount > 0:
            self._base += amount

    def observe_total(self, raw: float | None) -> None:
        """The source's own cumulative value now."""
        if raw is None or not math.isfinite(raw) or raw < 0:
            return
        if raw < self._raw:
            self._base += self._raw
        self._raw = float(raw)

    def restart(self) -> None:
        """The source starts over from zero (a new vLLM launch)."""
        self._base += self._raw
        self._raw = 0.0
