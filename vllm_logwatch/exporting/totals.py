"""`RunningTotal`: a counter that never goes down, whatever its source does."""

from __future__ import annotations

import math

DECIMALS = 6
"""The decimals a running total is read with: finer than any count it holds, coarser than float noise."""


class RunningTotal:
    """A counter that never goes down, fed increments (`add`) or a source's cumulative readings
    (`observe_total`, e.g. V0's spec-decode counts or the tailer's line count).

    A cumulative reading below the previous one means the source started over (vLLM or the tailer
    restarted): the old total is kept as a base, so the exported counter stays monotonic.

    Increments are summed with compensation (Neumaier), and the value is read rounded to
    `DECIMALS` decimals: token counts made of `rate x window` read `297518.0`, not
    `297517.99999999994` (rounding never makes a counter go down: it is monotonic).

    >>> t = RunningTotal()
    >>> t.observe_total(5); t.observe_total(2); t.value
    7.0
    >>> t = RunningTotal()
    >>> for _ in range(10): _ = t.add(0.1)
    >>> t.value
    1.0
    """

    __slots__ = ("_base", "_compensation", "_raw")

    def __init__(self) -> None:
        self._base = 0.0
        self._compensation = 0.0
        self._raw = 0.0

    @property
    def value(self) -> float:
        return round(self._base + self._compensation + self._raw, DECIMALS) + 0.0

    def add(self, amount: float | None) -> bool:
        """Count `amount` more (a missing, negative or zero amount adds nothing). False: refused, as an
        amount not finite, or one that would take the total past a float's range, would corrupt the
        counter for good (inf, then NaN); the caller counts the line it came from as unreadable."""
        if amount is None:
            return True
        if not math.isfinite(amount):
            return False
        return amount <= 0 or self._accumulate(amount, self._raw)

    def _accumulate(self, amount: float, raw: float) -> bool:
        """Add `amount` to the base; False (nothing added) when the total with the source's `raw` reading
        it will hold would not be finite."""
        total = self._base + amount
        if not math.isfinite(total + self._compensation + raw):
            return False
        if abs(self._base) >= abs(amount):
            self._compensation += (self._base - total) + amount
        else:
            self._compensation += (amount - total) + self._base
        self._base = total
        return True

    def observe_total(self, raw: float | None) -> None:
        """The source's own cumulative value now."""
        if raw is None or not math.isfinite(raw) or raw < 0:
            return
        if raw < self._raw and not self._accumulate(self._raw, raw):
            return  # the old total and this one do not fit a float together: refused
        if math.isfinite(self._base + self._compensation + raw):
            self._raw = float(raw)

    def restart(self) -> None:
        """The source starts over from zero (a new vLLM launch)."""
        if self._accumulate(self._raw, 0.0):
            self._raw = 0.0
